"""Host estimators for the CDF tree (the CDF tree paper, Sec. III-IV and VI;
docs/mechanisms/cdf.md): plain covering sums, exact errors, GLS (Hay et al.
2010 / Honaker 2015 two-pass), monotone consistency (PAVA for l2, the paper's
trellis DP, Algorithm C, as a reference), quantiles.

A tree of height m over K bins with branching (n_1..n_m) is given level by
level: ``levels[i]`` holds the noisy counts of level i+1's stored nodes, left
to right (the first ceil(K / P_{i+1}) nodes; nodes covering padding only are
exactly zero and not stored). ``var[i]`` is the noise variance of every node
of that level. All functions here are post-processing: they cost no privacy.
"""
import math

import numpy as np


def suffix_products(branching):
    """P_0..P_m: leaves under one node of level i (P_0 = K-bar, P_m = 1)."""
    P = [1]
    for n in reversed(branching):
        P.append(P[-1] * n)
    return P[::-1]


def stored_widths(K, branching):
    """Nodes stored per level 1..m: ceil(K / P_i)."""
    P = suffix_products(branching)
    return [-(-K // P[i]) for i in range(1, len(branching) + 1)]


def gls_need(K, branching, d):
    """Bytes of host memory that assembling d channels of K bins on the tree
    ``branching`` takes, from those public parameters alone: GLS holds 3
    float64 arrays over every node of the full tree, padding included
    (prod(n_1..n_i) nodes on level i), and 4 of its widest level; then the
    d CDFs take 6 arrays of K, plus 1 MiB (tests/test_hostile.py checks it)."""
    full, width = 0, 1
    for n in branching:
        width *= n
        full += width
    return 8 * (3 * full + 4 * width + 6 * d * K) + (1 << 20)


def cdf_what(K, branching, d):
    """How refusals name a CDF configuration: its bins, tree and padded leaves."""
    return "a cdf of %d bins on the tree %s (%d padded leaves) over %d channel(s)" % (
        K, "x".join(map(str, branching)), math.prod(branching), d)


def level_use(K, P, n):
    """sum over L = 0..K-1 of (floor(L / P) mod n): how often level nodes of
    leaf-size P and branching n enter the plain covering sums, in O(1)."""
    a, rem = divmod(K, P * n)
    b, c = divmod(rem, P)
    return a * P * n * (n - 1) // 2 + P * b * (b - 1) // 2 + c * b


def plain_error(K, branching, var):
    """Exact sum over L = 1..K-1 of Var(plain cumulative count L), i.e. N**2 * E2
    of Theorem IV.1, for any padding (K-bar >= K) and per-level variances."""
    P = suffix_products(branching)
    return float(sum(level_use(K, P[i + 1], branching[i]) * var[i] for i in range(len(branching))))


def _full(levels, K, branching):
    """Levels padded to their full width prod(n_1..n_i) with zeros."""
    out, w = [], 1
    for y, n in zip(levels, branching):
        w *= n
        f = np.zeros(w)
        f[:len(y)] = y
        out.append(f)
    return out


def plain_cumulative(levels, K, branching):
    """Algorithm T: noisy cumulative counts c-bar_L for L = 1..K-1 from the
    covering (d_i(L) left siblings on each level's path)."""
    P = suffix_products(branching)
    L = np.arange(1, K, dtype=np.int64)
    total = np.zeros(K - 1)
    for i, y in enumerate(_full(levels, K, branching)):
        cs = np.concatenate([[0.0], np.cumsum(y)])
        lo = (L // P[i]) * branching[i]
        hi = L // P[i + 1]
        total += cs[hi] - cs[lo]
    return total


def gls_leaves(levels, var, K, branching, root=None):
    """Generalised least squares estimate of the K leaf counts (Algorithm G).

    Bottom-up, each stored node combines its own measurement with the sum of
    its children's estimates by inverse variance; top-down, each parent's
    final value is split over its children in proportion to their variances.
    Padding-only nodes are exact zeros (variance 0). ``root`` is the public
    reading count when known (swap model); by default the root is not
    measured and comes from below. O(number of nodes).
    """
    m = len(branching)
    full = _full(levels, K, branching)
    z = [None] * (m + 1)
    V = [None] * (m + 1)
    z[m] = full[m - 1]
    V[m] = np.zeros(z[m].size)
    V[m][:K] = var[m - 1]
    for i in range(m - 1, -1, -1):
        n = branching[i]
        S = z[i + 1].reshape(-1, n).sum(axis=1)
        T = V[i + 1].reshape(-1, n).sum(axis=1)
        if i == 0:
            z[0], V[0] = S, T
            continue
        w = len(levels[i - 1])
        s2 = var[i - 1]
        zi, Vi = S.copy(), T.copy()
        Vr = 1.0 / (1.0 / s2 + 1.0 / T[:w])
        zi[:w] = Vr * (full[i - 1][:w] / s2 + S[:w] / T[:w])
        Vi[:w] = Vr
        z[i], V[i] = zi, Vi
    x = np.array([float(root)]) if root is not None else z[0]
    for i in range(m):
        n = branching[i]
        zc = z[i + 1].reshape(-1, n)
        Vc = V[i + 1].reshape(-1, n)
        Ts = Vc.sum(axis=1)
        D = x - zc.sum(axis=1)
        share = np.divide(Vc, Ts[:, None], out=np.zeros_like(Vc), where=Ts[:, None] > 0)
        x = (zc + share * D[:, None]).ravel()
    return x[:K]


def monotone_l2(h, top=None):
    """l2-nearest non-decreasing vector (PAVA), clipped to [0, top]."""
    # scipy.optimize takes ~0.35 s to import: loaded by assembly, not by every
    # importer of the mechanism registry (frames, ingest, the CLI)
    from scipy.optimize import isotonic_regression
    out = isotonic_regression(np.asarray(h, dtype=float), increasing=True).x
    return np.clip(out, 0.0, top if top is not None else np.inf)


def trellis(h, N, loss="l2"):
    """Exact integer consistency (Sec. VI, Algorithm C): integer
    0 <= g_1 <= ... <= g_{K-1} <= N minimising sum loss(g_i - h_i), for the
    K-1 noisy cumulative counts ``h`` (the K-th is N). O(K N) time and
    (K-2)(N+1) int32 back-pointers: a reference for small N. Ties go to the
    smallest value."""
    h = np.asarray(h, dtype=float)
    v = np.arange(N + 1, dtype=float)
    cost = (np.abs if loss == "l1" else np.square)
    A = cost(v - h[0])
    idx = np.arange(N + 1)
    back = np.empty((max(len(h) - 1, 0), N + 1), dtype=np.int32)
    for i in range(1, len(h)):
        pm = np.minimum.accumulate(A)
        new = np.empty(N + 1, dtype=bool)
        new[0] = True
        new[1:] = A[1:] < pm[:-1]
        back[i - 1] = np.maximum.accumulate(np.where(new, idx, 0))
        A = cost(v - h[i]) + pm
    g = np.empty(len(h), dtype=np.int64)
    g[-1] = int(np.argmin(A))
    for i in range(len(h) - 1, 0, -1):
        g[i - 1] = back[i - 1][g[i]]
    return g


def cdf_from_leaves(x):
    """Monotone normalised CDF at the K bin right edges from leaf estimates.

    Cumulative sums are made non-decreasing by PAVA and clipped at 0; the
    last one is the estimated reading count N-hat. Returns (F, N-hat); with
    no signal (N-hat <= 0) F is the uniform CDF.
    """
    h = monotone_l2(np.cumsum(x))
    total = float(h[-1])
    K = len(h)
    if not total > 0:
        return np.arange(1, K + 1) / K, 0.0
    F = h / total
    F[-1] = 1.0
    return F, total


def quantiles(F, lo, hi, qs):
    """Quantiles of the piecewise-uniform distribution with CDF ``F`` at the
    bin right edges of [lo, hi): smallest bin reaching q, interpolated
    linearly inside it."""
    F = np.asarray(F, dtype=float)
    K = F.size
    w = (hi - lo) / K
    qs = np.asarray(qs, dtype=float)
    j = np.minimum(np.searchsorted(F, qs, side="left"), K - 1)
    prev = np.where(j > 0, F[np.maximum(j - 1, 0)], 0.0)
    step = F[j] - prev
    frac = np.divide(qs - prev, step, out=np.zeros_like(qs), where=step > 0)
    return lo + (j + np.clip(frac, 0.0, 1.0)) * w
