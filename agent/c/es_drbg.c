/* HMAC_DRBG with SHA-256 (NIST SP 800-90A 10.1.2) and the byte source of the
 * noise sampler, byte for byte as firmware_shims/drbg.py: 64-byte generate
 * requests, bytes consumed in order, exact rejection sampling in es_below.
 * The draw order is part of the cross-runtime contract. Seeding: es_drbg_platform
 * (the board's es_entropy_fill) and es_drbg_init (entropy the caller gathered)
 * pass firmware_shims/entropy.py's start-up health tests; es_drbg_seeded is for
 * tests and simulation only. */
#include <string.h>

#include "es_core.h"

#define RESEED_INTERVAL 0x3FFFFFFFUL /* as firmware_shims/drbg.py */
static const uint8_t PERS[] = "edgesynth-noise-v1";

/* K = HMAC(K, V || sep || provided); V = HMAC(K, V), for provided = a || b || c */
static void step(es_drbg_t *d, uint8_t sep, const uint8_t *a, size_t na, const uint8_t *b,
                 size_t nb, const uint8_t *c, size_t nc)
{
    es_hmac_t h;
    es_hmac_key(&h, d->k, 32);
    es_hmac_start(&h);
    es_hmac_update(&h, d->v, 32);
    es_hmac_update(&h, &sep, 1);
    es_hmac_update(&h, a, na);
    es_hmac_update(&h, b, nb);
    es_hmac_update(&h, c, nc);
    es_hmac_finish(&h, d->k);
    es_hmac_key(&h, d->k, 32);
    es_hmac_start(&h);
    es_hmac_update(&h, d->v, 32);
    es_hmac_finish(&h, d->v);
}

static void update(es_drbg_t *d, const uint8_t *a, size_t na, const uint8_t *b, size_t nb,
                   const uint8_t *c, size_t nc)
{
    step(d, 0, a, na, b, nb, c, nc);
    if (na + nb + nc)
        step(d, 1, a, na, b, nb, c, nc);
}

/* d refuses every draw from now on */
static int refuse(es_drbg_t *d)
{
    es_wipe(d, sizeof *d); /* ready = 0 too */
    d->err = ES_E_ENTROPY;
    d->pos = 64;
    return ES_E_ENTROPY;
}

/* the instantiate of HmacDrbg.__init__, for entropy already checked */
static int instantiate(es_drbg_t *d, const uint8_t *entropy, size_t n_entropy, const uint8_t *nonce,
                       size_t n_nonce)
{
    memset(d, 0, sizeof *d);
    d->pos = 64;
    memset(d->v, 1, 32);
    update(d, entropy, n_entropy, nonce, n_nonce, PERS, sizeof PERS - 1);
    d->ready = ES_DRBG_READY; /* the only place it is set */
    return ES_OK;
}

int es_drbg_ready(const es_drbg_t *d)
{
    return d && d->ready == ES_DRBG_READY && !d->err;
}

int es_entropy_health(const uint8_t *b, size_t n, const uint8_t *previous)
{
    uint32_t seen[8] = {0}, steps[8] = {0}; /* bitmaps of byte values and steps */
    unsigned distinct = 0, nsteps = 0;
    size_t i, period;
    if (!b || n < 8)
        return ES_E_ENTROPY;
    for (i = 0; i < n; i++) {
        uint8_t s = (uint8_t)(b[i] - b[i ? i - 1 : 0]);
        if (!(seen[b[i] >> 5] >> (b[i] & 31) & 1)) {
            seen[b[i] >> 5] |= 1UL << (b[i] & 31);
            distinct++;
        }
        if (i && !(steps[s >> 5] >> (s & 31) & 1)) {
            steps[s >> 5] |= 1UL << (s & 31);
            nsteps++;
        }
    }
    if (distinct < 4 || nsteps < 4)
        return ES_E_ENTROPY;
    for (period = 1; period <= 8; period <<= 1)
        if (period < n && memcmp(b + period, b, n - period) == 0)
            return ES_E_ENTROPY;
    if (previous && memcmp(previous, b, n) == 0)
        return ES_E_ENTROPY;
    return ES_OK;
}

int es_drbg_init(es_drbg_t *d, const uint8_t *entropy, size_t n_entropy, const uint8_t *nonce,
                 size_t n_nonce)
{
    if (n_entropy < 16 || es_entropy_health(entropy, n_entropy, NULL) != ES_OK)
        return refuse(d);
    return instantiate(d, entropy, n_entropy, nonce, n_nonce);
}

int es_drbg_seeded(es_drbg_t *d, const uint8_t *seed, size_t n)
{
    static const uint8_t nonce[] = "seeded";
    uint8_t material[16];
    size_t i;
    if (n >= 16)
        return instantiate(d, seed, n, nonce, sizeof nonce - 1);
    /* short seeds are padded with copies of their length byte (drbg.py) */
    for (i = 0; i < 16; i++)
        material[i] = i < n ? seed[i] : (uint8_t)n;
    return instantiate(d, material, 16, nonce, sizeof nonce - 1);
}

#ifdef __GNUC__
/* No entropy source until the board defines es_entropy_fill (a strong symbol
 * replaces this one): without it no noise can be drawn. */
__attribute__((weak)) int es_entropy_fill(uint8_t *buf, size_t n)
{
    (void)buf;
    (void)n;
    return -1;
}
#endif

int es_drbg_platform(es_drbg_t *d)
{
    /* entropy.py gather: the entropy block, then the nonce, each health-tested;
     * the nonce must not repeat the entropy's first 16 bytes */
    uint8_t entropy[ES_ENTROPY_BYTES], nonce[ES_NONCE_BYTES];
    int st = ES_E_ENTROPY;
    if (es_entropy_fill(entropy, sizeof entropy) == 0 &&
        es_entropy_health(entropy, sizeof entropy, NULL) == ES_OK &&
        es_entropy_fill(nonce, sizeof nonce) == 0 &&
        es_entropy_health(nonce, sizeof nonce, entropy) == ES_OK)
        st = instantiate(d, entropy, sizeof entropy, nonce, sizeof nonce);
    es_wipe(entropy, sizeof entropy); /* the DRBG's seed material */
    es_wipe(nonce, sizeof nonce);
    return st == ES_OK ? ES_OK : refuse(d);
}

static void generate(es_drbg_t *d)
{
    es_hmac_t h;
    unsigned i;
    if (d->requests >= RESEED_INTERVAL) {
        d->err = ES_E_ENTROPY;
        return;
    }
    for (i = 0; i < 2; i++) {
        es_hmac_key(&h, d->k, 32);
        es_hmac_start(&h);
        es_hmac_update(&h, d->v, 32);
        es_hmac_finish(&h, d->v);
        memcpy(d->buf + 32 * i, d->v, 32);
    }
    update(d, NULL, 0, NULL, 0, NULL, 0);
    d->requests++;
    d->pos = 0;
}

static uint8_t byte(es_drbg_t *d)
{
    if (d->ready != ES_DRBG_READY) /* never instantiated: no key, no bytes */
        d->err = ES_E_ENTROPY;
    else if (d->pos >= 64)
        generate(d);
    if (d->err)
        return 0;
    return d->buf[d->pos++];
}

uint64_t es_below(es_drbg_t *d, uint64_t m)
{
    /* k bytes, span = 2**(8k) the smallest power of 256 >= m; accept v below
     * the largest multiple of m, span - span % m, i.e. v <= top - rem */
    unsigned k = 1, i;
    uint64_t top, rem;
    if (m <= 1)
        return 0;
    while (k < 8 && (m - 1) >> (8 * k))
        k++;
    top = UINT64_MAX >> (64 - 8 * k); /* span - 1 */
    rem = (top % m + 1) % m;          /* span % m */
    for (;;) {
        uint64_t v = 0;
        for (i = 0; i < k; i++)
            v = v << 8 | byte(d);
        if (d->err)
            return 0;
        if (v <= top - rem)
            return v % m;
    }
}

void es_wipe(void *p, size_t n)
{
    volatile uint8_t *q = (volatile uint8_t *)p;
    while (n--)
        *q++ = 0;
}

void es_drbg_retire(es_drbg_t *d)
{
    refuse(d); /* sticky: a wiped DRBG must not look like a fresh one */
}
