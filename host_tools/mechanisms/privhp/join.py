"""Per-channel private CDFs joined to the PrivHP generator (docs/mechanisms/privhp.md,
"Joined CDFs"): raking of the leaf masses to the CDFs' marginals, and
sampling inside a leaf from the CDF's shape instead of uniformly.

Both inputs are released, private estimates (the leaves of growth.grow and
the CDFs of the cdf mechanism, F[c, k] = the CDF at the right edge of bin k
of K equal bins of [lo[c], hi[c])); everything here is post-processing.

The in-leaf shape on channel c: the CDF taken as piecewise linear between
its bin edges (uniform inside a bin, as the cdf generator samples), G_c(x),
restricted to the leaf's interval [a, b); a leaf whose interval holds no CDF
mass (G_c(b) = G_c(a)) keeps the uniform shape. Integer channels are not
joined (their in-leaf draw stays a uniform integer of the leaf's cell, and
they are left out of the raking): the CDF's bins and a leaf's integers need
not line up, and a shape over a few integers says little.
"""
import numpy as np

FLAT = 1e-12  # CDF mass below which a leaf's interval counts as flat (uniform shape)
RAKE_ROUNDS = 8  # passes over the joined channels (benchmarks/bench_privhp_join.py measured the marginal error)
# share of the total mixed in uniformly before raking (0, 1e-4, 1e-3 and 1e-2 measured: 0 left CDF mass
# unreachable and the joined W1 up to 10x the CDF's; 1e-4..1e-2 within 10% of one another)
FLOOR = 1e-3


def check_cdf(F, d):
    """True when ``F`` is a (d, K) float64 array of CDFs: finite, in [0, 1],
    non-decreasing along each row, ending at 1 (within 1e-9)."""
    return F.ndim == 2 and F.shape[0] == d and F.shape[1] >= 2 and bool(np.all(np.isfinite(F))) \
        and bool(np.all(F >= 0)) and bool(np.all(np.diff(F, axis=1) >= 0)) \
        and bool(np.all(np.abs(F[:, -1] - 1.0) <= 1e-9))


def join_need(leaves, K, d):
    """Bytes of host memory raking and the in-leaf tables take: per joined
    channel (all are prepared at once) a union grid of at most 2 leaves +
    K + 1 edges, doubled for flat leaves (about 10 float64 or int64 arrays
    of it), 3 per-leaf arrays and the CDF."""
    return 8 * d * (20 * (2 * leaves + K + 1) + 3 * leaves + 2 * (K + 1))


class Shape:
    """Channel c's CDF as a piecewise-linear function on [lo, hi): ``P`` the
    K + 1 cumulative masses at the bin edges (P[0] = 0, P[K] = 1)."""

    def __init__(self, F_row, lo, hi):
        self.P = np.concatenate([[0.0], np.asarray(F_row, np.float64)])
        self.P[-1] = 1.0
        self.K = self.P.size - 1
        self.lo, self.hi = float(lo), float(hi)
        self.w = (self.hi - self.lo) / self.K

    def G(self, x):
        """The CDF at ``x`` (array, data units), linear inside a bin."""
        t = np.clip((np.asarray(x, np.float64) - self.lo) / self.w, 0.0, self.K)
        j = np.minimum(t.astype(np.int64), self.K - 1)
        return self.P[j] + (self.P[j + 1] - self.P[j]) * (t - j)

    def inverse(self, y):
        """The smallest x with G(x) = y, for y in [0, 1] (array)."""
        j = np.clip(np.searchsorted(self.P, y, side="right") - 1, 0, self.K - 1)
        p = self.P[j + 1] - self.P[j]
        frac = np.where(p > 0, (y - self.P[j]) / np.where(p > 0, p, 1.0), 0.0)
        return self.lo + (j + np.clip(frac, 0.0, 1.0)) * self.w


def rake(box_lo, box_hi, mass, shapes, vol, rounds=RAKE_ROUNDS):
    """Leaf masses (N,) raked to the marginals of ``shapes`` ({channel:
    Shape}) by iterative proportional fitting, ``rounds`` passes over the
    channels. ``vol`` (N,) is each leaf box's share of the public box's
    volume, in (0, 1] (2**-level for a PrivHP leaf): the weights of the
    uniform floor, normalised so that no bounds over- or underflow it.

    Per channel the grid is the union of the leaf edges on that channel and
    the CDF's K + 1 bin edges: a grid cell lies in one leaf interval's
    inside or outside and in one CDF bin, so a leaf's mass spreads over the
    cells by its in-leaf shape exactly. One step scales every leaf by the
    mean, over its interval in its shape, of target / model bin mass (the
    fixed-shape form of IPF: the model's marginal moves to the CDF's, the
    masses stay >= 0). Before the first pass a FLOOR share of the total is
    mixed in uniformly (by ``vol``): a multiplicative step never revives a
    zero-mass leaf. The total is kept (rescaled after each pass, as a step
    need not keep it). Noisy CDFs need not be consistent with the leaves
    (mass where the tree says none), and then IPF need not converge: the
    pass with the smallest summed L1 gap between the model's and the CDFs'
    bin probabilities is returned, the input as given (before the floor)
    included, so raking never moves the marginals away from the CDFs.
    ``mass`` negative entries count as 0.
    """
    m = np.maximum(np.asarray(mass, np.float64), 0.0)
    total = m.sum()
    if not total > 0 or not shapes:
        return m
    prepared = [_prepare(box_lo[:, c], box_hi[:, c], s) for c, s in shapes.items()]
    best, best_gap = m, _gap(prepared, m, total)
    # a multiplicative step never revives a zero-mass leaf: mix in a FLOOR share of the uniform
    # distribution (by box volume) so that CDF mass where the tree has none can be placed
    vol = np.asarray(vol, np.float64)
    m = (1 - FLOOR) * m + FLOOR * total * vol / vol.sum()
    for _ in range(rounds):
        for prep in prepared:
            il, ih, base, Z, cell_bin, target = prep
            model = _model(prep, m)
            ratio = np.where(model > 0, target * total / np.where(model > 0, model, 1.0), 1.0)
            S = np.concatenate([[0.0], np.cumsum(ratio[cell_bin] * base)])
            m = m / Z * (S[ih] - S[il])
        s = m.sum()
        if not s > 0:
            break
        m = m * (total / s)
        gap = _gap(prepared, m, total)
        if gap < best_gap:
            best, best_gap = m, gap
    return best


def _gap(prepared, m, total):
    """Sum over the channels of the L1 distance between the model's and
    the CDF's bin probabilities."""
    return sum(float(np.abs(_model(p, m) / total - p[5]).sum()) for p in prepared)


def marginal(box_lo, box_hi, mass, shape, c):
    """The joined model's mass (K,) in each bin of ``shape`` (channel ``c``)
    for leaf masses ``mass`` (>= 0): each leaf spread over its interval by
    the shape (uniformly when flat), as rake and the sampler do."""
    return _model(_prepare(box_lo[:, c], box_hi[:, c], shape), np.asarray(mass, np.float64))


def _model(prep, m):
    """Bin masses of leaf masses ``m`` on a channel prepared by _prepare:
    the leaf's m / Z spread over its grid cells (a difference array), times
    each cell's base mass, summed per CDF bin."""
    il, ih, base, Z, cell_bin, target = prep
    a = m / Z
    cell_mass = np.cumsum(np.bincount(il, a, base.size + 1) - np.bincount(ih, a, base.size + 1))[:-1] * base
    return np.bincount(cell_bin, cell_mass, target.size)


def _prepare(a, b, shape):
    """Per channel: (il, ih, base, Z, cell_bin, target) for rake: grid
    indices of the leaf edges, the grid cells' base mass (one row per leaf
    shape: the CDF's, or the uniform one for flat leaves, stacked so a leaf's
    index picks its row), the leaf's shape mass Z, each cell's CDF bin and
    the CDF's bin probabilities."""
    edges = shape.lo + np.arange(shape.K + 1) * shape.w
    edges[-1] = shape.hi
    grid = np.unique(np.concatenate([a, b, edges]))
    G = shape.G(grid)
    Z = shape.G(b) - shape.G(a)
    flat = Z <= FLAT
    il, ih = np.searchsorted(grid, a), np.searchsorted(grid, b)
    cell_bin = np.minimum(((0.5 * (grid[:-1] + grid[1:]) - shape.lo) / shape.w).astype(np.int64), shape.K - 1)
    base = np.diff(G)
    target = np.diff(shape.P)
    if flat.any():
        # flat leaves use the uniform shape: their cells go to a second copy of the grid
        n = grid.size
        ubase = np.diff(grid) / (shape.hi - shape.lo)
        base = np.concatenate([base, [0.0], ubase])
        cell_bin = np.concatenate([cell_bin, [0], cell_bin])
        il = np.where(flat, il + n, il)
        ih = np.where(flat, ih + n, ih)
        Z = np.where(flat, (b - a) / (shape.hi - shape.lo), Z)
    return il, ih, base, Z, cell_bin, target


class InLeaf:
    """In-leaf sampling of the joined channels: for leaf i on channel c,
    G_c(a) and G_c(b) - G_c(a) (0: the flat leaf, sampled uniformly)."""

    def __init__(self, box_lo, box_hi, shapes):
        self.shapes = shapes
        self.g0, self.dg = {}, {}
        for c, s in shapes.items():
            g0 = s.G(box_lo[:, c])
            dg = s.G(box_hi[:, c]) - g0
            self.g0[c], self.dg[c] = g0, np.where(dg > FLAT, dg, 0.0)

    def apply(self, block, idx, u, cell):
        """Overwrite the joined columns of ``block`` (the uniform draw from
        ``u``, rows of leaves ``idx``; ``cell`` the generator's per-leaf
        (width, low corner, top) rows) with the inverse CDF restricted to the
        leaf's interval, kept inside the half-open box."""
        for c, s in self.shapes.items():
            dg = self.dg[c][idx]
            x = s.inverse(self.g0[c][idx] + u[:, c] * dg)
            x = np.clip(x, cell[:, 1, c], cell[:, 2, c])
            block[:, c] = np.where(dg > 0, x, block[:, c])
