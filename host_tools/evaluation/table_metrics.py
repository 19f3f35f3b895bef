"""Table metrics for synthetic records of categorical (cell-index) columns:
total variation distance on every k-way marginal (docs/mechanisms/marginals.md,
Measured figures). TV(p, q) = 1/2 sum |p - q| over the marginal's cells, in
[0, 1]; 0 means the two tables have the same k-way marginal.
"""
import itertools
import math

import numpy as np

from edgesynth.errors import InputError


def marginal_tv(real, synth, sizes, cols):
    """Total variation between the empirical distributions of int arrays
    ``real`` (n, d) and ``synth`` (m, d) on the columns ``cols``. Only the
    cells either table occupies are counted (np.unique of their flat ids):
    time O((n + m) log(n + m)) and memory O(n + m), never prod(sizes[c])
    (a 3-way marginal of 4096-cell columns has 2**36 cells)."""
    shape = [int(sizes[c]) for c in cols]
    flat = np.concatenate([np.ravel_multi_index(tuple(t[:, c] for c in cols), shape) for t in (real, synth)])
    ids, inv = np.unique(flat, return_inverse=True)
    n = len(real)
    p = np.bincount(inv[:n], minlength=len(ids)) / n
    q = np.bincount(inv[n:], minlength=len(ids)) / len(synth)
    return 0.5 * float(np.abs(p - q).sum())


def tv(real_cells, synth_cells, sizes, k):
    """(average, max) total variation between ``real_cells`` and
    ``synth_cells`` (int arrays (n, d) and (m, d) of cell indices, each
    column i in 0..sizes[i]-1) over all C(d, k) k-way marginals."""
    real = np.asarray(real_cells, dtype=np.int64)
    synth = np.asarray(synth_cells, dtype=np.int64)
    d = len(sizes)
    if real.ndim != 2 or synth.ndim != 2 or real.shape[1] != d or synth.shape[1] != d:
        raise InputError("both tables need %d columns of cell indices" % d)
    if not 1 <= k <= d:
        raise InputError("k must be between 1 and the %d columns, got %r" % (d, k))
    for name, t in (("real", real), ("synthetic", synth)):
        if len(t) == 0:
            raise InputError("the %s table has no rows" % name)
        if t.min() < 0 or np.any(t.max(axis=0) >= np.asarray(sizes)):
            raise InputError("the %s table has a cell index outside its column's domain" % name)
    dists = [marginal_tv(real, synth, sizes, c) for c in itertools.combinations(range(d), k)]
    return float(np.mean(dists)), float(np.max(dists))


def table_report(real_cells, synth_cells, sizes, names):
    """JSON-ready table metrics of ``synth_cells`` against ``real_cells``
    (as tv takes them) over columns ``names``: for k = 2 and 3 (those up to
    the d columns) ``tv_<k>way`` = {"average", "max" (total variation, in
    [0, 1], lower is better), "marginals": C(d, k)}, with the row counts.
    InputError for fewer than 2 columns (no 2-way marginal)."""
    d = len(sizes)
    if d < 2:
        raise InputError("the schema has one column (%s): there is no 2-way marginal to score" % names[0])
    out = {"columns": list(names), "rows": {"real": int(len(real_cells)), "synthetic": int(len(synth_cells))}}
    for k in (2, 3):
        if k <= d:
            avg, top = tv(real_cells, synth_cells, sizes, k)
            out["tv_%dway" % k] = {"average": avg, "max": top, "marginals": math.comb(d, k)}
    return out
