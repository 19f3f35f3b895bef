/* Profile sketch (agent/profile/__init__.py, agent/profile/build.py,
 * agent/profile/release.py): one counter per id of a public domain [lo, hi),
 * born with discrete Laplace noise and saturating at a public cap, so each
 * holds min(h + Z, cap), never clipped from below. With a sample, an id of the
 * universe [0, 2**bits) is first mapped by a keyed 4-round Feistel permutation
 * (a public, data-independent sample: the keys travel in the frame). */
#include "es_profile.h"

#define MAX_ID_END (1UL << 29)
#define MAX_CAP (1UL << 24)

static int valid(const es_profile_cfg_t *c)
{
    if (!c || c->lo >= c->hi || c->hi - c->lo > ES_PROFILE_MAX_IDS || c->hi > MAX_ID_END ||
        c->cap < 1 || c->cap > MAX_CAP || c->p < 1 || c->p > ES_MAX_SHARE || c->q < 1 ||
        c->q > ES_MAX_SHARE || !c->names)
        return 0;
    if (!c->bits)
        return 1;
    return !(c->bits & 1) && c->bits >= 2 && c->bits <= 28 && c->seed && c->seed_len &&
           c->hi <= (uint32_t)1 << c->bits;
}

size_t es_profile_mem_size(const es_profile_cfg_t *c)
{
    return valid(c) ? 4 * (size_t)(c->hi - c->lo) : 0;
}

static int draw_noise(es_mech_t *base, es_drbg_t *rng);
static void encode(const es_mech_t *base, es_enc_t *e);
static const es_mech_ops_t profile_ops = {draw_noise, encode, NULL};

int es_profile_init(es_profile_t *m, const es_profile_cfg_t *c, uint8_t factor, void *mem,
                    size_t size)
{
    int st = es_mech_init(&m->base, sizeof *m, &profile_ops, factor, mem, size, es_profile_mem_size(c));
    if (st != ES_OK)
        return st;
    m->cfg = c;
    m->ctr = (int32_t *)mem;
    if (c->bits)
        es_derive_params(c->seed, c->seed_len, m->keys, 8);
    return ES_OK;
}

/* agent/profile/build.py draw_noise: one reading changes one counter by 1, so
 * scale factor*q/p makes the counters (p/q)-DP. The noise itself is saturated
 * at the cap, so every counter holds min(h + Z, cap) from the first moment. */
static int draw_noise(es_mech_t *base, es_drbg_t *rng)
{
    es_profile_t *m = (es_profile_t *)base;
    const es_profile_cfg_t *c = m->cfg;
    uint64_t num = c->q * base->factor;
    uint32_t i, n = c->hi - c->lo;
    int32_t cap = (int32_t)c->cap;
    int st;
    if (!es_dlap_scale_ok(num, c->p))
        return ES_E_CONFIG;
    if ((st = es_dlap_fill(rng, m->ctr, n, num, c->p)) != ES_OK)
        return st;
    for (i = 0; i < n; i++)
        if (m->ctr[i] > cap)
            m->ctr[i] = cap;
    return ES_OK;
}

int es_profile_update_i32(es_profile_t *m, const int32_t *id, size_t n)
{
    const es_profile_cfg_t *c = m->cfg;
    uint32_t lo = c->lo, count = c->hi - c->lo, half = c->bits >> 1, mask = (1u << half) - 1;
    int32_t cap = (int32_t)c->cap;
    size_t k;
    int st = es_mech_ready(&m->base);
    if (st != ES_OK)
        return st;
    for (k = 0; k < n; k++) {
        uint32_t v = (uint32_t)id[k], i;
        if (c->bits) {
            uint32_t left, right, t;
            unsigned r;
            if (id[k] < 0 || v >> c->bits)
                continue; /* outside the universe: not sampled */
            left = v >> half;
            right = v & mask;
            for (r = 0; r < 4; r++) { /* a * right + b < 2**29 */
                t = left ^ ((m->keys[2 * r] * right + m->keys[2 * r + 1]) % ES_HASH_P & mask);
                left = right;
                right = t;
            }
            v = left << half | right;
        }
        i = v - lo; /* wraps above the domain for ids below lo */
        if (i < count && m->ctr[i] < cap)
            m->ctr[i]++;
    }
    return ES_OK;
}

/* agent/profile/release.py: the mechanism map, keys in sorted byte order */
static void encode(const es_mech_t *base, es_enc_t *e)
{
    const es_profile_t *m = (const es_profile_t *)base;
    const es_profile_cfg_t *c = m->cfg;
    unsigned i;
    es_enc_map(e, 10);
    es_enc_key(e, "budget");
    es_enc_array(e, 2);
    es_enc_uint(e, c->p);
    es_enc_uint(e, c->q);
    es_enc_key(e, "cap");
    es_enc_uint(e, c->cap);
    es_enc_key(e, "counts");
    es_enc_i32_le(e, m->ctr, c->hi - c->lo);
    es_enc_key(e, "hi");
    es_enc_uint(e, c->hi);
    es_enc_key(e, "kind");
    es_enc_key(e, "profile");
    es_enc_key(e, "lo");
    es_enc_uint(e, c->lo);
    es_enc_key(e, "names");
    es_enc_strs(e, c->names, 1);
    es_enc_key(e, "p");
    es_enc_uint(e, c->p);
    es_enc_key(e, "q");
    es_enc_uint(e, c->q);
    es_enc_key(e, "sample");
    if (!c->bits) {
        es_enc_nil(e);
        return;
    }
    es_enc_map(e, 2);
    es_enc_key(e, "bits");
    es_enc_uint(e, c->bits);
    es_enc_key(e, "keys");
    es_enc_array(e, 8);
    for (i = 0; i < 8; i++)
        es_enc_uint(e, m->keys[i]);
}
