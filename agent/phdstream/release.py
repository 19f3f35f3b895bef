"""The PHDStream per-window payload (docs/mechanisms/phdstream.md, "Wire map").

One msgpack map per step, keys sorted: the split bitmap over T(t)'s visited
nodes in canonical BFS order, the leaf increments, the public parameters and,
every ``snap``-th step and at step 1, the union tree's snapshot.
"""
from ..msgpack_out import key

VERSION = 1
BETA = 2
NAMES = ("beta", "bits", "block", "cn", "counter", "d", "delta", "depth", "eps", "fold", "hi", "horizon", "idle",
         "kids", "kind", "lam", "lo", "max_nodes", "n", "names", "noise", "nv", "off", "p", "snap", "t", "theta",
         "v")
_K = None


def keys():
    """The encoded key strings, built once (so that a release allocates little)."""
    global _K
    if _K is None:
        K = {}
        for name in NAMES:
            K[name] = key(name)
        _K = K
    return _K


def snapshot_due(m):
    """Whether the payload of the last step carries a full snapshot."""
    return m.t == 1 or m.t % m.snap_every == 0


def encode(m, enc):
    """Write the last step's payload of PHDStream ``m`` to ``enc``."""
    K = keys()
    enc.map(8)
    enc.raw(K["bits"])
    nbytes = (m.nv + 7) >> 3
    enc.bin_head(nbytes)
    enc.raw(memoryview(m.bits)[:nbytes])
    enc.raw(K["d"])
    enc.packed((memoryview(m.ys)[:m.nl],), "<i", 4)
    enc.raw(K["kind"])
    enc.str(b"phdstream")
    enc.raw(K["nv"])
    enc.uint(m.nv)
    enc.raw(K["p"])
    _params(m, enc, K)
    enc.raw(K["snap"])
    if snapshot_due(m):
        _snapshot(m, enc, K)
    else:
        enc.nil()
    enc.raw(K["t"])
    enc.uint(m.t)
    enc.raw(K["v"])
    enc.uint(VERSION)


def _params(m, enc, K):
    enc.map(16)
    enc.raw(K["beta"])
    enc.uint(BETA)
    enc.raw(K["block"])
    enc.uint(m.block)
    enc.raw(K["counter"])
    enc.str(m.counter.encode())
    enc.raw(K["delta"])
    enc.uint(m.delta)
    enc.raw(K["depth"])
    enc.uint(m.depth)
    enc.raw(K["eps"])
    _ratio(enc, m.eps_num, m.eps_den)
    enc.raw(K["fold"])
    enc.uint(m.fold)
    enc.raw(K["hi"])
    _ints(enc, m.d, m.hi)
    enc.raw(K["horizon"])
    enc.uint(m.horizon)
    enc.raw(K["lam"])
    _ratio(enc, m.lam_num, m.lam_den)
    enc.raw(K["lo"])
    _ints(enc, m.d, m.lo)
    enc.raw(K["max_nodes"])
    enc.uint(m.max_nodes)
    enc.raw(K["names"])  # the channels' columns, not the op's (the last of m.names)
    enc.array(m.d)
    for i in range(m.d):
        enc.str(m.names[i].encode())
    enc.raw(K["noise"])
    enc.str(b"dlap")
    enc.raw(K["snap"])
    enc.uint(m.snap_every)
    enc.raw(K["theta"])
    enc.uint(m.theta)


def _ratio(enc, num, den):
    """A rational parameter: the array [num, den]."""
    enc.array(2)
    enc.uint(num)
    enc.uint(den)


def _ints(enc, n, values):
    """A corner of the box: an array of its n ints."""
    enc.array(n)
    for v in values:
        enc.int(v)


def _snapshot(m, enc, K):
    """The union tree in canonical BFS order: kids bitmap and Cn, and with
    folding Off and the leaf streaks (what the host's fold rule reads next).
    Reuses the step's queue arrays (the step's release is in bits and ys)."""
    qn = m.q_node
    order_cn = m.q_lo
    order_off = m.q_hi
    order_idle = m.q_ca
    off = m.off
    idle = m.idle
    kbits = m.kbits
    kid = m.kid
    cn = m.cn
    for i in range(len(kbits)):
        kbits[i] = 0
    qn[0] = 0
    tail = 1
    head = 0
    while head < tail:
        v = qn[head]
        order_cn[head] = cn[v]
        if off is not None:
            order_off[head] = off[v]
            order_idle[head] = idle[v]
        c = kid[v]
        if c:
            kbits[head >> 3] |= 1 << (head & 7)
            qn[tail] = c
            qn[tail + 1] = c + 1
            tail += 2
        head += 1
    enc.map(3 if off is None else 5)
    enc.raw(K["cn"])
    enc.packed((memoryview(order_cn)[:tail],), "<i", 4)
    if off is not None:
        enc.raw(K["idle"])
        enc.packed((memoryview(order_idle)[:tail],), "<B", 1)
    enc.raw(K["kids"])
    nbytes = (tail + 7) >> 3
    enc.bin_head(nbytes)
    enc.raw(memoryview(kbits)[:nbytes])
    enc.raw(K["n"])
    enc.uint(tail)
    if off is not None:
        enc.raw(K["off"])
        enc.packed((memoryview(order_off)[:tail],), "<i", 4)
