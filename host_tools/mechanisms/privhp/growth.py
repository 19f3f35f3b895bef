"""PrivHP generator construction on the host: consistency (Alg. 4) and growth
(Alg. 3) over released counters, vectorised per level with numpy.

Everything here is post-processing of noisy counters and costs no privacy.
Corrections of the algorithms printed in the PrivHP paper (§5.3-5.4; see
docs/mechanisms/privhp.md): growth runs to level r; top-k is taken among the
new level-l candidates; the root is clamped at 0 (a non-positive root yields
the uniform generator). The paper's per-candidate sketch query (minimum over
rows) is replaced by a joint least-squares fit of each level (recover).
"""
import math

import numpy as np

from edgesynth.agent.hashing import LIMB_BITS, LIMB_MASK
from edgesynth.agent.hashing import P as HASH_P


def split(parent, c0, c1):
    """Alg. 4 in closed form, elementwise: children >= 0 that sum to ``parent``.

    Negative children are raised to 0 first; then the surplus or deficit is
    shared evenly, c0' = clip((P + c0 - c1) / 2, 0, P), c1' = P - c0'.
    """
    c0 = np.maximum(c0, 0.0)
    c1 = np.maximum(c1, 0.0)
    left = np.clip((parent + c0 - c1) * 0.5, 0.0, parent)
    return left, parent - left


def sketch_cells(state, s, level, nodes):
    """(rows, signs), each (j, len(nodes)) int64: the flat cell index
    (row * w + column) of every level-``level`` node (paths ``nodes``) in
    each row of sketch ``s``, and its update sign (+1 on count-min)."""
    key = nodes.astype(np.int64) + (1 << level)
    x0 = key & LIMB_MASK
    x1 = (key >> LIMB_BITS) & LIMB_MASK
    x2 = key >> (2 * LIMB_BITS)
    prm = state.hash[s]                       # (j, 4 or 8)
    h = (prm[:, 0:1] + prm[:, 1:2] * x0 + prm[:, 2:3] * x1 + prm[:, 3:4] * x2) % HASH_P
    rows = np.arange(state.j, dtype=np.int64)[:, None] * state.w + (h & (state.w - 1))
    if state.sketch == "cms":
        return rows, np.ones_like(rows)
    g = (prm[:, 4:5] + prm[:, 5:6] * x0 + prm[:, 6:7] * x1 + prm[:, 7:8] * x2) % HASH_P
    return rows, 1 - 2 * (g & 1)


def recover(state, s, level, kids, parent):
    """Consistent counts (left, right) of the children ``kids`` ((h, 2)
    paths, level ``level``) of hot parents with consistent counts ``parent``
    (h,), from sketch ``s``: every child in [0, its parent], each pair
    summing to its parent.

    Least squares over every sketch cell a candidate touches, with
    the left child's count t of each pair the unknown: a cell holds the
    signed sum of the candidates hashed to it (t, or parent - t), plus
    noise and the level's mass outside the candidates. That outside mass
    needs no term: on count-min a pair enters every row once with +1 (t,
    its left cell) and once with -1 (its right cell), so adding the same
    amount to every cell moves no t; on the count sketch it enters with
    random signs and averages 0. Unlike the minimum over rows (the paper's query, which adds
    every colliding candidate's mass to a light one), the fit attributes a
    cell's mass to all the candidates that share it (measured 1.58x on the
    joint W1 bound, 1.23x on the marginal W1 at a 32 KiB shape:
    docs/mechanisms/privhp.md, Host algorithms). A weak prior t ~
    parent / 2, weighted as if its sd were parent / 2 + the cell noise sd,
    makes the solution unique where candidates outnumber cells.
    """
    # scipy.sparse takes ~0.15 s to import: loaded by assembly, not by every
    # command that reads frames (tests/test_imports.py)
    from scipy import sparse
    from scipy.sparse.linalg import lsmr

    h = parent.size
    t = np.zeros(h)
    live = np.flatnonzero(parent > 0)
    if live.size == 0:
        return t, parent - t
    p = parent[live]
    rows, signs = sketch_cells(state, s, level, kids[live].ravel())   # (j, 2m), left/right interleaved
    m = live.size
    pair = np.broadcast_to(np.repeat(np.arange(m), 2), rows.shape)
    left = np.broadcast_to(np.tile([1.0, 0.0], m), rows.shape)
    # cell = sum(sign * t) over left children + sum(sign * (p - t)) over right ones
    rhs = state.sketches[s].astype(np.float64).ravel()   # a copy: the state's table stays as released
    np.subtract.at(rhs, rows.ravel(), (signs * (1.0 - left) * p[pair]).ravel())
    used, cell = np.unique(rows.ravel(), return_inverse=True)
    coef = (signs * (2.0 * left - 1.0)).ravel()
    sd = math.sqrt(state.sketch_var[s])
    prior = sd / (0.5 * p + sd)
    A = sparse.vstack([sparse.csr_matrix((coef, (cell, pair.ravel())), shape=(used.size, m)),
                       sparse.diags(prior)]).tocsr()
    b = np.concatenate([rhs[used], prior * 0.5 * p])
    # unconstrained fit, then clipped: within 2 % of a bounded solver's W1 at 10x its speed (scipy's
    # lsq_linear took 27 s at k = 32768, j = 4, w = 4096; this ~1 s). LSMR needs up to ~900 iterations
    # on 2048 crowded candidates (100 leave it worse than the minimum over rows); the cap bounds the
    # time on any frame to 1000 products with the (2 j + 1) m nonzeros of A
    t[live] = np.clip(lsmr(A, b, atol=1e-6, btol=1e-6, maxiter=1000)[0], 0.0, p)
    return t, parent - t


def leaf_count(L, r, k):
    """Leaves ``grow`` yields for public (L, r, k), whatever the counts: the
    2**L tree nodes' descendants double on each sketch level, at most k
    stay, the others become leaves, and level r's candidates all do."""
    hot, leaves = 1 << L, 0
    for l in range(L + 1, r + 1):
        cand = 2 * hot
        if l == r:
            leaves += cand
        elif cand > k:
            leaves += cand - k
        hot = min(cand, k)
    return leaves if r > L else 1 << L


def generator_need(leaves, d):
    """Bytes of host memory a Generator of ``leaves`` leaves over d channels
    takes: its 4 (leaves, d) float64 box arrays, 4 more while leaf_cells and
    leaf_boxes build them, 2 int64 ones per integer channel (a cell's
    integers), 6 per-leaf arrays and the file bytes it writes."""
    return leaves * (80 * d + 64)


def privhp_host_need(L, r, k, j, d):
    """Bytes of host memory that assembling a PrivHP state takes, from its
    public parameters alone: the tree as float64, per sketch level about
    16 + 14 j float64/int64 arrays of the (at most 2k) candidates (recover's
    least-squares system and its temporaries; the sketch tables are at most
    j x 4096, inside the constant), the leaves (24 bytes each, twice while
    concatenated), the generator (generator_need) and 2 MiB
    (tests/test_hostile.py checks it)."""
    cand = 2 * min(k, 1 << L) if r > L else 0
    leaves = leaf_count(L, r, k)
    return 8 * ((1 << (L + 1)) + (16 + 14 * j) * cand) + 48 * leaves + generator_need(leaves, d) + (2 << 20)


class Leaves:
    """Leaves of a grown partition: ``level`` (int), ``path`` (int, the level's
    bits read most significant first) and ``mass`` (consistent noisy count)."""

    def __init__(self, level, path, mass):
        self.level = np.asarray(level, dtype=np.int64)
        self.path = np.asarray(path, dtype=np.int64)
        self.mass = np.asarray(mass, dtype=np.float64)


def grow(state, trace=None):
    """Consistent partition tree of a PrivHP state; returns its Leaves.

    The invariants (tested): every internal count equals the sum of its
    children, all counts are >= 0, and the leaf masses add up to the root.
    ``trace``, if a list, receives (level, paths, counts) of every node that
    became internal, for checking those invariants.
    """
    L, r, k = state.L, state.r, state.k
    tree = state.tree.astype(np.float64)
    root = max(tree[0], 0.0)
    if root <= 0.0:
        return Leaves([0], [0], [1.0])
    cur = np.array([root])
    for l in range(L):
        if trace is not None:
            trace.append((l, np.arange(1 << l), cur))
        kids = tree[(1 << (l + 1)) - 1:(1 << (l + 2)) - 1].reshape(-1, 2)
        a, b = split(cur, kids[:, 0], kids[:, 1])
        cur = np.column_stack((a, b)).ravel()
    hot_v = np.arange(1 << L, dtype=np.int64)
    hot_c = cur
    if L == r:
        return Leaves(np.full(hot_v.size, r), hot_v, hot_c)
    levels, paths, masses = [], [], []
    for l in range(L + 1, r + 1):
        if trace is not None:
            trace.append((l - 1, hot_v, hot_c))
        kids_v = np.column_stack((2 * hot_v, 2 * hot_v + 1))
        a, b = recover(state, l - L - 1, l, kids_v, hot_c)
        cand_v = kids_v.ravel()
        cand_c = np.column_stack((a, b)).ravel()
        if l == r or cand_v.size <= k:
            keep = np.ones(cand_v.size, dtype=bool)
        else:
            order = np.lexsort((cand_v, -cand_c))   # larger count first, then smaller path
            keep = np.zeros(cand_v.size, dtype=bool)
            keep[order[:k]] = True
        if l == r:
            keep[:] = False
        drop = ~keep
        levels.append(np.full(int(drop.sum()), l))
        paths.append(cand_v[drop])
        masses.append(cand_c[drop])
        hot_v, hot_c = cand_v[keep], cand_c[keep]
    return Leaves(np.concatenate(levels), np.concatenate(paths), np.concatenate(masses))


def leaf_cells(leaves, d):
    """(q, bits), each (N, d) int64: leaf i is cell q[i, c] of the
    2**bits[i, c] equal parts of channel c.

    Level t (1-based) of a path halves channel (t-1) mod d; the path's bits
    de-interleave into each channel's cell index.
    """
    n = leaves.level.size
    q = np.zeros((n, d), dtype=np.int64)
    bits = np.zeros((n, d), dtype=np.int64)
    for lvl in np.unique(leaves.level):
        sel = np.nonzero(leaves.level == lvl)[0]
        v = leaves.path[sel]
        qs = np.zeros((sel.size, d), dtype=np.int64)
        for t in range(1, int(lvl) + 1):
            i = (t - 1) % d
            qs[:, i] = (qs[:, i] << 1) | ((v >> (int(lvl) - t)) & 1)
            bits[sel, i] += 1
        q[sel] = qs
    return q, bits


def leaf_boxes(q, bits, lo, hi):
    """Boxes of the leaf cells (q, bits) (leaf_cells) in data units:
    (box_lo, box_hi), each (N, d)."""
    width = (hi - lo) / np.exp2(bits)
    return lo + q * width, lo + (q + 1) * width
