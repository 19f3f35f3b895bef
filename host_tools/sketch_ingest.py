"""Vectorised ingestion into CDF and profile device states, for fast
simulation (the ``numpy`` runtime): exactly the effect of calling the
mechanism's ``update`` per row, byte-identical frames (tests/test_cdf.py,
tests/test_profile.py). Rows whose binning the vector rule cannot reproduce
exactly (non-integral readings on integer bounds) go through ``update``."""
import numpy as np


def ingest_agent(a, block):
    """Every row of ``block`` (n, inputs) into every mechanism of ``agent.Agent``
    ``a``, each on the columns it reads (its route): the effect of ``a.update``
    per row."""
    for m, (_, cols, _) in zip(a.mechs, a._routes):
        # no route: the mechanism reads the first len(names) columns in order
        ingest_any(m, block[:, :len(m.names)] if cols is None else block[:, list(cols)])


def ingest_any(mech, block):
    """Add every row of ``block`` (n, channels of ``mech``) to ``mech``."""
    if mech.sealed:
        from agent.errors import SealedError
        raise SealedError("state was released; start a new epoch with fresh noise")
    block = np.asarray(block, dtype=np.float64)
    if mech.kind == "privhp":
        from host_tools.batch import ingest
        ingest(mech, block)
    elif mech.kind == "cdf":
        _cdf(mech, block)
    elif mech.kind == "profile":
        _profile(mech, block)
    else:
        raise ValueError("no vectorised ingestion for %r" % mech.kind)


def _cdf(m, block):
    K = m.K
    slow = np.zeros(len(block), dtype=bool)
    bins = []
    for c, (lo, hi, s, mode, _) in enumerate(m.chan):
        x = block[:, c]
        j = np.zeros(len(x), dtype=np.int64)
        j[x >= hi] = K - 1
        inside = (x > lo) & (x < hi)
        if mode:  # integer bounds: exact integer division for integral readings
            integral = x == np.floor(x)
            slow |= inside & ~integral
            ok = inside & integral
            j[ok] = (x[ok].astype(np.int64) - lo) * K // s
        else:
            j[inside] = np.minimum(((x[inside] - lo) * K / s).astype(np.int64), K - 1)
        bins.append(j)
    keep = ~slow
    for c in range(m.d):
        for tab, P in m.chan[c][4]:
            view = np.frombuffer(tab, dtype=np.int32)
            view += np.bincount(bins[c][keep] // P, minlength=len(view)).astype(np.int32)
    for row in block[slow]:
        m.update(tuple(float(v) for v in row))


def feistel(m, v):
    """The device's keyed permutation (agent/profile.py) on an int64 array."""
    h, mask = m.half, m.mask
    left, right = v >> h, v & mask
    for r in range(4):
        a, b = m.keys[2 * r], m.keys[2 * r + 1]
        left, right = right, left ^ ((a * right + b) % 32749 & mask)
    return (left << h) | right


def _profile(m, block):
    v = block[:, 0].astype(np.int64)
    if m.bits:
        v = feistel(m, v[(v >= 0) & (v < m.universe)])
    i = v - m.lo
    i = i[(i >= 0) & (i < m.n)]
    view = np.frombuffer(m.ctr, dtype=np.int32)
    counts = np.bincount(i, minlength=m.n)
    np.minimum(view.astype(np.int64) + counts, m.cap, out=counts)
    view[:] = counts
