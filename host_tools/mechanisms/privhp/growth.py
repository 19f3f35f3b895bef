"""PrivHP generator construction on the host: consistency (Alg. 4) and growth
(Alg. 3) over released counters, vectorised per level with numpy.

Everything here is post-processing of noisy counters and costs no privacy.
Corrections of the algorithms printed in the PrivHP paper (§5.3-5.4; see
docs/mechanisms/privhp.md): growth runs to level r; top-k is taken among the
new level-l candidates; the root is clamped at 0 (a non-positive root yields
the uniform generator).
"""
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


def sketch_query(state, s, level, nodes):
    """Estimates of level-``level`` nodes (paths ``nodes``) from sketch ``s``.

    count-min: min over rows; count sketch: median of sign-corrected cells.
    """
    key = nodes.astype(np.int64) + (1 << level)
    x0 = key & LIMB_MASK
    x1 = (key >> LIMB_BITS) & LIMB_MASK
    x2 = key >> (2 * LIMB_BITS)
    prm = state.hash[s]                       # (j, 4 or 8)
    h = (prm[:, 0:1] + prm[:, 1:2] * x0 + prm[:, 2:3] * x1 + prm[:, 3:4] * x2) % HASH_P
    cols = h & (state.w - 1)
    table = state.sketches[s]                 # (j, w)
    vals = np.take_along_axis(table, cols, axis=1).astype(np.float64)
    if state.sketch == "cms":
        return vals.min(axis=0)
    g = (prm[:, 4:5] + prm[:, 5:6] * x0 + prm[:, 6:7] * x1 + prm[:, 7:8] * x2) % HASH_P
    return np.median(vals * (1 - 2 * (g & 1)), axis=0)


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
    8 + 6 j int64 arrays of the (at most 2k) candidates, the leaves (24 bytes
    each, twice while concatenated), the generator (generator_need) and
    1 MiB (tests/test_hostile.py checks it)."""
    cand = 2 * min(k, 1 << L) if r > L else 0
    leaves = leaf_count(L, r, k)
    return 8 * ((1 << (L + 1)) + (8 + 6 * j) * cand) + 48 * leaves + generator_need(leaves, d) + (1 << 20)


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
        est = sketch_query(state, l - L - 1, l, kids_v.ravel()).reshape(-1, 2)
        a, b = split(hot_c, est[:, 0], est[:, 1])
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
