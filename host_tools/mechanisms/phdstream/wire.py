"""Decoder of PHDStream's per-window payload (docs/mechanisms/phdstream.md,
"Wire"): one msgpack map per step with the split bitmap of T(t) in
canonical BFS order, the int32 leaf increments, the public parameters and,
every ``snap``-th step, a snapshot of the device's union tree.

Only schema and internal consistency are checked here (lengths, bit
counts, parameter ranges); rebuilding the tree is mirror.py's job.
"""
import math

import msgpack
import numpy as np

from edgesynth.errors import SchemaError

VERSION = 1
KEYS = ("bits", "d", "kind", "nv", "p", "snap", "t", "v")
PARAM_KEYS = ("beta", "block", "counter", "delta", "depth", "eps", "hi", "horizon", "lam", "lo", "max_nodes",
              "noise", "snap", "theta")
SNAP_KEYS = ("cn", "kids", "n")
COUNTERS = ("simple", "block", "tree")
MAX_DEPTH = 28
MAX_CHANNELS = 8
MAX_SPAN = 1 << 29
# a node pool larger than this is not a device's (2**24 nodes of 32 bytes
# is 512 MiB); it bounds what a hostile frame can make the host allocate
MAX_NODES = 1 << 24


def _uint(m, key, lo, hi, where):
    v = m[key]
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise SchemaError("phdstream %s%s must be an integer in [%d, %d]" % (where, key, lo, hi))
    return v


def _keys(m, keys, where):
    if not isinstance(m, dict) or sorted(m) != list(keys):
        raise SchemaError("phdstream %s keys %s differ from %s"
                          % (where, sorted(m) if isinstance(m, dict) else type(m).__name__, list(keys)))


def _ratio(m, key):
    v = m[key]
    if not isinstance(v, list) or len(v) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in v) \
            or not (v[0] > 0 and v[1] > 0):
        raise SchemaError("phdstream p.%s must be [num, den] of positive integers" % key)
    return v[0], v[1]


def _bitmap(data, n, where):
    """bool (n,) from a bitmap: bit i is bit i & 7 (LSB first) of byte i >> 3;
    exactly ceil(n / 8) bytes with zero padding."""
    if not isinstance(data, bytes) or len(data) != (n + 7) // 8:
        raise SchemaError("phdstream %s must be %d bytes of bitmap" % (where, (n + 7) // 8))
    bits = np.unpackbits(np.frombuffer(data, np.uint8), bitorder="little")
    if bits[n:].any():
        raise SchemaError("phdstream %s has padding bits set" % where)
    return bits[:n].astype(bool)


def _int32s(data, n, where):
    if not isinstance(data, bytes) or len(data) != 4 * n:
        raise SchemaError("phdstream %s must be %d int32 (%d bytes)" % (where, n, 4 * n))
    return np.frombuffer(data, "<i4").astype(np.int64)


def _is_tree(bits):
    """Whether a canonical-BFS split bitmap describes a whole binary tree:
    every 1 adds two nodes to the queue, so the queue must never run dry
    before the last bit and hold exactly 1 + 2 * ones nodes."""
    ones = np.cumsum(bits)
    # before reading bit i, the queue has been given 1 + 2 * ones[i - 1] nodes
    given = 1 + 2 * np.concatenate([[0], ones[:-1]])
    return bool(bits.size) and not np.any(given <= np.arange(bits.size)) and 1 + 2 * int(ones[-1]) == bits.size


class Params:
    """The public parameters of a payload's ``p`` (docs/mechanisms/phdstream.md,
    "Parameters"): ints, ``eps``/``lam`` (num, den) pairs, ``lo``/``hi``
    lists of ints. Equal instances come from the same configuration."""

    def __init__(self, p):
        _keys(p, PARAM_KEYS, "p")
        self.beta = _uint(p, "beta", 2, 2, "p.")
        self.depth = _uint(p, "depth", 1, MAX_DEPTH, "p.")
        self.delta = _uint(p, "delta", 0, 1 << 30, "p.")
        self.theta = _uint(p, "theta", 0, 1 << 30, "p.")
        self.max_nodes = _uint(p, "max_nodes", 1, MAX_NODES, "p.")
        self.snap = _uint(p, "snap", 1, 1 << 30, "p.")
        self.block = _uint(p, "block", 0, 1 << 30, "p.")
        self.horizon = _uint(p, "horizon", 0, 1 << 30, "p.")
        self.eps = _ratio(p, "eps")
        self.lam = _ratio(p, "lam")
        # the split test's scale and bias are what PrivTree's proof needs for
        # eps_tree = eps / 2 at beta = 2: lam = 6 / eps, delta >= lam ln 2
        if self.lam[0] * self.eps[0] != 6 * self.lam[1] * self.eps[1] \
                or self.delta < self.lam[0] / self.lam[1] * math.log(2):
            raise SchemaError("phdstream p.lam must be 6/eps and p.delta at least lam ln 2")
        if p["counter"] not in COUNTERS:
            raise SchemaError("phdstream p.counter must be one of %s" % (COUNTERS,))
        self.counter = p["counter"]
        if (self.counter == "block") != (self.block > 0) or (self.counter == "tree") != (self.horizon > 0):
            raise SchemaError("phdstream p.block (p.horizon) is set iff the counter is block (tree)")
        if p["noise"] != "dlap":
            raise SchemaError("phdstream p.noise must be 'dlap'")
        self.noise = p["noise"]
        lo, hi = p["lo"], p["hi"]
        if not isinstance(lo, list) or not isinstance(hi, list) or not 1 <= len(lo) == len(hi) <= MAX_CHANNELS \
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in lo + hi) \
                or not all(0 < b - a <= MAX_SPAN for a, b in zip(lo, hi)):
            raise SchemaError("phdstream p.lo/p.hi must be 1..%d integer pairs with 0 < hi - lo <= 2**29"
                              % MAX_CHANNELS)
        self.lo, self.hi = list(lo), list(hi)

    def key(self):
        return (self.beta, self.depth, self.delta, self.theta, self.max_nodes, self.snap, self.block, self.horizon,
                self.eps, self.lam, self.counter, self.noise, tuple(self.lo), tuple(self.hi))

    def __eq__(self, other):
        return isinstance(other, Params) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())


class Snapshot:
    """The union tree after a step: ``kids`` bool (n,), 1 = the node has
    children, and ``cn`` int64 (n,), Cn of every node, both in canonical
    BFS order of the union tree."""

    def __init__(self, m, params):
        _keys(m, SNAP_KEYS, "snap")
        self.n = _uint(m, "n", 1, params.max_nodes, "snap.")
        self.kids = _bitmap(m["kids"], self.n, "snap.kids")
        if not _is_tree(self.kids):
            raise SchemaError("phdstream snap.kids is not a complete binary tree in BFS order")
        self.cn = _int32s(m["cn"], self.n, "snap.cn")


class Window:
    """One decoded payload: step ``t`` (1-based), ``params`` (Params),
    ``split`` bool (nv,) the split bits of T(t)'s visited nodes in
    canonical BFS order, ``y`` int64 (leaves,) the leaf increments in the
    same order, ``snap`` a Snapshot or None."""

    def __init__(self, m):
        _keys(m, KEYS, "payload")
        if m["kind"] != "phdstream":
            raise SchemaError("phdstream payload kind is %r" % (m["kind"],))
        _uint(m, "v", VERSION, VERSION, "")
        self.t = _uint(m, "t", 1, (1 << 63) - 1, "")
        self.params = Params(m["p"])
        nv = _uint(m, "nv", 1, self.params.max_nodes, "")  # T(t) lies in the pool
        self.split = _bitmap(m["bits"], nv, "bits")
        if not _is_tree(self.split):
            raise SchemaError("phdstream bits is not a complete binary tree in BFS order")
        self.y = _int32s(m["d"], nv - int(self.split.sum()), "d")
        self.snap = None if m["snap"] is None else Snapshot(m["snap"], self.params)

    @property
    def leaves(self):
        """Leaves of T(t)."""
        return self.y.size


def decode(payload):
    """Window of one payload (msgpack bytes, or the already-decoded map).
    Raises SchemaError on anything the Wire section does not allow."""
    if isinstance(payload, (bytes, bytearray, memoryview)):
        try:
            payload = msgpack.unpackb(bytes(payload), raw=False, strict_map_key=True)
        except (ValueError, msgpack.exceptions.ExtraData, msgpack.exceptions.FormatError,
                msgpack.exceptions.StackError) as e:
            raise SchemaError("phdstream payload is not one msgpack map (%s)" % e)
    return Window(payload)
