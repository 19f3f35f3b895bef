"""The graphical model fitted to noisy, possibly partitioned marginals, and
sampling synthetic records from it (docs/mechanisms/marginals.md, Host
algorithms). Post-processing of released measurements: it costs no privacy.

The estimate is Private-PGM's (McKenna, Sheldon, Miklau 2019): among the
distributions p = exp(sum over cliques C of theta_C(x_C)) / Z, the one whose
marginals, scaled to the estimated total n_hat, minimise

    L(mu) = sum over measurements m of |G_m mu_m - y_m|^2 / (2 var_m),

where mu_m is the model's marginal on m's columns (counts) and G_m sums its
cells into m's groups (the partitioned error model of the paper, Def. 9:
a group's noisy total constrains the sum of its cells, and the shape inside
a group comes from the other measurements, never from a uniform spread).
L is fitted by entropic mirror descent on theta with a backtracking
(Armijo) step.

Several windows of one stream (disjoint records, each released under its own
budget) combine in one fit: measurement m of window k predicts n_k times the
model's marginal, with n_k estimated from window k's measurements alone, so
one distribution p is fitted to every window at once and a marginal measured
in every window counts as a sum of independent noisy windows (each term
weighted by its own noise variance). This first slice does inference on the full joint table, so
prod(sizes) must stay at or below MAX_CELLS; junction-tree inference for
larger domains is not built yet.
"""
import math

import numpy as np

from edgesynth.errors import InputError

# Full-joint inference holds a few float64 arrays of prod(sizes) cells (32 MiB
# each at 2**22): measured there, the fit peaks 130 MiB above the process and
# sampling 226 MiB (docs/mechanisms/marginals.md, Host algorithms).
MAX_CELLS = 1 << 22


def estimate_total(measurements):
    """n_hat: the inverse-variance weighted mean of each measurement's
    sum of totals (each an unbiased estimate of n with variance G * var),
    at least 1 record."""
    w = np.array([1.0 / (len(m.y) * m.var) for m in measurements])
    s = np.array([float(m.y.sum()) for m in measurements])
    return max(float(np.dot(w, s) / w.sum()), 1.0)


def _cliques(measurements):
    """The maximal column sets among the measurements (sorted tuples) and,
    per measurement, the index of the first maximal clique holding it."""
    sets = sorted({m.cols for m in measurements}, key=lambda c: (-len(c), c))
    maximal = []
    for c in sets:
        if not any(set(c) <= set(b) for b in maximal):
            maximal.append(c)
    owner = [next(i for i, b in enumerate(maximal) if set(m.cols) <= set(b)) for m in measurements]
    return maximal, owner


def _peel(cols, cliques, sizes):
    """The column to take out first: in the fewest cliques, then the largest
    (the array left after summing it out is the smallest)."""
    return min(cols, key=lambda v: (sum(v in c for c in cliques), -sizes[v], v))


def clique_sums(p, cols, cliques, sizes):
    """{clique: marginal of p on it} for an array ``p`` over the sorted
    columns ``cols`` and cliques (sorted tuples) inside them. The cliques
    through one column are reduced from p; the others from p summed over
    that column, recursively, so that all C(d, 2) pairs cost about d passes
    over the joint instead of C(d, 2)."""
    if not cliques:
        return {}
    v = _peel(cols, cliques, sizes)
    out = {c: np.einsum(p, list(cols), list(c)) for c in cliques if v in c}
    rest = [c for c in cliques if v not in c]
    if rest:
        k = cols.index(v)
        out.update(clique_sums(p.sum(axis=k), cols[:k] + cols[k + 1:], rest, sizes))
    return out


def clique_total(theta, cols, sizes):
    """sum over cliques c of theta[c] broadcast over the sorted columns
    ``cols`` (theta: {clique: array}), built the same way round as
    clique_sums: the cliques without the peeled column on a smaller array,
    broadcast once."""
    shape = [sizes[i] for i in cols]
    cliques = list(theta)
    if not cliques:
        return np.zeros(shape)
    v = _peel(cols, cliques, sizes)
    k = cols.index(v)
    rest = {c: t for c, t in theta.items() if v not in c}
    if rest:
        inner = clique_total(rest, cols[:k] + cols[k + 1:], sizes)
        out = np.broadcast_to(np.expand_dims(inner, k), shape).copy()
    else:
        out = np.zeros(shape)
    for c, t in theta.items():
        if v in c:
            out += t.reshape([sizes[i] if i in c else 1 for i in cols])
    return out


class Model:
    """A fitted graphical model over d columns with public domain ``sizes``.

    ``log_p`` is the log-probability of every cell of the joint (shape
    ``sizes``); ``total`` the estimated record count n_hat of all windows
    together; ``totals`` the estimated record count of each window (in the
    order of the sorted window ids given to ``fit``; one entry for a single
    window, equal to ``total``); ``loss`` the final value of L (counts
    squared over variance, dimensionless).
    """

    def __init__(self, sizes, log_p, total, loss=float("nan"), iters=0, totals=None):
        self.sizes = tuple(int(s) for s in sizes)
        self.log_p = log_p
        self.total = float(total)
        self.totals = (self.total,) if totals is None else tuple(float(t) for t in totals)
        self.loss = float(loss)
        self.iters = int(iters)

    def joint(self):
        """The joint probability table (shape ``sizes``, sums to 1)."""
        return np.exp(self.log_p)

    def marginal(self, cols):
        """The model's probability table on the sorted column indices
        ``cols`` (shape (sizes[c] for c in cols), sums to 1)."""
        cols = tuple(int(c) for c in cols)
        if list(cols) != sorted(set(cols)) or not cols or cols[-1] >= len(self.sizes):
            raise InputError("marginal columns must be distinct, sorted indices below %d, got %r"
                             % (len(self.sizes), cols))
        other = tuple(i for i in range(len(self.sizes)) if i not in cols)
        return self.joint().sum(axis=other)

    def sample(self, n, rng):
        """n synthetic records as an int array (n, d) of cell indices.

        Counts per joint cell are the systematic rounding of n * p with one
        uniform offset: every cell gets floor or ceil of its expected count
        and the counts sum to n exactly, so each cell's count is unbiased
        with variance at most 1/4 (an i.i.d. draw's is n p (1 - p)). The
        cells are visited in a random order before the rounding, so that a
        marginal cell's error is a sum of independent-looking roundings and
        no column order is favoured, and the rows are shuffled afterwards:
        row order carries nothing (the mbi 1.1.0 sampler's rows, ordered by
        index within groups, made spurious correlations across columns).
        """
        n = int(n)
        if n < 0:
            raise InputError("the number of records to sample must be >= 0, got %d" % n)
        p = self.joint().ravel()
        order = rng.permutation(len(p))
        cum = np.cumsum(p[order])
        cum /= cum[-1]  # exactly 1 at the end, so the last edge is floor(n + u) = n
        edges = np.floor(cum * n + rng.random())
        counts = np.diff(np.concatenate(([0.0], edges))).astype(np.int64)
        flat = np.repeat(order, counts)
        rng.shuffle(flat)
        return np.stack(np.unravel_index(flat, self.sizes), axis=1).astype(np.int64)


def fit(sizes, measurements, iters=500, seed=0, tol=1e-9, windows=None):
    """Fit a Model over columns of public domain ``sizes`` (list of ints,
    each >= 1) to ``measurements`` (Measurement objects, checked against
    sizes). At most ``iters`` mirror-descent steps (>= 1); stops earlier when
    a step lowers L by less than ``tol`` times L. ``seed`` is accepted for
    the interface: the fit is deterministic (it starts from the uniform
    table). ``windows``: optional window id (int) of each measurement, for
    measurements from several windows of one stream (disjoint records): each
    window gets its own record count n_k (estimate_total of its
    measurements) and the model's total is their sum; None is one window.
    InputError when prod(sizes) exceeds MAX_CELLS or nothing is measured.
    """
    del seed  # deterministic: no random start
    sizes = tuple(int(s) for s in sizes)
    if not sizes or min(sizes) < 1:
        raise InputError("every column needs a domain of at least 1 cell, got %r" % (sizes,))
    cells = math.prod(sizes)
    if cells > MAX_CELLS:
        raise InputError("the joint domain has %d cells (%s), above the %d that full-joint inference holds; "
                         "a larger schema needs a sparser set of marginals and junction-tree inference "
                         "(not built yet)"
                         % (cells, "x".join(map(str, sizes)), MAX_CELLS))
    if not measurements:
        raise InputError("fitting a model needs at least one measurement")
    if int(iters) < 1:
        raise InputError("iters must be >= 1, got %r" % iters)
    for m in measurements:
        m.check(sizes)
    if windows is None:
        windows = [0] * len(measurements)
    windows = [int(w) for w in windows]
    if len(windows) != len(measurements):
        raise InputError("fit got %d window ids for %d measurements" % (len(windows), len(measurements)))
    ids = sorted(set(windows))
    totals = [estimate_total([m for m, w in zip(measurements, windows) if w == k]) for k in ids]
    total = sum(totals)
    # measurement m predicts n_k * p: its share of the model's counts total * p
    share = [totals[ids.index(w)] / total for w in windows]
    d = len(sizes)
    maximal, owner = _cliques(measurements)
    axes = tuple(range(d))
    # a measurement's axes inside its clique's marginal (both sorted)
    inner = [tuple(i for i, c in enumerate(maximal[o]) if c not in m.cols) for m, o in zip(measurements, owner)]
    theta = [np.zeros([sizes[i] for i in c]) for c in maximal]

    def evaluate(theta):
        """(log p, clique marginals in counts, L, dL/dmu per clique)."""
        logits = clique_total(dict(zip(maximal, theta)), axes, sizes)
        logits -= logits.max()
        p = np.exp(logits)
        z = p.sum()
        p /= z
        log_p = logits - math.log(z)
        sums = clique_sums(p, axes, maximal, sizes)
        mu = [total * sums[c] for c in maximal]
        loss = 0.0
        grad = [np.zeros_like(t) for t in theta]
        for m, o, ax, f in zip(measurements, owner, inner, share):
            mu_m = f * mu[o].sum(axis=ax)
            r = m.group_sums(mu_m) - m.y
            loss += float(r @ r) / (2 * m.var)
            g = (f * r / m.var)[m.groups].reshape(mu_m.shape)
            grad[o] += np.expand_dims(g, ax) if ax else g
        return log_p, mu, loss, grad

    log_p, mu, loss, grad = evaluate(theta)
    # a step of alpha * r / var in theta moves a cell's count by about
    # total * p * alpha * r / var: at alpha = var / total, by at most the
    # residual r itself; the line search adapts from there
    alpha = min(m.var for m in measurements) / total
    done = 0
    for done in range(1, int(iters) + 1):
        alpha *= 2
        for _ in range(40):
            new = [t - alpha * g for t, g in zip(theta, grad)]
            n_log_p, n_mu, n_loss, n_grad = evaluate(new)
            decrease = sum(float(np.sum(g * (a - b))) for g, a, b in zip(grad, mu, n_mu))
            if loss - n_loss >= 0.5 * decrease:
                break
            alpha *= 0.5
        else:
            break  # no step lowers L: at a minimum up to rounding
        step = loss - n_loss
        theta, log_p, mu, loss, grad = new, n_log_p, n_mu, n_loss, n_grad
        if step <= tol * max(loss, 1e-300):
            break
    return Model(sizes, log_p, total, loss, done, totals)


def to_table(schema, cells, rng):
    """Synthetic records as a pandas DataFrame with the schema's column names
    and values: ``cells`` (int array (n, d), as ``Model.sample`` gives) decoded
    column by column with ``schema.decode_column`` (a categorical value, or a
    number drawn uniformly inside its bin with ``rng``; the "other" cell is
    the schema's missing-value sentinel)."""
    import pandas as pd

    cells = np.asarray(cells, dtype=np.int64)
    if cells.ndim != 2 or cells.shape[1] != len(schema.sizes):
        raise InputError("records need %d columns of cell indices" % len(schema.sizes))
    return pd.DataFrame({name: schema.decode_column(i, cells[:, i], rng) for i, name in enumerate(schema.names)})
