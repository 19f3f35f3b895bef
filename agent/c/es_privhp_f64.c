/* Float readings, or float bounds: the quantiser of agent/privhp/__init__.py with the
 * same IEEE-754 double operations in the same order (x - lo once, then per
 * level t = rem + rem, compare with the span, t - span), so the path bits are
 * those CPython and MicroPython compute. Doubling and the subtraction of a
 * span from t in [span, 2 span) are exact (Sterbenz), so only x - lo rounds,
 * exactly as in Python. Integer bounds must be below 2**53 in magnitude (the
 * host checks), so their conversion to double is exact and every mixed
 * int/float comparison Python makes exactly is exact here too.
 * Not the noise path: the noise never touches floating point. */
#include <float.h>

#include "es_privhp.h"

#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0
#error "es_privhp_f64.c needs plain binary64 arithmetic (FLT_EVAL_METHOD == 0)"
#endif

static int update_one(es_privhp_t *m, const double *x, uint32_t *code)
{
    const es_privhp_cfg_t *c = m->cfg;
    int clamped = 0;
    unsigned i, s;
    for (i = 0; i < c->d; i++) {
        double lo = c->lo_f[i], hi = c->hi_f[i], span = hi - lo, rem;
        uint32_t cd = 0;
        if (x[i] > hi) {
            rem = span;
            clamped = 1;
        } else if (x[i] >= lo) {
            rem = x[i] - lo;
        } else { /* below the box, or NaN */
            rem = 0.0;
            clamped = 1;
        }
        for (s = 0; s < m->bits[i]; s++) {
            double t = rem + rem;
            if (t >= span) {
                rem = t - span;
                cd |= (uint32_t)1 << (31 - s);
            } else {
                rem = t;
            }
        }
        code[i] = cd;
    }
    return es_privhp_count(m, code, clamped);
}

int es_privhp_update_f64(es_privhp_t *m, const double *x, size_t n)
{
    const es_privhp_cfg_t *c = m->cfg;
    uint32_t code[ES_MAX_CHANNELS];
    size_t k;
    int st = ES_OK;
    if (!c->lo_f || !c->hi_f || !es_f64_bounds_ok(c->lo_f, c->hi_f, c->d))
        return ES_E_CONFIG;
    for (k = 0; k < n && st == ES_OK; k++, x += c->d)
        st = update_one(m, x, code);
    es_wipe(code, sizeof code); /* the last reading's path codes: no trace of it left in RAM */
    return st;
}
