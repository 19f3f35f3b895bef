"""Decoder of PHDStream's per-window payload (docs/mechanisms/phdstream.md,
"Wire map"): one msgpack map per step with the split bitmap of T(t) in
canonical BFS order, the int32 leaf increments, the public parameters and,
every ``snap``-th step, a snapshot of the device's union tree.

Only schema and internal consistency are checked here (lengths, bit
counts, parameter ranges: the limits the device's spec check enforces,
agent/phdstream/__init__.py, and every noise scale within agent/spec.py's
MAX_SCALE, so a frame no device could send is refused); rebuilding the tree
is mirror.py's job. In a
release frame the payload is one entry of the frame's ``mechs`` list
(PHDStreamState, the registry's State), alone in its frame.
"""
import hashlib
import math
from fractions import Fraction

import msgpack
import numpy as np

from edgesynth.agent.phdstream import MAX_EPS_DEN, MAX_INT_SPAN, MAX_NODES
from edgesynth.errors import SchemaError
from edgesynth.mechanisms.integers import INT32_SAFE
from edgesynth.noise import check_scale

VERSION = 1
KEYS = ("bits", "d", "kind", "nv", "p", "snap", "t", "v")
PARAM_KEYS = ("beta", "block", "counter", "delta", "depth", "eps", "fold", "hi", "horizon", "lam", "lo",
              "max_nodes", "names", "noise", "snap", "theta")
SNAP_KEYS = ("cn", "kids", "n")
FOLD_SNAP_KEYS = ("cn", "idle", "kids", "n", "off")  # with folding (p.fold > 0)
MAX_FOLD = 255
COUNTERS = ("simple", "block", "tree")
MAX_DEPTH = 28
MAX_CHANNELS = 8
MAX_NAME = 64  # characters of a channel name, as the device's spec check counts them (agent/spec.py)
# Objects of the largest legal entry (frames.MAX_OBJECTS): the map, its
# keys and values, p's keys and values with eps/lam's pairs and lo/hi/names
# of MAX_CHANNELS each, the snapshot's keys and values.
MAX_OBJECTS = 1 + 2 * len(KEYS) + 2 * len(PARAM_KEYS) + 2 * 2 + 3 * MAX_CHANNELS + 2 * len(FOLD_SNAP_KEYS)


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


def _names(names, d):
    """The d channel names: distinct strings of 1..64 characters without
    NUL (what agent/spec.py's names_field lets a device release)."""
    if not isinstance(names, list) or len(names) != d \
            or not all(isinstance(x, str) and 0 < len(x) <= MAX_NAME and "\x00" not in x for x in names) \
            or len(set(names)) != d:
        raise SchemaError("phdstream p.names must list %d distinct strings of 1..%d characters" % (d, MAX_NAME))
    return list(names)


class Params:
    """The public parameters of a payload's ``p`` (docs/mechanisms/phdstream.md,
    "Wire map"): ints, ``eps``/``lam`` (num, den) pairs, ``lo``/``hi``
    lists of ints, ``names`` the channels' column names, ``factor`` the relation's noise factor (1 add/remove, 2
    replace: every noise scale doubles, so lam = 6 factor / eps). Equal
    instances come from the same configuration."""

    def __init__(self, p, factor=1):
        _keys(p, PARAM_KEYS, "p")
        self.beta = _uint(p, "beta", 2, 2, "p.")
        self.depth = _uint(p, "depth", 1, MAX_DEPTH, "p.")
        self.delta = _uint(p, "delta", 0, 1 << 30, "p.")
        self.theta = _uint(p, "theta", 0, 0, "p.")  # the device's split threshold is 0
        self.max_nodes = _uint(p, "max_nodes", 3, MAX_NODES, "p.")  # a root and one pair at least
        self.snap = _uint(p, "snap", 1, 1 << 30, "p.")
        self.block = _uint(p, "block", 0, 1 << 16, "p.")
        self.horizon = _uint(p, "horizon", 0, 1 << 16, "p.")
        if self.block == 1 or self.horizon & (self.horizon - 1):
            raise SchemaError("phdstream p.block must be 0 or in [2, 65536] and p.horizon 0 or a power of 2")
        self.fold = _uint(p, "fold", 0, MAX_FOLD, "p.")
        self.eps = _ratio(p, "eps")
        if self.eps[0] > 100 * MAX_EPS_DEN or self.eps[1] > MAX_EPS_DEN:
            raise SchemaError("phdstream p.eps must be [num, den] with num <= %d and den <= %d"
                              % (100 * MAX_EPS_DEN, MAX_EPS_DEN))
        self.lam = _ratio(p, "lam")
        self.factor = factor
        # the split test's scale and bias are what PrivTree's proof needs for
        # eps_tree = eps / 2 at beta = 2: lam = 6 / eps (times the relation's
        # factor), delta >= lam ln 2
        if self.lam[0] * self.eps[0] != 6 * factor * self.lam[1] * self.eps[1] \
                or self.delta < self.lam[0] / self.lam[1] * math.log(2):
            raise SchemaError("phdstream p.lam must be %s/eps and p.delta at least lam ln 2" % (6 * factor))
        if p["counter"] not in COUNTERS:
            raise SchemaError("phdstream p.counter must be one of %s" % (COUNTERS,))
        self.counter = p["counter"]
        if (self.counter == "block") != (self.block > 0) or (self.counter == "tree") != (self.horizon > 0):
            raise SchemaError("phdstream p.block (p.horizon) is set iff the counter is block (tree)")
        # the scales the device checks (agent/phdstream/__init__.py): λ and
        # the counters' (1/ε_c simple, 2/ε_c block, (log2 T_h + 1)/ε_c tree
        # with ε_c = ε/2), each times the relation's factor
        check_scale("phdstream split test", self.lam[0], self.lam[1])
        per = {"simple": 1, "block": 2, "tree": self.horizon.bit_length()}[self.counter]
        check_scale("phdstream counter", 2 * per * factor * self.eps[1], self.eps[0])
        if p["noise"] != "dlap":
            raise SchemaError("phdstream p.noise must be 'dlap'")
        self.noise = p["noise"]
        lo, hi = p["lo"], p["hi"]
        if not isinstance(lo, list) or not isinstance(hi, list) or not 1 <= len(lo) == len(hi) <= MAX_CHANNELS \
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in lo + hi) \
                or not all(0 < b - a <= MAX_INT_SPAN for a, b in zip(lo, hi)) \
                or not all(INT32_SAFE[0] <= x <= INT32_SAFE[1] for x in lo + hi):  # the C core's (ccore.validate)
            raise SchemaError("phdstream p.lo/p.hi must be 1..%d integer pairs within [-(2**31 - 1), 2**31 - 2] "
                              "with 0 < hi - lo <= 2**29 - 1" % MAX_CHANNELS)
        self.lo, self.hi = list(lo), list(hi)
        # public parameters like the box: part of the configuration's id, so
        # streams of differently named channels never assemble together
        self.names = _names(p["names"], len(lo))

    def key(self):
        return (self.beta, self.depth, self.delta, self.theta, self.max_nodes, self.snap, self.block, self.horizon,
                self.fold, self.eps, self.lam, self.counter, self.noise, tuple(self.lo), tuple(self.hi),
                tuple(self.names), self.factor)

    def __eq__(self, other):
        return isinstance(other, Params) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())


# Params of recent configurations (a fleet sends one or a few): the windows
# assemble keeps share one instance (about a fifth of a kept window's
# memory). Cleared when full, so bounded whatever the input.
_PARAMS = {}
MAX_PARAMS = 256


def _interned(params):
    key = params.key()
    if key not in _PARAMS and len(_PARAMS) >= MAX_PARAMS:
        _PARAMS.clear()
    return _PARAMS.setdefault(key, params)


class Snapshot:
    """The union tree after a step: ``kids`` bool (n,), 1 = the node has
    children, ``cn`` int64 (n,), Cn of every node, and with folding (p.fold
    > 0) ``off`` int64 (n,), the folded mass Off, and ``idle`` int64 (n,),
    the leaf streaks (0..p.fold - 1), all in canonical BFS order of the
    union tree; without folding ``off`` and ``idle`` are zeros."""

    def __init__(self, m, params):
        _keys(m, FOLD_SNAP_KEYS if params.fold else SNAP_KEYS, "snap")
        self.n = _uint(m, "n", 1, params.max_nodes, "snap.")
        self.kids = _bitmap(m["kids"], self.n, "snap.kids")
        if not _is_tree(self.kids):
            raise SchemaError("phdstream snap.kids is not a complete binary tree in BFS order")
        self.cn = _int32s(m["cn"], self.n, "snap.cn")
        if params.fold:
            self.off = _int32s(m["off"], self.n, "snap.off")
            idle = m["idle"]
            if not isinstance(idle, bytes) or len(idle) != self.n:
                raise SchemaError("phdstream snap.idle must be %d bytes" % self.n)
            self.idle = np.frombuffer(idle, np.uint8).astype(np.int64)
            if np.any(self.idle >= params.fold):
                raise SchemaError("phdstream snap.idle holds a streak of p.fold or more")
        else:
            self.off = np.zeros(self.n, dtype=np.int64)
            self.idle = np.zeros(self.n, dtype=np.int64)


class Window:
    """One decoded payload: step ``t`` (1-based), ``params`` (Params),
    ``split`` bool (nv,) the split bits of T(t)'s visited nodes in
    canonical BFS order, ``y`` int64 (leaves,) the leaf increments in the
    same order, ``snap`` a Snapshot or None."""

    def __init__(self, m, factor=1):
        _keys(m, KEYS, "payload")
        if m["kind"] != "phdstream":
            raise SchemaError("phdstream payload kind is %r" % (m["kind"],))
        _uint(m, "v", VERSION, VERSION, "")
        self.t = _uint(m, "t", 1, (1 << 32) - 1, "")  # a step per window: epochs are uint32
        self.params = _interned(Params(m["p"], factor))
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


def decode(payload, factor=1):
    """Window of one payload (msgpack bytes, or the already-decoded map);
    ``factor`` the relation's noise factor (2 under replace). Raises
    SchemaError on anything the Wire map does not allow."""
    if isinstance(payload, (bytes, bytearray, memoryview)):
        try:
            payload = msgpack.unpackb(bytes(payload), raw=False, strict_map_key=True)
        except (ValueError, msgpack.exceptions.ExtraData, msgpack.exceptions.FormatError,
                msgpack.exceptions.StackError) as e:
            raise SchemaError("phdstream payload is not one msgpack map (%s)" % e)
    return Window(payload, factor)


class PHDStreamState:
    """A frame's phdstream entry (the registry's State): one decoded window
    of one device's stream. ``window`` (Window), ``params`` (Params),
    ``t`` its step, ``budget`` (num, den) the frame's epsilon once
    ``bind_budget`` has checked it. Windows of a stream are never summed
    (no ``accumulate``): the host replays them in order (stream.py)."""

    kind = "phdstream"
    stream = True  # merge.Merge keeps each window with its device and epoch

    @classmethod
    def from_payload(cls, m, factor):
        s = cls()
        s.window = Window(m, factor)
        s.params = s.window.params
        s.t = s.window.t
        s.budget = None
        return s

    def bind_budget(self, eps):
        """Check the frame's ``eps`` (num, den) against this entry, the only
        mechanism of its frame: the per-event p.eps when the deployment is
        rate-bound, else twice it (a full batch can swap a refused event for a
        displaced one; docs/mechanisms/phdstream.md,
        "Privacy argument", 4). SchemaError otherwise."""
        num, den = self.params.eps
        if eps[0] * den == num * eps[1]:
            self.budget = (num, den)
        elif eps[0] * den == 2 * num * eps[1]:
            self.budget = (2 * num, den)
        else:
            raise SchemaError("phdstream frame eps %d/%d is neither p.eps %d/%d (a rate bound) nor twice it"
                              % (eps[0], eps[1], num, den))

    @property
    def rate_bound(self):
        """Whether the budget is the per-event epsilon (True) or twice it."""
        return self.budget == self.params.eps

    def config_id(self):
        """Hex digest of the public parameters and the budget: windows of
        equal ids belong to streams of one configuration."""
        h = hashlib.sha256()
        for part in ("phdstream",) + self.params.key() + (self.budget,):
            h.update(repr(part).encode())
        return h.hexdigest()[:16]

    def describe(self):
        """JSON-ready summary for `inspect` (public values only)."""
        p = self.params
        return {"kind": "phdstream", "step": self.t, "names": list(p.names), "lo": list(p.lo), "hi": list(p.hi),
                "depth": p.depth, "counter": p.counter, "max_nodes": p.max_nodes, "snap_every": p.snap, "fold": p.fold,
                "epsilon": "%d/%d" % self.budget, "noise_epsilon": str(Fraction(*p.eps)),
                "visited": int(self.window.split.size), "leaves": self.window.leaves,
                "increments_sum": int(self.window.y.sum()), "snapshot": self.window.snap is not None,
                "config_id": self.config_id()}
