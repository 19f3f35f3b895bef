/* CDF trees on the device (es_cdf.c; float readings or bounds: es_cdf_f64.c):
 * their public parameters, state and update. Included by es_core.h. */
#ifndef ES_CDF_H
#define ES_CDF_H

#include "es_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- CDF trees (es_cdf.c, es_cdf_f64.c; agent/cdf/) ------------------ */
#define ES_CDF_MAX_LEVELS 24
#define ES_CDF_MAX_BINS (1UL << 24)

/* Public parameters (validated on the host by agent/cdf/build.py parse). */
typedef struct {
    uint8_t d, m;                  /* channels 1..16; tree levels 1..24 */
    uint32_t K;                    /* bins per channel, 2..2**24 */
    const uint32_t *branching;     /* m factors >= 2, product in [K, 2**29] */
    uint64_t q;                    /* budget denominator */
    const uint64_t *sigma;         /* m level shares: level i spends sigma[i]/q */
    uint16_t int_mask;             /* bit c: integer bounds (exact binning; ints in the frame) */
    const int32_t *lo_i, *hi_i;    /* integer bounds for es_cdf_update_i32; may be NULL */
    const double *lo_f, *hi_f;     /* bounds as the Python agent holds them (es_cdf_update_f64) */
    const uint64_t *lo_bits, *hi_bits; /* IEEE-754 bits of float(lo), float(hi), for the frame */
    const char *const *names;      /* d NUL-terminated UTF-8 channel names */
} es_cdf_cfg_t;

typedef struct {
    es_mech_t base;
    const es_cdf_cfg_t *cfg;
    int32_t *nodes;                /* d*per counters: channel, level 1..m, left to right */
    uint32_t per;                  /* counters per channel: sum over levels of ceil(K/P_i) */
    uint32_t items;                /* readings counted (overflow guard) */
} es_cdf_t;

/* Where each level starts in a channel's counters and the leaves under one of
 * its nodes: an update call computes it once, on its stack (about 220 B). */
typedef struct {
    uint32_t at[ES_CDF_MAX_LEVELS + 1];  /* level i's first counter; at[m] = per */
    uint32_t P[ES_CDF_MAX_LEVELS];       /* leaves under one node of level i */
    uint8_t shift[ES_CDF_MAX_LEVELS];    /* log2 P[i] when a power of two, else 0xFF */
} es_cdf_levels_t;

/* Bytes of caller memory (4-byte aligned) the counters need; 0 if cfg is invalid. */
size_t es_cdf_mem_size(const es_cdf_cfg_t *cfg);
int es_cdf_init(es_cdf_t *m, const es_cdf_cfg_t *cfg, uint8_t factor, void *mem, size_t size);
void es_cdf_levels(const es_cdf_cfg_t *cfg, es_cdf_levels_t *lv);
/* Count one reading given as its bin (0..K-1) in each channel. */
int es_cdf_count(es_cdf_t *m, const es_cdf_levels_t *lv, const uint32_t *bin);
/* The updates' row loop: for each of the n rows (row_bytes apart from x), bins
 * it with binner and counts it; the bins are wiped on return. */
typedef void (*es_cdf_binner_t)(const es_cdf_cfg_t *cfg, const void *row, uint32_t *bin);
int es_cdf_rows(es_cdf_t *m, const void *x, size_t n, size_t row_bytes, es_cdf_binner_t binner);
/* n readings of d values; integer bounds in int32 only (cfg->int_mask all set, lo_i/hi_i). */
int es_cdf_update_i32(es_cdf_t *m, const int32_t *x, size_t n);
/* Any bounds: agent/cdf/__init__.py's float binning, operation for operation (needs libm's fmod). */
int es_cdf_update_f64(es_cdf_t *m, const double *x, size_t n);

#ifdef __cplusplus
}
#endif
#endif
