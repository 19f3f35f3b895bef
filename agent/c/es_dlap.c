/* Exact discrete Laplace sampling with integer arithmetic only: Canonne,
 * Kamath and Steinke 2020, Algorithms 1-2, draw for draw as agent/dlap.py.
 * Python's integers are unbounded; here every product is checked, and a draw
 * that would need more than 64 bits (probability below 1/(2**10)!) fails
 * closed with ES_E_RANGE instead of wrapping. */
#include "es_core.h"

static void fail(es_drbg_t *d)
{
    if (!d->err)
        d->err = ES_E_RANGE;
}

/* 1 with probability exp(-num/den), for 0 <= num <= den */
static int bern_exp_le1(es_drbg_t *d, uint64_t num, uint64_t den)
{
    uint64_t k = 1;
    for (;;) {
        if (den > UINT64_MAX / k) {
            fail(d);
            return 0;
        }
        if (!(es_below(d, den * k) < num) || d->err)
            break;
        k++;
    }
    return (int)(k & 1);
}

/* 1 with probability exp(-num/den), for any num >= 0 */
static int bern_exp(es_drbg_t *d, uint64_t num, uint64_t den)
{
    while (num > den) {
        if (!bern_exp_le1(d, 1, 1))
            return 0;
        num -= den;
    }
    return bern_exp_le1(d, num, den);
}

/* geometric on {0, 1, ...} with P[X = x] = (1 - e^(-s/t)) e^(-x s/t) */
static uint64_t geometric(es_drbg_t *d, uint64_t s, uint64_t t)
{
    uint64_t u, v = 0;
    for (;;) {
        u = es_below(d, t);
        if (d->err)
            return 0;
        if (bern_exp(d, u, t))
            break;
    }
    while (bern_exp_le1(d, 1, 1) && !d->err)
        v++;
    if (v && t > (UINT64_MAX - u) / v) {
        fail(d);
        return 0;
    }
    return (u + t * v) / s;
}

int64_t es_dlap(es_drbg_t *d, uint64_t num, uint64_t den)
{
    if (num < 1 || den < 1) {
        fail(d);
        return 0;
    }
    for (;;) {
        int negative = es_below(d, 2) != 0;
        uint64_t mag = geometric(d, den, num);
        if (d->err)
            return 0;
        if (negative && mag == 0)
            continue; /* +0 and -0 would otherwise double the mass at zero */
        if (mag >= (uint64_t)ES_NOISE_LIMIT) {
            fail(d);
            return 0;
        }
        return negative ? -(int64_t)mag : (int64_t)mag;
    }
}

int es_dlap_scale_ok(uint64_t num, uint64_t den)
{
    /* num <= den * 2**22, without the product (den may be 2**48) */
    uint64_t hi = num >> 22;
    return den >= 1 && (hi < den || (hi == den && !(num & ((1UL << 22) - 1))));
}

int es_dlap_fill(es_drbg_t *d, int32_t *t, uint32_t n, uint64_t num, uint64_t den)
{
    uint32_t i;
    for (i = 0; i < n; i++) {
        int64_t z = es_dlap(d, num, den);
        if (d->err)
            return d->err;
        t[i] = (int32_t)z; /* |z| < 2**29: es_dlap fails closed beyond */
    }
    return ES_OK;
}
