"""Vectorised ingestion into a PrivHP agent state, for fast simulation on a host.

``ingest(mech, data)`` has exactly the effect of calling ``mech.update(row)``
for every row: the same quantisation (binary long division in int64 for
integer channels with integral readings, float64 otherwise, both exact), the
same hashes, the same counters; tests compare the frames byte for byte. It
writes straight into the agent's ``array`` buffers through numpy views, one
``bincount`` per tree level and per sketch row.
"""
import numpy as np

from edgesynth.agent.errors import SEALED, SealedError
from edgesynth.agent.hashing import LIMB_BITS, LIMB_MASK
from edgesynth.agent.hashing import P as HASH_P

# rows per block: the ~10 live temporaries (128 KiB each) stay in L2; 1 << 16
# ran 25-35% slower (benchmarks/bench_speed.py)
BLOCK = 1 << 14


def _channel(col, lo, hi, span):
    """Remainders (x - lo, clamped) and the clamp mask for one channel."""
    integral = isinstance(lo, int) and isinstance(hi, int) and np.all(col == np.floor(col))
    above = col > hi
    inside = (col >= lo) & ~above
    if integral:
        rem = np.where(inside, col, lo).astype(np.int64) - lo
        rem[above] = span
    else:
        rem = np.where(inside, col - lo, 0.0)
        rem[above] = float(span)
    return rem, ~inside


def ingest(mech, data):
    """Add every row of ``data`` (n, d) to PrivHP state ``mech`` in place."""
    if mech.sealed:
        raise SealedError(SEALED)
    data = np.asarray(data, dtype=np.float64)
    if data.ndim != 2 or data.shape[1] != mech.d:
        raise ValueError("expected an (n, %d) array of readings" % mech.d)
    tree = [np.frombuffer(t, dtype=np.int32) for t in mech.tree_rows]    # views, one per level
    sk = [np.frombuffer(t, dtype=np.int32) for t in mech.sketch_rows]    # views, one per row
    for start in range(0, data.shape[0], BLOCK):
        _ingest_block(mech, data[start:start + BLOCK], tree, sk)


def _ingest_block(mech, block, tree, sk):
    n = block.shape[0]
    if n == 0:
        return
    rems, spans = [], []
    clamped = np.zeros(n, dtype=bool)
    for i in range(mech.d):
        rem, out = _channel(block[:, i], mech.lo[i], mech.hi[i], mech.span[i])
        rems.append(rem)
        spans.append(mech.span[i])
        clamped |= out
    if mech.clamp_p:
        mech.clamp += int(clamped.sum())
    # every path, node id and hash intermediate is below 2**30: int32 is exact
    v = np.zeros(n, dtype=np.int32)
    L, w, j = mech.L, mech.w, mech.j
    per = 8 if mech.sketch == "cs" else 4
    prm = np.asarray(mech.hash, dtype=np.int32).reshape(-1, j, per)
    rows = np.arange(j, dtype=np.int32)[:, None] * w
    for lvl in range(1, mech.r + 1):
        i = mech.coord[lvl]
        t = rems[i] + rems[i]                 # one long-division step per level
        bit = t >= spans[i]
        t -= bit * spans[i]
        rems[i] = t
        v += v
        v += bit
        if lvl == L:
            _add_tree(tree, L, np.bincount(v, minlength=1 << L))
        if lvl <= L:
            continue
        node = v + np.int32(1 << lvl)
        p = prm[lvl - L - 1]                                  # (j, 4 or 8)
        h = _hash(p[:, 0:4], node, lvl)
        h &= w - 1
        h += rows
        cell = h.ravel()                                      # row-major cells of this level
        if mech.sketch == "cs":
            g = _hash(p[:, 4:8], node, lvl)
            add = np.rint(np.bincount(cell, weights=(1 - 2 * (g & 1)).ravel(), minlength=j * w))
        else:
            add = np.bincount(cell, minlength=j * w)
        s = lvl - L - 1
        add = add.astype(np.int32).reshape(j, w)
        for row in range(j):
            sk[s * j + row] += add[row]
    if L == 0:
        tree[0][0] += n


def _add_tree(tree, L, counts):
    """Add level-L node counts and, summing pairs upward, every ancestor level."""
    for lvl in range(L, -1, -1):
        tree[lvl] += counts.astype(np.int32)
        if lvl:
            counts = counts.reshape(-1, 2).sum(axis=1)


def _hash(p, node, lvl):
    """agent.hashing.hash_id for all rows at once: (j, n) values in [0, P).

    Limbs that are zero for every node id of this level are skipped."""
    h = p[:, 1:2] * (node & LIMB_MASK)
    h += p[:, 0:1]
    if lvl >= LIMB_BITS:
        h += p[:, 2:3] * ((node >> LIMB_BITS) & LIMB_MASK)
    if lvl >= 2 * LIMB_BITS:
        h += p[:, 3:4] * (node >> (2 * LIMB_BITS))
    np.remainder(h, HASH_P, out=h)
    return h
