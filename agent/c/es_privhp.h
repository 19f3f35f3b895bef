/* PrivHP on the device (es_privhp.c; readings: es_privhp_i32.c, es_privhp_f64.c):
 * its public parameters, state and update. Included by es_core.h. */
#ifndef ES_PRIVHP_H
#define ES_PRIVHP_H

#include "es_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- PrivHP (es_privhp.c) -------------------------------------------- */
#define ES_CMS 0
#define ES_CS  1
#define ES_MAX_DEPTH 29
#define ES_MAX_WIDTH 4096

/* Public parameters, validated on the host (agent/privhp/build.py). They must
 * outlive the state, which points at them (on firmware: const, in flash). */
typedef struct {
    uint8_t d, r, j, sketch;       /* channels, depth, sketch rows, ES_CMS/ES_CS */
    uint32_t k, w;                 /* pruning width; sketch width (power of two) */
    uint64_t q, clamp_p;           /* budget denominator; clamp counter's share */
    const uint64_t *sigma;         /* r+1 level shares */
    uint16_t int_mask;             /* bit i: channel i has integer bounds (ints in the frame) */
    const int32_t *lo_i, *hi_i;    /* integer bounds (es_privhp_i32.c); may be NULL otherwise */
    const double *lo_f, *hi_f;     /* bounds as the Python agent holds them, for es_privhp_f64.c */
    const uint64_t *lo_bits, *hi_bits; /* IEEE-754 bits of float(lo), float(hi), for the frame */
    const char *const *names;      /* d NUL-terminated UTF-8 channel names */
    const uint8_t *hash_seed;      /* public hash seed (UTF-8) */
    uint16_t hash_seed_len;        /* seeds are 1..64 characters: up to 256 UTF-8 bytes */
} es_privhp_cfg_t;

typedef struct {
    es_mech_t base;
    const es_privhp_cfg_t *cfg;
    int32_t *tree;                 /* 2**(L+1)-1 counters, heap order */
    int32_t *sketch;               /* (r-L)*j*w counters, level, row, column */
    uint16_t *hash;                /* (r-L)*j*(4 or 8) hash parameters */
    int64_t clamp;                 /* noisy count of clamped readings */
    uint32_t items;                /* readings counted (overflow guard) */
    uint8_t L, per;
    uint8_t bits[ES_MAX_CHANNELS]; /* path bits per channel (es_privhp_bits) */
} es_privhp_t;

/* Bytes of caller memory (4-byte aligned) the tables need; 0 if cfg is invalid. */
size_t es_privhp_mem_size(const es_privhp_cfg_t *cfg);
/* Lay out tables in mem, derive hash params. factor: 1 add-remove, 2 replace.
 * The noise is drawn by es_agent_init (agent/privhp/build.py draw_noise). */
int es_privhp_init(es_privhp_t *m, const es_privhp_cfg_t *cfg, uint8_t factor,
                   void *mem, size_t size);
/* Count one reading given as left-aligned per-channel path codes (es_privhp_update_*). */
int es_privhp_count(es_privhp_t *m, const uint32_t *code, int clamped);
/* Path bits of channel i: the number of levels 1..r that split channel i. */
unsigned es_privhp_bits(const es_privhp_cfg_t *cfg, unsigned i);

/* ---- quantisers: readings -> path codes (es_privhp_i32.c, es_privhp_f64.c) */
/* n readings of d values each (row-major); n = 1 for one reading.
 * Integer channels only (cfg->int_mask all set). */
int es_privhp_update_i32(es_privhp_t *m, const int32_t *x, size_t n);
/* Any bounds: the Python agent's float arithmetic, operation for operation. */
int es_privhp_update_f64(es_privhp_t *m, const double *x, size_t n);

#ifdef __cplusplus
}
#endif
#endif
