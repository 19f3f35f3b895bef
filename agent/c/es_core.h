/* edgesynth native core: the device agent's state, update, noise and release
 * in portable C99, byte-identical to the Python agent (agent/, firmware_shims/),
 * for its mechanisms: privhp, cdf, profile and marginals, alone or several on
 * one device, and the continual phdstream (alone).
 *
 * No malloc: every table lives in memory the caller provides (its size comes
 * from es_<kind>_mem_size). No floating point in the noise path: the sampler is
 * the exact integer discrete Laplace of agent/dlap.py over an HMAC_DRBG.
 * Only es_privhp_f64.c, es_cdf_f64.c and es_marginals_f64.c (float readings
 * or bounds) use doubles; integer firmware does not link them. docs/native.md
 * describes the API; docs/wire-format.md the frame.
 */
#ifndef ES_CORE_H
#define ES_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status codes (0 = success) -------------------------------------- */
#define ES_OK         0
#define ES_E_CONFIG  (-1) /* invalid public parameters                           */
#define ES_E_MEMORY  (-2) /* caller buffer too small or misaligned               */
#define ES_E_SEALED  (-3) /* update after release: would reuse noise (rule 5)    */
#define ES_E_FULL    (-4) /* ES_MAX_ITEMS readings counted: int32 could overflow;
                             the state then refuses every update and its release */
#define ES_E_ENTROPY (-5) /* DRBG refused: short entropy, a failed health test,
                             no board entropy source, or the reseed interval    */
#define ES_E_RANGE   (-6) /* a noise draw beyond +-2**29 (probability < e**-127) */
#define ES_E_SINK    (-7) /* the output sink failed or the buffer is too small   */
#define ES_E_INPUT   (-8) /* a reading the core cannot take (a bin beyond K; a
                             phdstream op other than +1/-1; in the generated
                             glue, an id that is not an integer) */
#define ES_E_NOISE   (-9) /* update or release of a state whose noise was never
                             drawn (es_agent_init failed or was not called)     */

/* ---- SHA-256 and HMAC-SHA256 (es_sha256.c) --------------------------- */
typedef struct {
    uint32_t h[8];
    uint64_t len;      /* bytes hashed so far */
    uint8_t buf[64];
} es_sha256_t;

void es_sha256_init(es_sha256_t *c);
void es_sha256_update(es_sha256_t *c, const uint8_t *p, size_t n);
void es_sha256_final(es_sha256_t *c, uint8_t out[32]);

typedef struct {
    uint8_t key[64];   /* the key, zero-padded (hashed first when longer than 64) */
    es_sha256_t inner;
} es_hmac_t;

void es_hmac_key(es_hmac_t *h, const uint8_t *key, size_t n);
void es_hmac_start(es_hmac_t *h);
void es_hmac_update(es_hmac_t *h, const uint8_t *p, size_t n);
void es_hmac_finish(es_hmac_t *h, uint8_t out[32]);

/* ---- HMAC_DRBG(SHA-256) and the sampler's byte source (es_drbg.c) ---- */
typedef struct {
    uint8_t k[32], v[32];
    uint32_t requests;  /* generate requests since instantiation */
    uint8_t buf[64];    /* the current 64-byte request being consumed */
    uint8_t pos;        /* next unread byte of buf; 64 = empty */
    int8_t err;         /* sticky: ES_E_ENTROPY or ES_E_RANGE; draws then return 0 */
    uint16_t ready;     /* ES_DRBG_READY once instantiated; 0 when zeroed, refused or
                           retired: draws then fail (ES_E_ENTROPY). Fills the padding:
                           sizeof stays 136 */
} es_drbg_t;

/* the readiness marker: a zeroed (static) es_drbg_t, never seeded, has 0 and must
 * not yield the fixed stream of an all-zero key */
#define ES_DRBG_READY 0x5EEDu

/* HmacDrbg(entropy, nonce): refuses (ES_E_ENTROPY, and d then refuses every draw)
 * entropy shorter than 16 bytes or failing es_entropy_health. */
int es_drbg_init(es_drbg_t *d, const uint8_t *entropy, size_t n_entropy,
                 const uint8_t *nonce, size_t n_nonce);
/* firmware_shims.drbg.seeded_source(seed): reproducible, tests/simulation only
 * (anyone who knows the seed can subtract the noise); no health test. */
int es_drbg_seeded(es_drbg_t *d, const uint8_t *seed, size_t n);

/* ---- entropy: the start-up health tests and the board's source (es_drbg.c) */
#define ES_ENTROPY_BYTES 48  /* entropy input es_drbg_platform draws (firmware_shims ENTROPY_BYTES) */
#define ES_NONCE_BYTES 16    /* then the nonce, a second draw */
/* firmware_shims/entropy.py health_check: ES_OK, or ES_E_ENTROPY when block[0..n)
 * is shorter than 8 bytes, has fewer than 4 distinct byte values or fewer than 4
 * distinct byte-to-byte steps (mod 256), repeats with period 1, 2, 4 or 8, or
 * equals previous[0..n) (previous may be NULL). Refuses exactly what Python refuses. */
int es_entropy_health(const uint8_t *block, size_t n, const uint8_t *previous);
/* THE BOARD'S ENTROPY HOOK: fill buf[0..n) from the platform's hardware RNG and
 * return 0, or return nonzero when it cannot. Firmware defines it; the core's
 * default (a weak symbol under GCC and Clang) returns failure, so a board that
 * defines none cannot draw noise (es_drbg_platform fails closed). */
int es_entropy_fill(uint8_t *buf, size_t n);
/* firmware_shims.drbg.platform_source(): ES_ENTROPY_BYTES of entropy, then
 * ES_NONCE_BYTES of nonce from es_entropy_fill, health-tested as entropy.py's
 * gather does (the nonce also must not repeat the entropy's first 16 bytes), then
 * es_drbg_init. ES_E_ENTROPY (and a DRBG refusing every draw) when the source
 * fails or a test does. The device's way to seed the DRBG es_agent_init consumes. */
int es_drbg_platform(es_drbg_t *d);
/* Wipe d (its buffered bytes are the last draws' randomness) and make it refuse
 * every further draw (err = ES_E_ENTROPY, ready cleared). */
void es_drbg_retire(es_drbg_t *d);
/* 1 when d (non-NULL) was instantiated by es_drbg_init, es_drbg_seeded or
 * es_drbg_platform and has not failed or been retired since; else 0, and every
 * draw from d fails with ES_E_ENTROPY. */
int es_drbg_ready(const es_drbg_t *d);
/* Zero n bytes at p through a volatile pointer: scratch the compiler may not elide. */
void es_wipe(void *p, size_t n);
uint64_t es_below(es_drbg_t *d, uint64_t m);  /* exact uniform in [0, m), m >= 1 */

/* ---- exact discrete Laplace (es_dlap.c) ------------------------------ */
#define ES_NOISE_LIMIT (1L << 29)
/* Scale num/den (both >= 1). Returns the draw; on failure sets d->err. */
int64_t es_dlap(es_drbg_t *d, uint64_t num, uint64_t den);
/* 1 when the scale num/den is at most 2**22, the cap of agent/spec.py check_scale */
int es_dlap_scale_ok(uint64_t num, uint64_t den);
/* t[0..n) := independent draws of scale num/den, in order; a DRBG failure is returned */
int es_dlap_fill(es_drbg_t *d, int32_t *t, uint32_t n, uint64_t num, uint64_t den);

/* ---- public hash parameters (es_hashing.c, agent/hashing.py) --------- */
#define ES_HASH_P 32749u
/* count values uniform in [0, ES_HASH_P) from the public seed (derive_params) */
void es_derive_params(const uint8_t *seed, size_t n, uint16_t *out, uint32_t count);

/* ---- msgpack writer streaming to a sink (es_msgpack.c) --------------- */
typedef int (*es_sink_fn)(void *ctx, const uint8_t *p, size_t n); /* 0 = ok */

#define ES_ENC_CHUNK 64
typedef struct {
    es_sink_fn sink;   /* NULL: only count bytes */
    void *ctx;
    es_hmac_t *mac;    /* when set, every flushed byte is also MACed */
    size_t n;          /* bytes written since reset */
    int err;
    uint16_t fill;
    uint8_t buf[ES_ENC_CHUNK];
} es_enc_t;

void es_enc_reset(es_enc_t *e, es_sink_fn sink, void *ctx, es_hmac_t *mac);
void es_enc_flush(es_enc_t *e);
void es_enc_raw(es_enc_t *e, const uint8_t *p, size_t n);
void es_enc_uint(es_enc_t *e, uint64_t v);
void es_enc_int(es_enc_t *e, int64_t v);
void es_enc_f64_bits(es_enc_t *e, uint64_t bits); /* float64 given as IEEE-754 bits */
void es_enc_nil(es_enc_t *e);
void es_enc_array(es_enc_t *e, uint32_t n);
void es_enc_map(es_enc_t *e, uint32_t n);
void es_enc_str(es_enc_t *e, const uint8_t *p, size_t n);
void es_enc_bin_head(es_enc_t *e, uint32_t n);
void es_enc_bin32_head(es_enc_t *e, uint32_t n);
void es_enc_i32_le(es_enc_t *e, const int32_t *v, size_t n);  /* packed items */
void es_enc_u16_le(es_enc_t *e, const uint16_t *v, size_t n);
void es_enc_key(es_enc_t *e, const char *s);                   /* a NUL-terminated str */
void es_enc_strs(es_enc_t *e, const char *const *s, uint32_t n); /* an array of them */
/* n bounds given as IEEE bits: ints where int_mask's bit is set (integer
 * channels, agent/msgpack_out.py Encoder.bounds), float64 elsewhere */
void es_enc_bounds(es_enc_t *e, const uint64_t *bits, uint16_t int_mask, uint32_t n);
void es_enc_u64_array(es_enc_t *e, const uint64_t *v, uint32_t n);

/* ---- every mechanism state starts with this header -------------------- */
/* The agent reaches a state only through it: noise at construction, the map
 * at release, the seal. A kind's ops table is referenced only by its own init,
 * so firmware links only the kinds it builds. */
typedef struct es_mech es_mech_t;
typedef struct {
    int (*draw_noise)(es_mech_t *m, es_drbg_t *rng);  /* every counter, wire order */
    void (*encode)(const es_mech_t *m, es_enc_t *e);  /* the mechanism's msgpack map */
    int (*step)(es_mech_t *m);  /* continual mechanisms (phdstream): one step per window,
                                   run at the window's first release; NULL otherwise */
} es_mech_ops_t;

struct es_mech {
    const es_mech_ops_t *ops;
    uint8_t factor;  /* noise scale factor: 1 add-remove, 2 replace */
    uint8_t sealed;  /* set at release: updates then return ES_E_SEALED */
    uint8_t noised;  /* set by es_agent_init once this state's noise is drawn */
    uint8_t full;    /* set when a reading was refused with ES_E_FULL: no release */
};

/* ES_OK when a state may count a reading: noised (privacy rule 2), not sealed
 * (rule 5) and not full (it already dropped a reading) */
static inline int es_mech_ready(const es_mech_t *m)
{
    return m->sealed ? ES_E_SEALED : m->full ? ES_E_FULL : m->noised ? ES_OK : ES_E_NOISE;
}

/* Budget numerators and denominators, as agent/spec.py MAX_Q: every noise scale
 * product (at most 16 channels x factor 2 x 2**48) then stays below 2**53. */
#define ES_MAX_SHARE ((uint64_t)1 << 48)

/* 1 when every channel's integer bounds are ordered with a span of at most max_span
 * (the Python agent's MAX_INT_SPAN: its long divisions stay below 2**30). */
static inline int es_i32_bounds_ok(const int32_t *lo, const int32_t *hi, unsigned d, int64_t max_span)
{
    unsigned i;
    for (i = 0; i < d; i++)
        if ((int64_t)hi[i] - lo[i] < 1 || (int64_t)hi[i] - lo[i] > max_span)
            return 0;
    return 1;
}

/* 1 when every channel's double bounds are ordered and their span finite. */
static inline int es_f64_bounds_ok(const double *lo, const double *hi, unsigned d)
{
    unsigned i;
    for (i = 0; i < d; i++) {
        double span = hi[i] - lo[i];
        if (!(lo[i] < hi[i]) || span - span != 0.0)
            return 0;
    }
    return 1;
}

/* The common part of every es_<kind>_init (es_agent.c): factor 1 or 2, caller
 * memory of at least need > 0 bytes, 4-byte aligned; zeroes the state (state_size
 * bytes) and need bytes of mem, and sets the header. */
int es_mech_init(es_mech_t *m, size_t state_size, const es_mech_ops_t *ops, uint8_t factor,
                 void *mem, size_t size, size_t need);

/* counters hold |noise| < 2**29 plus at most one unit per reading. A PrivHP,
 * CDF or marginals state refuses the reading beyond ES_MAX_ITEMS with
 * ES_E_FULL and is then marked full: a frame of only the first ES_MAX_ITEMS readings would cut the
 * stream at a place set by its (private) length, so es_agent_release refuses it. */
#define ES_MAX_ITEMS ((uint32_t)0x7FFFFFFF - (uint32_t)ES_NOISE_LIMIT)
#define ES_MAX_CHANNELS 16

/* ---- agent: envelope, budget, release (es_agent.c) ------------------- */
#define ES_ADD_REMOVE 1
#define ES_REPLACE 2

typedef struct {
    es_mech_t *const *mechs;       /* 1..8 states (&state.base), config order */
    uint8_t n_mechs, relation, sealed, has_key;
    uint8_t id_len;
    int8_t err;                    /* sticky: a continual mechanism's step failed; no release */
    const uint8_t *device_id;      /* 1..64 bytes of A-Z a-z 0-9 . _ - : (es_device_id_ok) */
    uint32_t epoch, seq;
    uint64_t eps_num, eps_den;
    es_hmac_t mac;                 /* keyed when has_key */
} es_agent_t;

/* 1 when device_id[0..n) is a device id: 1..64 bytes of A-Z a-z 0-9 . _ - :,
 * the rule of agent/device.py device_id_bytes, which the host applies to every
 * frame's envelope (another id is refused there even with a valid tag). */
int es_device_id_ok(const uint8_t *device_id, size_t n);

/* Noise every mechanism from rng (in order) and set the envelope fields. On a
 * device rng is seeded by es_drbg_platform (es_drbg_seeded: tests only). The
 * DRBG is consumed: retired on return whatever the status (es_drbg_retire).
 * ES_E_CONFIG for invalid parameters, among them a device id es_device_id_ok
 * refuses; ES_E_ENTROPY when rng is not ready (es_drbg_ready: never seeded, e.g.
 * a zeroed static es_drbg_t, or already retired), before any draw.
 * On failure every state stays unusable (sealed, and not noised). */
int es_agent_init(es_agent_t *a, es_mech_t *const *mechs, uint8_t n_mechs, uint8_t relation,
                  uint64_t eps_num, uint64_t eps_den, const uint8_t *device_id, uint8_t id_len,
                  uint32_t epoch, uint32_t seq, const uint8_t *key, size_t key_len,
                  es_drbg_t *rng);
/* The frame's length; for a continual mechanism (phdstream) valid once the
 * window is sealed (es_agent_seal runs its step). */
size_t es_agent_frame_size(const es_agent_t *a);
/* Seal the state (no update is taken until a continual agent's
 * es_agent_next_window) and, at a continual mechanism's first seal of a
 * window, run its step. ES_OK, or the status es_agent_release would return. */
int es_agent_seal(es_agent_t *a);
/* Seal and stream the frame to sink; returns its length or a negative status
 * (ES_E_NOISE, and nothing written, unless every state was noised; ES_E_FULL,
 * and nothing written, when a state refused a reading for ES_E_FULL). */
long es_agent_release(es_agent_t *a, es_sink_fn sink, void *ctx);
/* Seal and write the frame into out[0..cap); returns its length or a status. */
long es_agent_release_buf(es_agent_t *a, uint8_t *out, size_t cap);
/* Continual release (a phdstream config: one mechanism with a step): the
 * window's first seal or release runs the step, later ones repeat its frame. This
 * unseals the released window for the next one: seq + 1, the given epoch.
 * ES_E_CONFIG unless every mechanism is continual and epoch is above the
 * current one (agent/device.py next_window); ES_E_SEALED unless the
 * current window was released (a window's events would otherwise move to the
 * next); ES_E_RANGE when seq would pass 2**32 - 1. */
int es_agent_next_window(es_agent_t *a, uint32_t epoch);

#ifdef __cplusplus
}
#endif

/* the mechanisms, one header each (they include this one first): including
 * es_core.h alone gives the whole API */
#include "es_privhp.h"
#include "es_cdf.h"
#include "es_profile.h"
#include "es_phdstream.h"
#include "es_marginals.h"
#endif
