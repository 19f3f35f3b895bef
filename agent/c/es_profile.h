/* The profile sketch on the device (es_profile.c): its public parameters,
 * state and update. Included by es_core.h. */
#ifndef ES_PROFILE_H
#define ES_PROFILE_H

#include "es_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- profile sketch (es_profile.c; agent/profile/) ------------------- */
#define ES_PROFILE_MAX_IDS (1UL << 24)

/* Public parameters (validated on the host by agent/profile/build.py parse). */
typedef struct {
    uint32_t lo, hi;               /* counted ids [lo, hi): 1..2**24 of them, hi <= 2**29 */
    uint32_t cap;                  /* counters saturate at cap, 1..2**24 */
    uint64_t p, q;                 /* the sketch spends p/q */
    uint8_t bits;                  /* 0: dense ids; even 2..28: ids of [0, 2**bits) are sampled */
    const uint8_t *seed;           /* public sample seed (UTF-8) when bits != 0 */
    uint16_t seed_len;
    const char *const *names;      /* the id column's name */
} es_profile_cfg_t;

typedef struct {
    es_mech_t base;
    const es_profile_cfg_t *cfg;
    int32_t *ctr;                  /* hi-lo counters, id order */
    uint16_t keys[8];              /* Feistel round keys (a, b) x 4, derived from the seed */
} es_profile_t;

size_t es_profile_mem_size(const es_profile_cfg_t *cfg);
int es_profile_init(es_profile_t *m, const es_profile_cfg_t *cfg, uint8_t factor, void *mem,
                    size_t size);
/* n ids: each one counts at its (sampled) place unless that counter reached cap. */
int es_profile_update_i32(es_profile_t *m, const int32_t *id, size_t n);

#ifdef __cplusplus
}
#endif
#endif
