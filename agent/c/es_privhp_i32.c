/* Integer readings (ADC codes) on integer bounds: the quantiser of
 * agent/privhp/__init__.py as exact binary long division of (x - lo) by (hi - lo), one
 * path bit per level. Everything stays below 2**30; no floating point. */
#include "es_privhp.h"

static int update_one(es_privhp_t *m, const int32_t *x, uint32_t *code)
{
    const es_privhp_cfg_t *c = m->cfg;
    int clamped = 0;
    unsigned i, s;
    for (i = 0; i < c->d; i++) {
        int32_t lo = c->lo_i[i], hi = c->hi_i[i];
        uint32_t span = (uint32_t)((int64_t)hi - lo), rem, cd = 0;
        if (x[i] > hi) {
            rem = span;
            clamped = 1;
        } else if (x[i] >= lo) {
            rem = (uint32_t)((int64_t)x[i] - lo);
        } else {
            rem = 0;
            clamped = 1;
        }
        for (s = 0; s < m->bits[i]; s++) { /* branch-free: the bits are data */
            uint32_t t = rem + rem, ge = t >= span;
            rem = t - (span & (0u - ge));
            cd |= ge << (31 - s);
        }
        code[i] = cd;
    }
    return es_privhp_count(m, code, clamped);
}

int es_privhp_update_i32(es_privhp_t *m, const int32_t *x, size_t n)
{
    const es_privhp_cfg_t *c = m->cfg;
    uint32_t code[ES_MAX_CHANNELS];
    size_t k;
    int st = ES_OK;
    if ((c->int_mask + 1u) >> c->d != 1 || !c->lo_i || !c->hi_i ||
        !es_i32_bounds_ok(c->lo_i, c->hi_i, c->d, (1L << 29) - 1))
        return ES_E_CONFIG; /* some channel has float bounds: es_privhp_update_f64 */
    for (k = 0; k < n && st == ES_OK; k++, x += c->d)
        st = update_one(m, x, code);
    es_wipe(code, sizeof code); /* the last reading's path codes: no trace of it left in RAM */
    return st;
}
