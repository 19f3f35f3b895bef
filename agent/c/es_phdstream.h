/* PHDStream on the device (es_phdstream.c; agent/phdstream/): continual release
 * of a changing population from a bounded node pool, one step per window.
 * Its public parameters, state, update and step. Included by es_core.h. */
#ifndef ES_PHDSTREAM_H
#define ES_PHDSTREAM_H

#include "es_core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ES_PHD_SIMPLE 0
#define ES_PHD_BLOCK  1
#define ES_PHD_TREE   2
#define ES_PHD_MAX_CHANNELS 8
#define ES_PHD_MAX_DEPTH 28
#define ES_PHD_MAX_NODES ((uint32_t)1 << 22)
#define ES_PHD_MAX_BATCH ((uint32_t)1 << 22)
#define ES_PHD_SAT ((int32_t)1 << 27)     /* Cn and Cd saturate at +-2**27 */
#define ES_PHD_MAX_COUNT 0x3FFFFFFFu      /* snap's cap; refused_* saturate here (MicroPython small ints) */

/* Public parameters, validated on the host by agent/phdstream (the Python
 * agent's own checks; host_tools/ccore.py). Everything derived (lambda, delta,
 * the counter scales) is computed here exactly as agent/phdstream does. */
typedef struct {
    uint8_t d, depth, counter;     /* channels 1..8; max depth D 1..28; ES_PHD_* */
    uint8_t fold;                  /* fold-pruning after K visits as a leaf (0 = off) */
    uint32_t block, horizon;       /* Block-B size (or 0); tree horizon T_h, a power of 2 (or 0) */
    uint32_t max_nodes, batch_max, snap;
    uint64_t eps_num, eps_den;     /* the per-event epsilon of the mechanism */
    const int32_t *lo, *hi;        /* integer box, hi - lo in 1..2**29 - 1 */
    const char *const *names;      /* d NUL-terminated UTF-8 channel names (the op column's is not released) */
} es_phdstream_cfg_t;

typedef struct {
    es_mech_t base;
    const es_phdstream_cfg_t *cfg;
    es_drbg_t rng;                 /* the agent's DRBG, kept: every step draws */
    int32_t *cn, *cd, *kid;        /* node pool: Cn, Cd, first child (0 = none) */
    int32_t *off;                  /* folded mass Off (NULL without folding) */
    uint8_t *idle;                 /* leaf streak of the fold rule (NULL without folding) */
    int32_t *act, *ba, *bs, *bsl;  /* Block: activations, a, s, s_last; Tree: act only */
    int32_t *alpha, *ahat;         /* Tree: levels p-sums per node */
    int32_t *codes;                /* the window's batch: depth-D path codes ... */
    uint8_t *signs;                /* ... and signs (1 insert, 0 delete) */
    int32_t *q_node, *q_lo, *q_hi, *q_ca, *q_dep, *q_p; /* one step's BFS queue */
    int32_t *ys;                   /* the step's leaf increments */
    uint8_t *bits, *kbits;         /* split bitmap of T(t); snapshot's kids bitmap */
    uint64_t lam_num, lam_den, c_num, c_den;
    uint32_t delta, used, nb, nv, nl, t, snap_n, levels;
    uint32_t free_pair;            /* first node of the last freed child pair (0: none) */
    uint32_t refused_splits;       /* device-side diagnostics, never released */
    uint32_t refused_events;
    int8_t err;                    /* sticky: a step's noise draw failed; no release */
} es_phdstream_t;

/* Bytes of caller memory (4-byte aligned) the pool, batch, queue and release
 * buffers need; 0 if cfg is invalid. */
size_t es_phdstream_mem_size(const es_phdstream_cfg_t *cfg);
/* Lay out the arrays in mem. factor: 1 add-remove, 2 replace (every noise
 * scale doubles). The DRBG is taken over by es_agent_init. */
int es_phdstream_init(es_phdstream_t *m, const es_phdstream_cfg_t *cfg, uint8_t factor,
                      void *mem, size_t size);
/* n events of d + 1 int32 values each: the d readings, then the op, exactly +1
 * (insert) or -1 (delete); ES_E_INPUT, nothing stored, if any op is another
 * value. A reading outside the box is clamped into it. Events past batch_max
 * in a window are refused silently (counted in refused_events only). */
int es_phdstream_update_i32(es_phdstream_t *m, const int32_t *x, size_t n);
/* One PHDStream step on the window's batch (Algorithms 6/7); empties the
 * batch. es_agent_release calls it at a window's first release. */
int es_phdstream_step(es_phdstream_t *m);

#ifdef __cplusplus
}
#endif
#endif
