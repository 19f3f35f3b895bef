/* Float readings, or float bounds, for the CDF trees: agent/cdf/__init__.py's binning
 * with the same IEEE-754 double operations in the same order, so the bins are
 * those CPython and MicroPython compute. Per channel, as CDF.update:
 *
 *   float bounds (mode 0): int((x - lo) * K / span), at most K - 1;
 *   integer bounds, span * K < 2**30 (mode 1): int((x - lo) * K // span), with
 *       Python's float floor division (fmod-based, below);
 *   integer bounds, larger (mode 2): long division over the bits of K, in doubles.
 *
 * On an integral reading below 2**53 every one of these operations is exact,
 * so this gives the bins of the exact integer path (es_cdf_update_i32) too.
 * Integer bounds must be below 2**53 in magnitude (the host checks). Not the
 * noise path: the noise never touches floating point. */
#include <float.h>
#include <math.h>

#include "es_cdf.h"

#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0
#error "es_cdf_f64.c needs plain binary64 arithmetic (FLT_EVAL_METHOD == 0)"
#endif

/* a // b for a >= 0, b > 0, as CPython and MicroPython compute it for floats */
static double py_floordiv(double a, double b)
{
    double mod = fmod(a, b), div = (a - mod) / b, fl;
    if (div == 0.0)
        return 0.0;
    fl = floor(div);
    return div - fl > 0.5 ? fl + 1.0 : fl;
}

/* bin of r = x - lo in (0, span] on integer bounds, span * K >= 2**30: the
 * long division of CDF.update, one step per bit of K from the top */
static double long_division(double r, double span, uint32_t K)
{
    double j = 0.0, rem = 0.0;
    int b = 31;
    while (!(K >> b & 1))
        b--;
    for (; b >= 0; b--) {
        j += j;
        rem += rem;
        if (K >> b & 1)
            rem += r;
        while (rem >= span) {
            rem -= span;
            j += 1.0;
        }
    }
    return j;
}

static uint32_t bin_of(const es_cdf_cfg_t *c, unsigned ch, double x)
{
    double lo = c->lo_f[ch], hi = c->hi_f[ch], span = hi - lo, r, t;
    double K = (double)c->K;
    if (x >= hi)
        return c->K - 1;
    if (!(x > lo)) /* at or below lo, or NaN */
        return 0;
    r = x - lo;
    if (!(c->int_mask >> ch & 1))
        t = r * K / span;
    else if (span * K < 1073741824.0)
        t = py_floordiv(r * K, span);
    else
        t = long_division(r, span, c->K);
    /* x - lo may round up to the span just below hi: the top bin, as in Python */
    return t < K ? (uint32_t)t : c->K - 1;
}

static void bins_f64(const es_cdf_cfg_t *c, const void *row, uint32_t *bin)
{
    const double *x = (const double *)row;
    unsigned ch;
    for (ch = 0; ch < c->d; ch++)
        bin[ch] = bin_of(c, ch, x[ch]);
}

int es_cdf_update_f64(es_cdf_t *m, const double *x, size_t n)
{
    const es_cdf_cfg_t *c = m->cfg;
    if (!c->lo_f || !c->hi_f || !es_f64_bounds_ok(c->lo_f, c->hi_f, c->d))
        return ES_E_CONFIG;
    return es_cdf_rows(m, x, n, sizeof *x * c->d, bins_f64);
}
