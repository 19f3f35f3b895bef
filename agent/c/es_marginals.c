/* Marginals (agent/marginals/__init__.py, build.py, release.py): one int32
 * total per group of every public marginal, born with exact discrete Laplace
 * noise of scale factor*q/sigma_w; a record adds 1 to one total of each
 * marginal. The update keeps no plan in memory: a marginal's cell index
 * (Horner over its <= 3 columns) and its offsets are recomputed per record,
 * so the state is exactly the totals the frame carries. */
#include "es_marginals.h"

/* cells of marginal w (at most ES_MARG_MAX_CELLS once valid) */
static uint32_t cells_of(const es_marginals_cfg_t *c, unsigned w)
{
    uint32_t cells = 1;
    unsigned k;
    for (k = 0; k < c->way[w]; k++)
        cells *= c->sizes[c->cols[3 * w + k]];
    return cells;
}

/* group totals of the whole state, or 0 when the parameters are invalid:
 * the checks memory safety and the budget rest on (the host applies the
 * Python agent's full ones, e.g. every group id used, distinct marginals) */
static uint32_t valid_totals(const es_marginals_cfg_t *c)
{
    uint32_t total = 0;
    const uint16_t *g;
    unsigned i, w, k;
    if (!c || !c->d || c->d > ES_MAX_CHANNELS || !c->n || c->n > ES_MARG_MAX || !c->sizes || !c->way ||
        !c->cols || !c->ngroups || !c->sigma || c->q < 1 || c->q > ES_MAX_SHARE || !c->schema ||
        !c->schema_len)
        return 0;
    for (i = 0; i < c->d; i++)
        if (c->sizes[i] < 2 || c->sizes[i] > ES_MARG_MAX_SIZE)
            return 0;
    g = c->groups;
    for (w = 0; w < c->n; w++) {
        uint32_t cells = 1, G = c->ngroups[w], j;
        if (c->way[w] < 1 || c->way[w] > ES_MARG_MAX_WAY || c->sigma[w] < 1 || c->sigma[w] > ES_MAX_SHARE)
            return 0;
        for (k = 0; k < c->way[w]; k++) {
            uint8_t col = c->cols[3 * w + k];
            if (col >= c->d || (k && col <= c->cols[3 * w + k - 1]))
                return 0;
            cells *= c->sizes[col]; /* <= 2**16 * 2**12 = 2**28: the product is checked at every step */
            if (cells > ES_MARG_MAX_CELLS)
                return 0;
        }
        if (G) { /* a public partition: every cell's group id below G */
            if (!g || G > cells)
                return 0;
            for (j = 0; j < cells; j++)
                if (g[j] >= G)
                    return 0;
            g += cells;
        } else {
            G = cells;
        }
        total += G;
        if (total > ES_MARG_MAX_TOTALS)
            return 0;
    }
    return total;
}

size_t es_marginals_mem_size(const es_marginals_cfg_t *c)
{
    return 4 * (size_t)valid_totals(c);
}

static int draw_noise(es_mech_t *base, es_drbg_t *rng);
static void encode(const es_mech_t *base, es_enc_t *e);
static const es_mech_ops_t marginals_ops = {draw_noise, encode, NULL};

int es_marginals_init(es_marginals_t *m, const es_marginals_cfg_t *c, uint8_t factor, void *mem,
                      size_t size)
{
    int st = es_mech_init(&m->base, sizeof *m, &marginals_ops, factor, mem, size, es_marginals_mem_size(c));
    if (st != ES_OK)
        return st;
    m->cfg = c;
    m->totals = (int32_t *)mem;
    return ES_OK;
}

/* agent/marginals/build.py draw_noise: every scale checked first, then marginal
 * by marginal, group 0 to G-1, scale factor*q/sigma_w (the draw order of Python) */
static int draw_noise(es_mech_t *base, es_drbg_t *rng)
{
    es_marginals_t *m = (es_marginals_t *)base;
    const es_marginals_cfg_t *c = m->cfg;
    uint64_t num = c->q * base->factor;
    int32_t *t = m->totals;
    unsigned w;
    int st;
    for (w = 0; w < c->n; w++)
        if (!es_dlap_scale_ok(num, c->sigma[w]))
            return ES_E_CONFIG;
    for (w = 0; w < c->n; w++) {
        uint32_t G = c->ngroups[w] ? c->ngroups[w] : cells_of(c, w);
        if ((st = es_dlap_fill(rng, t, G, num, c->sigma[w])) != ES_OK)
            return st;
        t += G;
    }
    return ES_OK;
}

int es_marginals_count(es_marginals_t *m, const uint16_t *cell)
{
    const es_marginals_cfg_t *c = m->cfg;
    const uint16_t *g = c->groups;
    int32_t *t = m->totals;
    unsigned w, k;
    int st = es_mech_ready(&m->base);
    if (st != ES_OK)
        return st;
    if (m->items >= ES_MAX_ITEMS) { /* totals hold |noise| < 2**29 plus one per record */
        m->base.full = 1; /* this record is lost: the state may not be released */
        return ES_E_FULL;
    }
    m->items++;
    for (w = 0; w < c->n; w++) {
        const uint8_t *cols = c->cols + 3 * w;
        uint32_t j = 0, cells = 1;
        for (k = 0; k < c->way[w]; k++) { /* C order: the last column varies fastest */
            uint32_t size = c->sizes[cols[k]], v = cell[cols[k]];
            j = j * size + (v < size ? v : size - 1); /* clamped: the entry is public, the index in bounds */
            cells *= size;
        }
        if (c->ngroups[w]) {
            t[g[j]]++;
            g += cells;
            t += c->ngroups[w];
        } else {
            t[j]++;
            t += cells;
        }
    }
    return ES_OK;
}

int es_marginals_update_i32(es_marginals_t *m, const int32_t *x, size_t n)
{
    const es_marginals_cfg_t *c = m->cfg;
    uint16_t cell[ES_MAX_CHANNELS];
    size_t k;
    unsigned i;
    for (k = 0; k < n; k++, x += c->d) {
        int st;
        for (i = 0; i < c->d; i++) /* out of [0, size): the column's "other" cell, the last */
            cell[i] = x[i] >= 0 && x[i] < (int32_t)c->sizes[i] ? (uint16_t)x[i] : (uint16_t)(c->sizes[i] - 1);
        if ((st = es_marginals_count(m, cell)) != ES_OK)
            return st;
    }
    return ES_OK;
}

/* agent/marginals/release.py: the mechanism map, keys in sorted byte order */
static void encode(const es_mech_t *base, es_enc_t *e)
{
    const es_marginals_t *m = (const es_marginals_t *)base;
    const es_marginals_cfg_t *c = m->cfg;
    const uint16_t *g = c->groups;
    uint64_t budget = 0;
    uint32_t total = 0;
    unsigned w, k;
    for (w = 0; w < c->n; w++) {
        budget += c->sigma[w]; /* at most 256 * 2**48 */
        total += c->ngroups[w] ? c->ngroups[w] : cells_of(c, w);
    }
    es_enc_map(e, 8);
    es_enc_key(e, "budget");
    es_enc_array(e, 2);
    es_enc_uint(e, budget);
    es_enc_uint(e, c->q);
    es_enc_key(e, "cols");
    es_enc_array(e, c->n);
    for (w = 0; w < c->n; w++) {
        es_enc_array(e, c->way[w]);
        for (k = 0; k < c->way[w]; k++)
            es_enc_uint(e, c->cols[3 * w + k]);
    }
    es_enc_key(e, "groups");
    es_enc_array(e, c->n);
    for (w = 0; w < c->n; w++) {
        if (!c->ngroups[w]) {
            es_enc_nil(e);
            continue;
        }
        es_enc_u16_le(e, g, cells_of(c, w));
        g += cells_of(c, w);
    }
    es_enc_key(e, "kind");
    es_enc_key(e, "marginals");
    es_enc_key(e, "q");
    es_enc_uint(e, c->q);
    es_enc_key(e, "schema");
    es_enc_raw(e, c->schema, c->schema_len);
    es_enc_key(e, "sigma");
    es_enc_u64_array(e, c->sigma, c->n);
    es_enc_key(e, "totals");
    es_enc_i32_le(e, m->totals, total);
}
