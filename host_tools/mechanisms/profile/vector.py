"""Vectorised ingestion into a profile sketch (the numpy runtime): the effect of
the device's ``update`` per id, byte-identical frames (tests/test_profile.py)."""
import numpy as np


def feistel(m, v):
    """The device's keyed permutation (agent/profile/__init__.py) on an int64 array."""
    h, mask = m.half, m.mask
    left, right = v >> h, v & mask
    for r in range(4):
        a, b = m.keys[2 * r], m.keys[2 * r + 1]
        left, right = right, left ^ ((a * right + b) % 32749 & mask)
    return (left << h) | right


def ingest(m, block):
    """Add every id of ``block`` (n, 1) to the profile state ``m``."""
    v = block[:, 0].astype(np.int64)
    if m.bits:
        v = feistel(m, v[(v >= 0) & (v < m.universe)])
    i = v - m.lo
    i = i[(i >= 0) & (i < m.n)]
    view = np.frombuffer(m.ctr, dtype=np.int32)
    counts = np.bincount(i, minlength=m.n)
    np.minimum(view.astype(np.int64) + counts, m.cap, out=counts)
    view[:] = counts
