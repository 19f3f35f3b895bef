/* Noisy (partitioned) marginals of records on the device (es_marginals.c;
 * agent/marginals/): public parameters, state and update. Included by es_core.h. */
#ifndef ES_MARGINALS_H
#define ES_MARGINALS_H

#include "es_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* the limits of agent/marginals/build.py */
#define ES_MARG_MAX_SIZE 4096u              /* cells of one column, its "other" cell included */
#define ES_MARG_MAX_WAY 3u                  /* columns of one marginal */
#define ES_MARG_MAX 256u                    /* marginals of one state */
#define ES_MARG_MAX_CELLS 65536u            /* cells of one marginal: group ids fit uint16 */
#define ES_MARG_MAX_TOTALS ((uint32_t)1 << 22) /* group totals of the whole state */

/* Public parameters, validated on the host by agent/marginals/build.py parse
 * (host_tools/ccore.py); es_marginals_mem_size re-checks what memory safety
 * and the budget rest on. A record is d cell indices, column c has sizes[c]
 * cells (the last its "other" cell). Marginal w reads columns
 * cols[3w .. 3w + way[w]) (increasing; the rest of its 3 slots unused), its
 * cells in C order (the last column fastest). */
typedef struct {
    uint8_t d;                     /* columns 1..ES_MAX_CHANNELS */
    uint16_t n;                    /* marginals 1..ES_MARG_MAX */
    const uint16_t *sizes;         /* d: cells of each column, 2..ES_MARG_MAX_SIZE */
    const uint8_t *way;            /* n: columns of each marginal, 1..3 */
    const uint8_t *cols;           /* 3n: each marginal's column indices, 3 slots apiece */
    const uint32_t *ngroups;       /* n: 0 = ungrouped (a total per cell), else G_w groups */
    const uint16_t *groups;        /* cell -> group maps of the grouped marginals (one id < G_w
                                      per cell), concatenated in marginal order; NULL if none */
    uint64_t q;                    /* marginal w spends sigma[w]/q: the state sum(sigma)/q */
    const uint64_t *sigma;         /* n, each 1..ES_MAX_SHARE */
    const uint8_t *schema;         /* the public schema, canonical msgpack (encoded on the host
                                      by agent/marginals/release.py), written into the frame as is */
    uint32_t schema_len;
} es_marginals_cfg_t;

typedef struct {
    es_mech_t base;
    const es_marginals_cfg_t *cfg;
    int32_t *totals;               /* every marginal's group totals, wire order */
    uint32_t items;                /* records counted: refused beyond ES_MAX_ITEMS (ES_E_FULL) */
} es_marginals_t;

/* 4 bytes per group total; 0 for invalid parameters */
size_t es_marginals_mem_size(const es_marginals_cfg_t *cfg);
int es_marginals_init(es_marginals_t *m, const es_marginals_cfg_t *cfg, uint8_t factor, void *mem,
                      size_t size);
/* n records of d cell indices each: an index outside [0, sizes[c]) counts in
 * column c's "other" cell. Every record moves exactly one total per marginal. */
int es_marginals_update_i32(es_marginals_t *m, const int32_t *x, size_t n);
/* the same with double readings: a value v in [0, sizes[c]) is floor(v), anything
 * else (NaN, +-inf included) the "other" cell (es_marginals_f64.c) */
int es_marginals_update_f64(es_marginals_t *m, const double *x, size_t n);
/* the shared count of one record given as d cell indices; an index at or
 * above sizes[c] counts in column c's "other" cell (the updates above clamp
 * already; this keeps every total write in bounds whatever the caller passes) */
int es_marginals_count(es_marginals_t *m, const uint16_t *cell);

#ifdef __cplusplus
}
#endif
#endif
