"""Vectorised ingestion into a marginals state (the numpy runtime): the effect
of the device's ``update`` per record, byte-identical frames
(tests/test_marginals_host.py)."""
import numpy as np


def cells(m, block):
    """The clamped cell indices (int64 (n, d)) of the records ``block``
    (n, d float64) as ``Marginals.update`` clamps them: an index in
    [0, sizes[c]) is floored, anything else (NaN included) is column c's
    "other" cell, sizes[c] - 1."""
    sizes = np.asarray(m.sizes, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        inside = (block >= 0) & (block < sizes)  # False for NaN
    return np.where(inside, np.floor(np.where(inside, block, 0)), sizes - 1).astype(np.int64)


def ingest(m, block):
    """Add every record of ``block`` (n, d cell indices) to the marginals
    state ``m``: one group total of every marginal per record."""
    c = cells(m, np.asarray(block, dtype=np.float64))
    for cols, groups, tab in zip(m.cols, m.groups, m.tabs):
        j = np.ravel_multi_index(tuple(c[:, i] for i in cols), [m.sizes[i] for i in cols])
        if groups is not None:
            j = np.frombuffer(groups, dtype=np.uint16)[j]
        view = np.frombuffer(tab, dtype=np.int32)
        view += np.bincount(j, minlength=len(view)).astype(np.int32)
