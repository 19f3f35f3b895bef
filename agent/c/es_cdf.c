/* CDF tree state (agent/cdf/__init__.py, agent/cdf/build.py, agent/cdf/release.py):
 * per channel, a level-uniform tree over K bins with branching (n_1..n_m),
 * every node a counter born with its own discrete Laplace noise. Level i holds
 * ceil(K / P_i) nodes, P_i = n_{i+1} * ... * n_m leaves under each: nodes that
 * cover padding only are not stored (they are zero on every stream). Counters
 * are laid out as the frame carries them: channel, level 1..m, left to right.
 * A reading adds 1 to one node per level in each channel. */
#include "es_cdf.h"

#define MAX_LEAVES (1UL << 29)
#define MAX_COUNTERS (1UL << 24)

/* counters per channel (sum of the level widths), or 0 if c is invalid */
static uint32_t per_channel(const es_cdf_cfg_t *c)
{
    uint32_t w, per = 0, leaves = 1;
    unsigned i;
    if (!c || c->d < 1 || c->d > ES_MAX_CHANNELS || c->m < 1 || c->m > ES_CDF_MAX_LEVELS ||
        c->K < 2 || c->K > ES_CDF_MAX_BINS || !c->branching || c->q < 1 || c->q > ES_MAX_SHARE ||
        !c->sigma || !c->lo_bits || !c->hi_bits || !c->names)
        return 0;
    for (i = 0; i < c->m; i++) {
        if (c->branching[i] < 2 || c->branching[i] > MAX_LEAVES / leaves || c->sigma[i] < 1 ||
            c->sigma[i] > ES_MAX_SHARE)
            return 0;
        leaves *= c->branching[i];
    }
    if (leaves < c->K)
        return 0;
    /* bottom up: level m has K nodes, level i-1 has ceil(width_i / n_i) */
    for (w = c->K, i = c->m; i > 0; i--) {
        per += w;
        w = (w + c->branching[i - 1] - 1) / c->branching[i - 1];
    }
    return per;
}

size_t es_cdf_mem_size(const es_cdf_cfg_t *c)
{
    uint32_t per = per_channel(c);
    if (!per || per > MAX_COUNTERS / c->d)
        return 0;
    return 4 * (size_t)per * c->d;
}

static int draw_noise(es_mech_t *base, es_drbg_t *rng);
static void encode(const es_mech_t *base, es_enc_t *e);
static const es_mech_ops_t cdf_ops = {draw_noise, encode, NULL};

int es_cdf_init(es_cdf_t *m, const es_cdf_cfg_t *c, uint8_t factor, void *mem, size_t size)
{
    int st = es_mech_init(&m->base, sizeof *m, &cdf_ops, factor, mem, size, es_cdf_mem_size(c));
    if (st != ES_OK)
        return st;
    m->cfg = c;
    m->nodes = (int32_t *)mem;
    m->per = per_channel(c);
    return ES_OK;
}

void es_cdf_levels(const es_cdf_cfg_t *c, es_cdf_levels_t *lv)
{
    uint32_t P = 1, w;
    unsigned i, s;
    for (i = c->m; i-- > 0;) { /* bottom up: P_m = 1, P_{i-1} = P_i * n_i */
        lv->P[i] = P;
        for (s = 0; s < 32 && ((uint32_t)1 << s) < P; s++)
            ;
        lv->shift[i] = ((uint32_t)1 << s) == P ? (uint8_t)s : 0xFF;
        P *= c->branching[i];
    }
    for (lv->at[0] = 0, i = 0; i < c->m; i++) { /* top down: level i holds ceil(K / P_i) nodes */
        w = (c->K + lv->P[i] - 1) / lv->P[i];
        lv->at[i + 1] = lv->at[i] + w;
    }
}

/* agent/cdf/build.py draw_noise: channel by channel, level 1 to m, left to
 * right. A reading moves one node per level in each of the d channels, so
 * level i has l1 sensitivity d * factor and gets scale d*factor*q / sigma_i. */
static int draw_noise(es_mech_t *base, es_drbg_t *rng)
{
    es_cdf_t *m = (es_cdf_t *)base;
    const es_cdf_cfg_t *c = m->cfg;
    uint64_t num = (uint64_t)c->d * base->factor * c->q;
    int32_t *t = m->nodes;
    unsigned ch, i, k;
    for (i = 0; i < c->m; i++)
        if (!es_dlap_scale_ok(num, c->sigma[i]))
            return ES_E_CONFIG;
    /* no es_cdf_levels_t here: this chain (sampler, DRBG, SHA-256) is the deepest stack */
    for (ch = 0; ch < c->d; ch++)
        for (i = 0; i < c->m; i++) {
            uint32_t P = 1, w;
            int st;
            for (k = i + 1; k < c->m; k++)
                P *= c->branching[k];
            w = (c->K + P - 1) / P; /* level i+1 holds ceil(K / P) nodes */
            if ((st = es_dlap_fill(rng, t, w, num, c->sigma[i])) != ES_OK)
                return st;
            t += w;
        }
    return ES_OK;
}

int es_cdf_count(es_cdf_t *m, const es_cdf_levels_t *lv, const uint32_t *bin)
{
    const es_cdf_cfg_t *c = m->cfg;
    int32_t *nodes = m->nodes;
    unsigned ch, i;
    int st = es_mech_ready(&m->base);
    if (st != ES_OK)
        return st;
    if (m->items >= ES_MAX_ITEMS) {
        m->base.full = 1; /* this reading is lost: the state may not be released */
        return ES_E_FULL;
    }
    for (ch = 0; ch < c->d; ch++) /* before any count: a bin beyond K would write past the level */
        if (bin[ch] >= c->K)
            return ES_E_INPUT;
    m->items++;
    for (ch = 0; ch < c->d; ch++, nodes += m->per) /* level i's node: bin // P_i */
        for (i = 0; i < c->m; i++)
            nodes[lv->at[i] + (lv->shift[i] != 0xFF ? bin[ch] >> lv->shift[i] : bin[ch] / lv->P[i])]++;
    return ES_OK;
}

int es_cdf_rows(es_cdf_t *m, const void *x, size_t n, size_t row_bytes, es_cdf_binner_t binner)
{
    const uint8_t *row = (const uint8_t *)x;
    uint32_t bin[ES_MAX_CHANNELS];
    es_cdf_levels_t lv;
    size_t k;
    int st = ES_OK;
    es_cdf_levels(m->cfg, &lv);
    for (k = 0; k < n && st == ES_OK; k++, row += row_bytes) {
        binner(m->cfg, row, bin);
        st = es_cdf_count(m, &lv, bin);
    }
    es_wipe(bin, sizeof bin); /* the last reading's bins: no trace of it left in RAM */
    return st;
}

/* floor((x - lo) * K / span) per channel, exactly: span < 2**28 */
static void bins_i32(const es_cdf_cfg_t *c, const void *row, uint32_t *bin)
{
    const int32_t *x = (const int32_t *)row;
    unsigned ch;
    for (ch = 0; ch < c->d; ch++) {
        int32_t lo = c->lo_i[ch], hi = c->hi_i[ch];
        if (x[ch] >= hi) {
            bin[ch] = c->K - 1;
        } else if (x[ch] > lo) {
            uint32_t r = (uint32_t)((int64_t)x[ch] - lo), span = (uint32_t)((int64_t)hi - lo);
            uint64_t t = (uint64_t)r * c->K;
            /* 32-bit division where the product fits: no libgcc call on a 32-bit MCU */
            bin[ch] = t >> 32 ? (uint32_t)(t / span) : (uint32_t)t / span;
        } else {
            bin[ch] = 0;
        }
    }
}

int es_cdf_update_i32(es_cdf_t *m, const int32_t *x, size_t n)
{
    const es_cdf_cfg_t *c = m->cfg;
    if ((c->int_mask + 1u) >> c->d != 1 || !c->lo_i || !c->hi_i ||
        !es_i32_bounds_ok(c->lo_i, c->hi_i, c->d, (1L << 28) - 1))
        return ES_E_CONFIG; /* some channel has float bounds: es_cdf_update_f64 */
    return es_cdf_rows(m, x, n, sizeof *x * c->d, bins_i32);
}

/* agent/cdf/release.py: the mechanism map, keys in sorted byte order */
static void encode(const es_mech_t *base, es_enc_t *e)
{
    const es_cdf_t *m = (const es_cdf_t *)base;
    const es_cdf_cfg_t *c = m->cfg;
    uint64_t total = 0;
    unsigned i;
    for (i = 0; i < c->m; i++)
        total += c->sigma[i];
    es_enc_map(e, 10);
    es_enc_key(e, "bins");
    es_enc_uint(e, c->K);
    es_enc_key(e, "branching");
    es_enc_array(e, c->m);
    for (i = 0; i < c->m; i++)
        es_enc_uint(e, c->branching[i]);
    es_enc_key(e, "budget");
    es_enc_array(e, 2);
    es_enc_uint(e, total);
    es_enc_uint(e, c->q);
    es_enc_key(e, "hi");
    es_enc_bounds(e, c->hi_bits, c->int_mask, c->d);
    es_enc_key(e, "kind");
    es_enc_key(e, "cdf");
    es_enc_key(e, "lo");
    es_enc_bounds(e, c->lo_bits, c->int_mask, c->d);
    es_enc_key(e, "names");
    es_enc_strs(e, c->names, c->d);
    es_enc_key(e, "nodes");
    es_enc_i32_le(e, m->nodes, (size_t)m->per * c->d);
    es_enc_key(e, "q");
    es_enc_uint(e, c->q);
    es_enc_key(e, "sigma");
    es_enc_u64_array(e, c->sigma, c->m);
}
