/* PHDStream device state (agent/phdstream/__init__.py), draw for draw and byte
 * for byte: a preallocated node pool, the window's batch of path codes and
 * signs, one PrivTree step per window over the pool (Kumar, Strohmer,
 * Vershynin, arXiv 2401.14577, Algorithms 6/7 with the per-node counters of
 * Appendix D) and the per-window payload (docs/mechanisms/phdstream.md, "Wire map").
 *
 * Every array lives in caller memory laid out by es_phdstream_init; the update
 * and the step allocate nothing. All values are integers below 2**30: Cn and
 * Cd saturate at +-2**27, floor(Ca) stays within them, and the batch holds at
 * most 2**22 events. */
#include <string.h>

#include "es_phdstream.h"

/* ln 2 < 1143/1649 (a continued-fraction convergent from above): the integer
 * bias per depth delta = ceil(lambda * 1143/1649) >= lambda ln 2 */
#define LN2_NUM 1143u
#define LN2_DEN 1649u
#define MAX_SPAN (((int64_t)1 << 29) - 1) /* the top face: 2 * remainder < 2**30 */
#define MAX_EPS_DEN 1000000u
#define VERSION 1

static int valid(const es_phdstream_cfg_t *c)
{
    unsigned i;
    if (!(c && c->d >= 1 && c->d <= ES_PHD_MAX_CHANNELS && c->depth >= 1 && c->depth <= ES_PHD_MAX_DEPTH &&
          c->counter <= ES_PHD_TREE && c->max_nodes >= 3 && c->max_nodes <= ES_PHD_MAX_NODES &&
          c->batch_max >= 1 && c->batch_max <= ES_PHD_MAX_BATCH && c->snap >= 1 && c->snap <= ES_PHD_MAX_COUNT &&
          c->eps_num >= 1 && c->eps_num <= 100ull * MAX_EPS_DEN && c->eps_den >= 1 &&
          c->eps_den <= MAX_EPS_DEN && c->lo && c->hi && c->names))
        return 0;
    if (c->counter == ES_PHD_BLOCK ? c->block < 2 || c->block > (1u << 16) : c->block != 0)
        return 0;
    if (c->counter == ES_PHD_TREE ? c->horizon < 1 || c->horizon > (1u << 16) || (c->horizon & (c->horizon - 1))
                                  : c->horizon != 0)
        return 0;
    for (i = 0; i < c->d; i++)
        if ((int64_t)c->hi[i] - c->lo[i] < 1 || (int64_t)c->hi[i] - c->lo[i] > MAX_SPAN ||
            c->lo[i] < -INT32_MAX + 1 || c->hi[i] > INT32_MAX - 1) /* as the Python device: |lo|, |hi| <= 2**31 - 2 */
            return 0;
    return 1;
}

static unsigned levels_of(const es_phdstream_cfg_t *c)
{
    unsigned n = 1;
    uint32_t h = c->horizon;
    while (h > 1) {
        h >>= 1;
        n++;
    }
    return n; /* log2 T_h + 1 p-sums hold each event */
}

/* int32 items per pool node (beyond the queue and release buffers) */
static uint32_t node_words(const es_phdstream_cfg_t *c)
{
    uint32_t w = c->fold ? 4 : 3; /* Cn, Cd, kid (and Off) */
    if (c->counter == ES_PHD_BLOCK)
        return w + 4;
    if (c->counter == ES_PHD_TREE)
        return w + 1 + 2 * levels_of(c);
    return w;
}

size_t es_phdstream_mem_size(const es_phdstream_cfg_t *c)
{
    size_t n, bitmap;
    if (!valid(c))
        return 0;
    n = c->max_nodes;
    bitmap = (n + 7) >> 3;
    /* pool and counters, batch codes, queue (6 arrays), leaf increments; then
     * batch signs, two bitmaps and the fold streaks, padded to 4 bytes */
    return 4 * (n * (node_words(c) + 6 + 1) + c->batch_max) +
           ((c->batch_max + 2 * bitmap + (c->fold ? n : 0) + 3) & ~(size_t)3);
}

static int draw_noise(es_mech_t *base, es_drbg_t *rng);
static void encode(const es_mech_t *base, es_enc_t *e);
static int step_op(es_mech_t *base);
static const es_mech_ops_t phdstream_ops = {draw_noise, encode, step_op};

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return (a + b - 1) / b;
}

int es_phdstream_init(es_phdstream_t *m, const es_phdstream_cfg_t *c, uint8_t factor, void *mem, size_t size)
{
    int32_t *w;
    uint32_t n, L;
    int st = es_mech_init(&m->base, sizeof *m, &phdstream_ops, factor, mem, size, es_phdstream_mem_size(c));
    if (st != ES_OK)
        return st;
    m->cfg = c;
    n = c->max_nodes;
    /* lambda = (2 beta - 1)/((beta - 1) eps/2) = 6/eps at beta = 2, times the relation factor */
    m->lam_num = 6 * c->eps_den * factor;
    m->lam_den = c->eps_num;
    m->delta = (uint32_t)ceil_div(m->lam_num * LN2_NUM, m->lam_den * LN2_DEN);
    /* counter scales over eps_num (eps_c = eps/2): 1/eps_c, 2/eps_c, levels/eps_c */
    L = levels_of(c);
    m->levels = c->counter == ES_PHD_TREE ? L : 0;
    m->c_num = (c->counter == ES_PHD_SIMPLE ? 2 : c->counter == ES_PHD_BLOCK ? 4 : 2 * L) * c->eps_den * factor;
    m->c_den = c->eps_num;
    w = (int32_t *)mem;
    m->cn = w;
    m->cd = w += n;
    m->kid = w += n;
    w += n;
    if (c->fold) {
        m->off = w;
        w += n;
    }
    if (c->counter != ES_PHD_SIMPLE) {
        m->act = w;
        w += n;
    }
    if (c->counter == ES_PHD_BLOCK) {
        m->ba = w;
        m->bs = w += n;
        m->bsl = w += n;
        w += n;
    } else if (c->counter == ES_PHD_TREE) {
        m->alpha = w;
        m->ahat = w += (size_t)n * L;
        w += (size_t)n * L;
    }
    m->q_node = w;
    m->q_lo = w += n;
    m->q_hi = w += n;
    m->q_ca = w += n;
    m->q_dep = w += n;
    m->q_p = w += n;
    m->ys = w += n;
    m->codes = w += n;
    w += c->batch_max;
    m->signs = (uint8_t *)w;
    m->bits = m->signs + c->batch_max;
    m->kbits = m->bits + ((n + 7) >> 3);
    if (c->fold)
        m->idle = m->kbits + ((n + 7) >> 3);
    m->used = 1;
    return ES_OK;
}

/* The agent's noise phase: PHDStream draws at every step, so it keeps the DRBG
 * (a copy: es_agent_init retires the caller's). Every scale passes the cap of
 * agent/spec.py check_scale. */
static int draw_noise(es_mech_t *base, es_drbg_t *rng)
{
    es_phdstream_t *m = (es_phdstream_t *)base;
    if (!es_dlap_scale_ok(m->lam_num, m->lam_den) || !es_dlap_scale_ok(m->c_num, m->c_den))
        return ES_E_CONFIG;
    if (!es_drbg_ready(rng))
        return ES_E_ENTROPY;
    memcpy(&m->rng, rng, sizeof m->rng);
    return ES_OK;
}

/* ---- readings ---------------------------------------------------------- */

static int32_t clamp_sat(int64_t v)
{
    return v > ES_PHD_SAT ? ES_PHD_SAT : v < -ES_PHD_SAT ? -ES_PHD_SAT : (int32_t)v;
}

/* The reading's depth-D path code: level l >= 1 halves channel (l - 1) mod d,
 * each level one step of exact binary long division of (x - lo) by the span. */
static int32_t code_i32(const es_phdstream_cfg_t *c, const int32_t *x)
{
    int32_t rem[ES_PHD_MAX_CHANNELS], code = 0;
    unsigned i, l;
    for (i = 0; i < c->d; i++)
        rem[i] = x[i] > c->hi[i] ? c->hi[i] - c->lo[i] : x[i] >= c->lo[i] ? x[i] - c->lo[i] : 0;
    for (l = 0, i = 0; l < c->depth; l++) {
        int32_t span = c->hi[i] - c->lo[i], t = rem[i] + rem[i];
        if (t >= span) {
            rem[i] = t - span;
            code = code + code + 1;
        } else {
            rem[i] = t;
            code = code + code;
        }
        if (++i == c->d)
            i = 0;
    }
    es_wipe(rem, sizeof rem); /* the remainders encode the reading */
    return code;
}

static void store(es_phdstream_t *m, int32_t code, int insert)
{
    if (m->nb >= m->cfg->batch_max) {
        if (m->refused_events < ES_PHD_MAX_COUNT)
            m->refused_events++; /* a full batch refuses (docs: Pool and batch rules) */
        return;
    }
    m->codes[m->nb] = code;
    m->signs[m->nb] = (uint8_t)insert;
    m->nb++;
}

int es_phdstream_update_i32(es_phdstream_t *m, const int32_t *x, size_t n)
{
    const es_phdstream_cfg_t *c = m->cfg;
    size_t k, row = (size_t)c->d + 1;
    int st = es_mech_ready(&m->base);
    if (st != ES_OK)
        return st;
    for (k = 0; k < n; k++) /* every op checked first: a bad event stores nothing */
        if (x[k * row + c->d] != 1 && x[k * row + c->d] != -1)
            return ES_E_INPUT;
    for (k = 0; k < n; k++, x += row)
        store(m, code_i32(c, x), x[c->d] > 0);
    return ES_OK;
}

/* ---- counters ---------------------------------------------------------- */

static int64_t dlap(es_phdstream_t *m, uint64_t num, uint64_t den)
{
    return es_dlap(&m->rng, num, den);
}

/* kept out of the step's frame: its locals then sit on the stack only during
 * a leaf's count, not below every split test's noise draw */
#ifdef __GNUC__
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE
#endif

/* Activate node v's counter with this step's signed count h; the increment of
 * its output (agent/phdstream/counters.py). Counter time is the node's
 * activation count. Raw sums and noisy running values saturate at +-2**27
 * after each addition, as in Python. */
static NOINLINE int64_t count(es_phdstream_t *m, uint32_t v, int64_t h)
{
    const es_phdstream_cfg_t *c = m->cfg;
    if (c->counter == ES_PHD_SIMPLE)
        return h + dlap(m, m->c_num, m->c_den);
    if (c->counter == ES_PHD_BLOCK) {
        /* Algorithm 9: a noisy in-block running sum ba on top of bsl, the sum
         * of the noisy completed block sums; bs the raw sum of this block */
        uint32_t n = (uint32_t)m->act[v] + 1;
        int32_t bs;
        if (n == c->block)
            n = 0; /* activations modulo B */
        m->act[v] = (int32_t)n;
        bs = clamp_sat((int64_t)m->bs[v] + h);
        if (n == 0) {
            m->bsl[v] = clamp_sat((int64_t)m->bsl[v] + bs + dlap(m, m->c_num, m->c_den));
            m->bs[v] = 0;
            m->ba[v] = 0;
        } else {
            m->bs[v] = bs;
            m->ba[v] = clamp_sat((int64_t)m->ba[v] + h + dlap(m, m->c_num, m->c_den));
        }
        return (int64_t)m->bsl[v] + m->ba[v] - m->cn[v];
    } else {
        /* Algorithm 10 over horizon T_h: activation n adds h to the p-sum of
         * level j = trailing zeros of n, which absorbs the levels below; the
         * increment is the new noisy p-sum minus the absorbed ones. Past T_h a
         * new epoch continues from Cn. */
        uint32_t L = m->levels, i, j, n = (uint32_t)m->act[v] + 1;
        int32_t *alpha = m->alpha + (size_t)v * L, *ahat = m->ahat + (size_t)v * L;
        int32_t s = clamp_sat(h), y = 0, a;
        if (n > c->horizon) {
            for (i = 0; i < L; i++)
                alpha[i] = ahat[i] = 0;
            n = 1;
        }
        m->act[v] = (int32_t)n;
        for (j = 0; !(n >> j & 1); j++)
            ;
        for (i = 0; i < j; i++) {
            s = clamp_sat((int64_t)s + alpha[i]);
            y = clamp_sat((int64_t)y - ahat[i]);
            alpha[i] = ahat[i] = 0;
        }
        alpha[j] = s;
        a = clamp_sat((int64_t)s + dlap(m, m->c_num, m->c_den));
        ahat[j] = a;
        return clamp_sat((int64_t)y + a);
    }
}

/* ---- the pool (agent/phdstream/pool.py) ---------------------------------- */

/* A node's own mass Cn + Off, saturated */
static int32_t own_mass(const es_phdstream_t *m, int32_t v)
{
    return m->off ? clamp_sat((int64_t)m->cn[v] + m->off[v]) : m->cn[v];
}

/* The first node of a free child pair (the free list first, then the unused
 * tail), or 0 when the pool is full */
static int32_t take(es_phdstream_t *m)
{
    uint32_t c = m->free_pair;
    if (c) {
        m->free_pair = (uint32_t)m->kid[c];
        m->kid[c] = 0;
        return (int32_t)c;
    }
    c = m->used;
    if (c + 2 <= m->cfg->max_nodes) {
        m->used = c + 2;
        return (int32_t)c;
    }
    return 0;
}

/* Queue x's child pair on pending (linked through Cd), reset x to a never-used
 * node; the new head of pending */
static int32_t drop(es_phdstream_t *m, int32_t x, int32_t pending)
{
    int32_t k = m->kid[x];
    if (k) {
        m->cd[k] = pending;
        pending = k;
    }
    m->cn[x] = m->cd[x] = m->kid[x] = m->off[x] = 0;
    m->idle[x] = 0;
    if (m->cfg->counter == ES_PHD_BLOCK) {
        m->act[x] = m->ba[x] = m->bs[x] = m->bsl[x] = 0;
    } else if (m->cfg->counter == ES_PHD_TREE) {
        m->act[x] = 0;
        memset(m->alpha + (size_t)x * m->levels, 0, m->levels * sizeof m->alpha[0]);
        memset(m->ahat + (size_t)x * m->levels, 0, m->levels * sizeof m->ahat[0]);
    }
    return pending;
}

/* Free v's strict descendants and keep their mass at v: Off += Cd */
static void fold(es_phdstream_t *m, int32_t v)
{
    int32_t pending = m->kid[v];
    m->off[v] = clamp_sat((int64_t)m->off[v] + m->cd[v]);
    m->cd[v] = 0;
    m->idle[v] = 0;
    m->kid[v] = 0;
    m->cd[pending] = 0;
    while (pending) {
        int32_t c = pending;
        pending = drop(m, c + 1, drop(m, c, m->cd[c]));
        m->kid[c] = (int32_t)m->free_pair;
        m->free_pair = (uint32_t)c;
    }
}

/* The fold rule after a step: split nodes' streaks restart; a leaf with
 * children extends its streak and folds when it reaches K */
static void fold_pass(es_phdstream_t *m, uint32_t tail)
{
    uint32_t i;
    for (i = 0; i < tail; i++) {
        int32_t v = m->q_node[i];
        if (m->bits[i >> 3] >> (i & 7) & 1)
            m->idle[v] = 0;
        else if (m->kid[v]) {
            if ((uint32_t)m->idle[v] + 1 >= m->cfg->fold)
                fold(m, v);
            else
                m->idle[v]++;
        }
    }
}

/* ---- one step ---------------------------------------------------------- */

/* The union tree in canonical BFS order (kids bitmap, Cn order in q_lo), for a
 * snapshot step: the step's queue is free once the release is in bits/ys. */
static void snapshot(es_phdstream_t *m)
{
    int32_t *qn = m->q_node, *order_cn = m->q_lo, *order_off = m->q_hi;
    uint8_t *order_idle = (uint8_t *)m->q_ca; /* n bytes fit its 4n */
    uint32_t head = 0, tail = 1;
    memset(m->kbits, 0, (m->cfg->max_nodes + 7) >> 3);
    qn[0] = 0;
    while (head < tail) {
        int32_t v = qn[head], k = m->kid[v];
        order_cn[head] = m->cn[v];
        if (m->off) {
            order_off[head] = m->off[v];
            order_idle[head] = m->idle[v];
        }
        if (k) {
            m->kbits[head >> 3] |= (uint8_t)(1u << (head & 7));
            qn[tail] = k;
            qn[tail + 1] = k + 1;
            tail += 2;
        }
        head++;
    }
    m->snap_n = tail;
}

/* Clear the batch (raw events) and the queue's segments up to tail (each
 * visited node's true count in the window): the state at rest holds released
 * values and counter internals only. */
static void wipe(es_phdstream_t *m, uint32_t tail)
{
    memset(m->codes, 0, (size_t)m->nb * sizeof m->codes[0]);
    memset(m->signs, 0, m->nb);
    m->nb = 0;
    memset(m->q_lo, 0, (size_t)tail * sizeof m->q_lo[0]);
    memset(m->q_hi, 0, (size_t)tail * sizeof m->q_hi[0]);
}

/* A step error is sticky (the state half-applied a step) and wipes the batch. */
static int fail(es_phdstream_t *m, int err)
{
    wipe(m, m->cfg->max_nodes);
    return m->err = err;
}

int es_phdstream_step(es_phdstream_t *m)
{
    const es_phdstream_cfg_t *c = m->cfg;
    int32_t *codes = m->codes, *cn = m->cn, *cd = m->cd, *kid = m->kid;
    int32_t *qn = m->q_node, *qlo = m->q_lo, *qhi = m->q_hi, *qca = m->q_ca, *qdep = m->q_dep, *qp = m->q_p;
    uint8_t *signs = m->signs, *bits = m->bits;
    const int32_t D = c->depth, delta = (int32_t)m->delta, theta = 0, floor_b = theta - delta;
    uint32_t head = 0, tail = 1, nl = 0;
    int64_t i;
    if (m->err)
        return m->err;
    memset(bits, 0, (m->nv + 7) >> 3);
    qn[0] = 0;
    qlo[0] = 0;
    qhi[0] = (int32_t)m->nb;
    qca[0] = 0;
    qdep[0] = 0;
    qp[0] = INT32_MAX; /* the root has no parent: P(root) = max(g(root), 0) */
    while (head < tail) {
        int32_t v = qn[head], lo = qlo[head], hi = qhi[head], ca = qca[head], dep = qdep[head];
        int32_t ins = 0, h, p = 0;
        int split = 0;
        for (i = lo; i < hi; i++)
            ins += signs[i];
        h = ins + ins - (hi - lo); /* +1 per insert, -1 per delete */
        if (dep < D) {
            /* the path-monotone statistic: P(v) = min(max(g(v), 0), P(parent)),
             * g(v) = floor(G(v, t-1)) = floor(Ca) + Cn + Cd, plus the
             * window's insertions I(v) (deletions are not counted) */
            int64_t g = (int64_t)ca + own_mass(m, v) + cd[v], b, z;
            p = (int32_t)(g < 0 ? 0 : g > qp[head] ? qp[head] : g);
            b = (int64_t)p + ins - (int64_t)dep * delta;
            if (b < floor_b)
                b = floor_b;
            z = dlap(m, m->lam_num, m->lam_den);
            if (m->rng.err)
                return fail(m, m->rng.err);
            if (b + z > theta) {
                split = 1;
                if (!kid[v]) {
                    kid[v] = take(m);
                    if (!kid[v]) {
                        split = 0; /* pool full: cap-and-refuse, a leaf of T(t) */
                        if (m->refused_splits < ES_PHD_MAX_COUNT)
                            m->refused_splits++;
                    }
                }
            }
        }
        if (split) {
            /* partition the segment by the code bit of level dep + 1: zeros
             * (child 0) first, then ones */
            int32_t mask = (int32_t)1 << (D - 1 - dep), a = lo, b = hi - 1, k = kid[v], cca;
            bits[head >> 3] |= (uint8_t)(1u << (head & 7));
            for (;;) {
                while (a <= b && !(codes[a] & mask))
                    a++;
                while (a <= b && (codes[b] & mask))
                    b--;
                if (a >= b)
                    break;
                {
                    int32_t t = codes[a];
                    uint8_t s = signs[a];
                    codes[a] = codes[b];
                    codes[b] = t;
                    signs[a] = signs[b];
                    signs[b] = s;
                }
            }
            cca = (int32_t)(((int64_t)ca + own_mass(m, v)) >> 1); /* floor((Ca + Cn + Off) / beta), eq. 10 */
            qn[tail] = k;
            qlo[tail] = lo;
            qhi[tail] = a;
            qn[tail + 1] = k + 1;
            qlo[tail + 1] = a;
            qhi[tail + 1] = hi;
            qca[tail] = qca[tail + 1] = cca;
            qdep[tail] = qdep[tail + 1] = dep + 1;
            qp[tail] = qp[tail + 1] = p;
            tail += 2;
        } else {
            int64_t y = count(m, (uint32_t)v, h);
            int32_t before = cn[v];
            if (m->rng.err)
                return fail(m, m->rng.err);
            cn[v] = clamp_sat((int64_t)before + y);
            m->ys[nl++] = (int32_t)y;
        }
        head++;
    }
    /* before the Cd pass: every ancestor of a folded node split in this step,
     * so its Cd below is recomputed from the folded masses */
    if (c->fold)
        fold_pass(m, tail);
    /* children before parents (reverse BFS): Cd(v) = sum over children of Cd + Cn + Off, eq. 11 */
    for (i = (int64_t)tail - 1; i >= 0; i--)
        if (bits[i >> 3] >> (i & 7) & 1) {
            int32_t v = qn[i], k = kid[v];
            cd[v] = clamp_sat((int64_t)cd[k] + own_mass(m, k) + cd[k + 1] + own_mass(m, k + 1));
        }
    wipe(m, tail);
    m->nv = tail;
    m->nl = nl;
    m->t++;
    if (m->t == 1 || m->t % c->snap == 0)
        snapshot(m);
    return ES_OK;
}

static int step_op(es_mech_t *base)
{
    return es_phdstream_step((es_phdstream_t *)base);
}

/* ---- release ----------------------------------------------------------- */

static const char *const COUNTER_NAMES[] = {"simple", "block", "tree"};

static void params(const es_phdstream_t *m, es_enc_t *e)
{
    const es_phdstream_cfg_t *c = m->cfg;
    unsigned i;
    es_enc_map(e, 16);
    es_enc_key(e, "beta");
    es_enc_uint(e, 2);
    es_enc_key(e, "block");
    es_enc_uint(e, c->block);
    es_enc_key(e, "counter");
    es_enc_key(e, COUNTER_NAMES[c->counter]);
    es_enc_key(e, "delta");
    es_enc_uint(e, m->delta);
    es_enc_key(e, "depth");
    es_enc_uint(e, c->depth);
    es_enc_key(e, "eps");
    es_enc_array(e, 2);
    es_enc_uint(e, c->eps_num);
    es_enc_uint(e, c->eps_den);
    es_enc_key(e, "fold");
    es_enc_uint(e, c->fold);
    es_enc_key(e, "hi");
    es_enc_array(e, c->d);
    for (i = 0; i < c->d; i++)
        es_enc_int(e, c->hi[i]);
    es_enc_key(e, "horizon");
    es_enc_uint(e, c->horizon);
    es_enc_key(e, "lam");
    es_enc_array(e, 2);
    es_enc_uint(e, m->lam_num);
    es_enc_uint(e, m->lam_den);
    es_enc_key(e, "lo");
    es_enc_array(e, c->d);
    for (i = 0; i < c->d; i++)
        es_enc_int(e, c->lo[i]);
    es_enc_key(e, "max_nodes");
    es_enc_uint(e, c->max_nodes);
    es_enc_key(e, "names");
    es_enc_strs(e, c->names, c->d);
    es_enc_key(e, "noise");
    es_enc_key(e, "dlap");
    es_enc_key(e, "snap");
    es_enc_uint(e, c->snap);
    es_enc_key(e, "theta");
    es_enc_uint(e, 0);
}

/* agent/phdstream encode: the last step's payload entry, keys sorted */
static void encode(const es_mech_t *base, es_enc_t *e)
{
    const es_phdstream_t *m = (const es_phdstream_t *)base;
    uint32_t nbytes = (m->nv + 7) >> 3;
    es_enc_map(e, 8);
    es_enc_key(e, "bits");
    es_enc_bin_head(e, nbytes);
    es_enc_raw(e, m->bits, nbytes);
    es_enc_key(e, "d");
    es_enc_i32_le(e, m->ys, m->nl);
    es_enc_key(e, "kind");
    es_enc_key(e, "phdstream");
    es_enc_key(e, "nv");
    es_enc_uint(e, m->nv);
    es_enc_key(e, "p");
    params(m, e);
    es_enc_key(e, "snap");
    if (m->t == 1 || m->t % m->cfg->snap == 0) {
        es_enc_map(e, m->off ? 5 : 3);
        es_enc_key(e, "cn");
        es_enc_i32_le(e, m->q_lo, m->snap_n);
        if (m->off) {
            es_enc_key(e, "idle");
            es_enc_bin_head(e, m->snap_n);
            es_enc_raw(e, (const uint8_t *)m->q_ca, m->snap_n);
        }
        es_enc_key(e, "kids");
        es_enc_bin_head(e, (m->snap_n + 7) >> 3);
        es_enc_raw(e, m->kbits, (m->snap_n + 7) >> 3);
        es_enc_key(e, "n");
        es_enc_uint(e, m->snap_n);
        if (m->off) {
            es_enc_key(e, "off");
            es_enc_i32_le(e, m->q_hi, m->snap_n);
        }
    } else {
        es_enc_nil(e);
    }
    es_enc_key(e, "t");
    es_enc_uint(e, m->t);
    es_enc_key(e, "v");
    es_enc_uint(e, VERSION);
}
