/* PrivHP device state (agent/privhp/__init__.py, agent/privhp/build.py,
 * agent/privhp/release.py): a noisy complete tree to level L and one private
 * count-min (or count) sketch per deeper level, in caller memory. Noise is
 * drawn at construction, before any reading (privacy rule 2). */
#include <string.h>

#include "es_privhp.h"

#define MAX_COUNTERS (1UL << 24)

static unsigned floor_log2(uint32_t k)
{
    unsigned n = 0;
    while (k > 1) {
        k >>= 1;
        n++;
    }
    return n;
}

static unsigned level_l(const es_privhp_cfg_t *c)
{
    unsigned L = floor_log2(c->k);
    return L > c->r ? c->r : L;
}

static int valid(const es_privhp_cfg_t *c)
{
    unsigned l;
    if (!(c && c->d >= 1 && c->d <= ES_MAX_CHANNELS && c->r >= 1 && c->r <= ES_MAX_DEPTH &&
          c->k >= 1 && c->w >= 1 && c->w <= ES_MAX_WIDTH && (c->w & (c->w - 1)) == 0 &&
          c->j >= 1 && c->j <= 16 && c->sketch <= ES_CS && c->q >= 1 && c->q <= ES_MAX_SHARE &&
          c->clamp_p <= ES_MAX_SHARE && c->sigma && c->lo_bits && c->hi_bits && c->names && c->hash_seed))
        return 0;
    for (l = 0; l <= c->r; l++)
        if (c->sigma[l] < 1 || c->sigma[l] > ES_MAX_SHARE)
            return 0;
    return 1;
}

/* counters and hash parameters: (tree, sketch, hash) item counts */
static void sizes(const es_privhp_cfg_t *c, uint32_t n[3])
{
    unsigned L = level_l(c);
    n[0] = ((uint32_t)1 << (L + 1)) - 1;
    n[1] = (uint32_t)(c->r - L) * c->j * c->w;
    n[2] = (uint32_t)(c->r - L) * c->j * (c->sketch == ES_CS ? 8 : 4);
}

size_t es_privhp_mem_size(const es_privhp_cfg_t *c)
{
    uint32_t n[3];
    if (!valid(c))
        return 0;
    sizes(c, n);
    if (n[0] + n[1] > MAX_COUNTERS)
        return 0;
    return 4 * (size_t)(n[0] + n[1]) + ((2 * (size_t)n[2] + 3) & ~(size_t)3);
}

unsigned es_privhp_bits(const es_privhp_cfg_t *c, unsigned i)
{
    return i < c->r ? (c->r - i + c->d - 1) / c->d : 0;
}

static int draw_noise(es_mech_t *base, es_drbg_t *rng);
static void encode(const es_mech_t *base, es_enc_t *e);
static const es_mech_ops_t privhp_ops = {draw_noise, encode, NULL};

int es_privhp_init(es_privhp_t *m, const es_privhp_cfg_t *c, uint8_t factor, void *mem, size_t size)
{
    uint32_t n[3];
    unsigned i;
    int st = es_mech_init(&m->base, sizeof *m, &privhp_ops, factor, mem, size, es_privhp_mem_size(c));
    if (st != ES_OK)
        return st;
    sizes(c, n);
    m->cfg = c;
    m->L = (uint8_t)level_l(c);
    m->per = c->sketch == ES_CS ? 8 : 4;
    for (i = 0; i < c->d; i++)
        m->bits[i] = (uint8_t)es_privhp_bits(c, i);
    m->tree = (int32_t *)mem;
    m->sketch = m->tree + n[0];
    m->hash = (uint16_t *)(m->sketch + n[1]);
    es_derive_params(c->hash_seed, c->hash_seed_len, m->hash, n[2]);
    return ES_OK;
}

/* agent/privhp/build.py draw_noise: tree levels 0..L, then every sketch row,
 * then the clamp counter; scales q/sigma_l per tree counter, j*q/sigma_l per
 * sketch cell (times the relation factor) */
static int draw_noise(es_mech_t *base, es_drbg_t *rng)
{
    es_privhp_t *m = (es_privhp_t *)base;
    const es_privhp_cfg_t *c = m->cfg;
    uint64_t q = c->q * base->factor;
    unsigned l, L = m->L, rows = (unsigned)(c->r - L) * c->j;
    int st;
    for (l = 0; l <= c->r; l++)
        if (!es_dlap_scale_ok((l > L ? c->j : 1) * q, c->sigma[l]))
            return ES_E_CONFIG;
    if (c->clamp_p && !es_dlap_scale_ok(q, c->clamp_p))
        return ES_E_CONFIG;
    for (l = 0; l <= L; l++)
        if ((st = es_dlap_fill(rng, m->tree + ((1UL << l) - 1), 1UL << l, q, c->sigma[l])) != ES_OK)
            return st;
    for (l = 0; l < rows; l++)
        if ((st = es_dlap_fill(rng, m->sketch + (size_t)l * c->w, c->w, c->j * q,
                               c->sigma[L + 1 + l / c->j])) != ES_OK)
            return st;
    m->clamp = 0;
    if (c->clamp_p) {
        m->clamp = es_dlap(rng, q, c->clamp_p);
        if (rng->err)
            return rng->err;
    }
    return ES_OK;
}

int es_privhp_count(es_privhp_t *m, const uint32_t *code, int clamped)
{
    const es_privhp_cfg_t *c = m->cfg;
    /* locals: the counter stores could otherwise alias (and reload) cfg fields */
    uint32_t path[ES_MAX_CHANNELS], v = 0, w = c->w, mask = w - 1;
    unsigned l, i = 0, r = c->r, d = c->d, L = m->L, j = c->j, per = m->per;
    int32_t *tree = m->tree;
    int32_t *cell = m->sketch;
    const uint16_t *h = m->hash;
    int st = es_mech_ready(&m->base);
    if (st != ES_OK)
        return st;
    if (m->items >= ES_MAX_ITEMS) {
        m->base.full = 1; /* this reading is lost: the state may not be released */
        return ES_E_FULL;
    }
    m->items++;
    if (clamped && c->clamp_p)
        m->clamp++;
    memcpy(path, code, d * sizeof path[0]);
    tree[0]++;
    for (l = 1; l <= r; l++) {
        /* level l splits channel (l-1) mod d: take that channel's next path bit */
        v = v << 1 | path[i] >> 31;
        path[i] <<= 1;
        if (++i == d)
            i = 0;
        if (l <= L) {
            tree[((uint32_t)1 << l) - 1 + v]++;
        } else {
            /* heap id below 2**30 in 14-bit limbs: every sum stays below 2**30 */
            uint32_t node = v + ((uint32_t)1 << l);
            uint32_t x0 = node & 16383, x1 = (node >> 14) & 16383, x2 = node >> 28;
            unsigned row;
            for (row = 0; row < j; row++, h += per, cell += w) {
                uint32_t col = (h[0] + h[1] * x0 + h[2] * x1 + h[3] * x2) % ES_HASH_P & mask;
                if (per == 8 && (h[4] + h[5] * x0 + h[6] * x1 + h[7] * x2) % ES_HASH_P & 1)
                    cell[col]--;
                else
                    cell[col]++;
            }
        }
    }
    return ES_OK;
}

/* agent/privhp/release.py: the mechanism map, keys in sorted byte order */
static void encode(const es_mech_t *base, es_enc_t *e)
{
    const es_privhp_t *m = (const es_privhp_t *)base;
    const es_privhp_cfg_t *c = m->cfg;
    uint32_t n[3];
    uint64_t total = c->clamp_p;
    unsigned i;
    sizes(c, n);
    for (i = 0; i <= c->r; i++)
        total += c->sigma[i];
    es_enc_map(e, 18);
    es_enc_key(e, "budget");
    es_enc_array(e, 2);
    es_enc_uint(e, total);
    es_enc_uint(e, c->q);
    es_enc_key(e, "clamp");
    if (c->clamp_p)
        es_enc_int(e, m->clamp);
    else
        es_enc_nil(e);
    es_enc_key(e, "clamp_p");
    es_enc_uint(e, c->clamp_p);
    es_enc_key(e, "hash");
    es_enc_u16_le(e, m->hash, n[2]);
    es_enc_key(e, "hash_p");
    es_enc_uint(e, ES_HASH_P);
    es_enc_key(e, "hi");
    es_enc_bounds(e, c->hi_bits, c->int_mask, c->d);
    es_enc_key(e, "j");
    es_enc_uint(e, c->j);
    es_enc_key(e, "k");
    es_enc_uint(e, c->k);
    es_enc_key(e, "kind");
    es_enc_key(e, "privhp");
    es_enc_key(e, "lo");
    es_enc_bounds(e, c->lo_bits, c->int_mask, c->d);
    es_enc_key(e, "names");
    es_enc_strs(e, c->names, c->d);
    es_enc_key(e, "q");
    es_enc_uint(e, c->q);
    es_enc_key(e, "r");
    es_enc_uint(e, c->r);
    es_enc_key(e, "sigma");
    es_enc_u64_array(e, c->sigma, c->r + 1u);
    es_enc_key(e, "sketch");
    es_enc_key(e, c->sketch == ES_CS ? "cs" : "cms");
    es_enc_key(e, "sketches");
    es_enc_i32_le(e, m->sketch, n[1]);
    es_enc_key(e, "tree");
    es_enc_i32_le(e, m->tree, n[0]);
    es_enc_key(e, "w");
    es_enc_uint(e, c->w);
}
