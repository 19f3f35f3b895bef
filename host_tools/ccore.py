"""The C core (agent/c) seen from the host: where its files are and the
numbers it takes for a device config.

Shared by the native runtime (host_tools/runtimes/native.py, through cffi), the
qemu runtime (host_tools/runtimes/qemu.py) and the firmware build and config header
(host_tools/targets/firmware.py), which so need not import one another. A config is
parsed and validated by the Python agent's own code (``parse`` of
agent/<kind>/build.py, the kind and budget checks of agent/spec.py, the column
routes of agent/device.py): the C core takes exactly the configs the Python
agent takes.
"""
import numbers
import os
import struct

import numpy as np

from edgesynth import agent
from edgesynth.agent import device, wire
from edgesynth.agent.cdf import build as cdf_build
from edgesynth.agent.errors import ConfigError, ReadingError
from edgesynth.agent.marginals import build as marginals_build
from edgesynth.agent.marginals import release as marginals_release
from edgesynth.agent.phdstream import PHDStream
from edgesynth.agent.privhp import build as privhp_build
from edgesynth.agent.profile import build as profile_build
from edgesynth.agent.spec import check_budget, spec_kind
from edgesynth.agent.wire import MECHANISMS
from edgesynth.mechanisms.integers import EXACT_F64, INT32_MAX, INT32_MIN, INT32_SAFE


def includedir():
    """Directory holding es_core.h and the core's .c files (for firmware builds)."""
    return os.path.join(os.path.dirname(os.path.abspath(agent.__file__)), "c")


def _f64_bits(v):
    return struct.unpack("<Q", struct.pack("<d", float(v)))[0]


def is_int(v):
    """An integer (Python or numpy), not a bool."""
    return isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))


class _Fields:
    """The public fields of one mechanism spec, as its builder's ``parse`` sets them."""
    update = None  # agent.device.routes binds it; the C core updates instead


class _PHDFields(PHDStream):
    """A PHDStream's public fields, checked by its own constructor, without
    its arrays (the C core lays those out in its own memory)."""

    def _alloc(self, n):
        pass


def _parse(spec, i, factor):
    m = _Fields()
    m.kind = spec_kind(spec, i, MECHANISMS)
    if m.kind == "phdstream":
        return _PHDFields(spec, factor)
    if m.kind == "privhp":
        privhp_build.parse(m, spec)
    elif m.kind == "cdf":
        cdf_build.parse(m, spec, factor)
    elif m.kind == "marginals":
        marginals_build.parse(m, spec, factor)
    else:
        profile_build.parse(m, spec, factor)
    return m


def validate(cfg):
    """The Python agent's checks, without building it: returns (list of parsed
    mechanism fields, relation factor, (eps num, den), the reading's column
    names, per mechanism the indices of the columns it reads).

    Raises ConfigError like ``agent.Agent``; integer bounds the C core cannot
    hold exactly (2**53 and beyond) get a clear one too.
    """
    if not isinstance(cfg, dict) or cfg.get("format") != wire.FORMAT:
        raise ConfigError("config format must be %d" % wire.FORMAT)
    eps = device.ratio(cfg.get("epsilon"), "epsilon")
    relation = cfg.get("relation", "add-remove")
    if relation not in wire.RELATIONS:
        raise ConfigError("relation must be 'add-remove' or 'replace', got %r" % (relation,))
    factor = wire.RELATIONS[relation]
    specs = cfg.get("mechanisms")
    if not isinstance(specs, list) or not 1 <= len(specs) <= wire.MAX_MECHANISMS:
        raise ConfigError("config needs a list of 1..%d mechanisms" % wire.MAX_MECHANISMS)
    mechs = [_parse(spec, i, factor) for i, spec in enumerate(specs)]
    if len(mechs) > 1 and any(m.kind == "phdstream" for m in mechs):  # agent/device.py's rule
        raise ConfigError("a phdstream mechanism runs alone: its config holds no other mechanism")
    for m in mechs:
        for v in (m.lo + m.hi if m.kind in ("privhp", "cdf", "phdstream") else []):
            if is_int(v) and abs(v) >= EXACT_F64:
                raise ConfigError("the native core needs integer bounds below 2**53 in magnitude, got %d" % v)
            if m.kind == "phdstream" and not INT32_SAFE[0] <= v <= INT32_SAFE[1]:
                raise ConfigError("the native core needs phdstream bounds within int32, got %d" % v)
    check_budget(eps, [device.mechanism_class(m.kind).budget(m) for m in mechs])
    inputs, routes = device.routes(cfg, mechs)
    cols = [list(c) if c is not None else list(range(len(m.names))) for m, (_, c, _) in zip(mechs, routes)]
    return mechs, factor, eps, inputs, cols


def _bounds(m):
    """Bound fields of a privhp or cdf C config. ``int_path``: every channel
    has integer bounds in int32, so integer readings take the int32 update.
    int_mask marks the channels with integer bounds (integer channels): the
    cdf bins them exactly, and the frame carries their bounds as ints."""
    ints = [is_int(a) and is_int(b) for a, b in zip(m.lo, m.hi)]
    int_path = all(i and INT32_SAFE[0] <= a and b <= INT32_SAFE[1] for i, a, b in zip(ints, m.lo, m.hi))
    return int_path, [
        ("int_mask", "uint16_t", sum(1 << i for i in range(m.d) if ints[i])),
        ("lo_i", "int32_t[]", list(m.lo) if int_path else None),
        ("hi_i", "int32_t[]", list(m.hi) if int_path else None),
        ("lo_f", "double[]", [float(v) for v in m.lo]),
        ("hi_f", "double[]", [float(v) for v in m.hi]),
        ("lo_bits", "f64bits[]", [_f64_bits(v) for v in m.lo]),
        ("hi_bits", "f64bits[]", [_f64_bits(v) for v in m.hi]),
        ("names", "names", list(m.name_bytes))]


def _privhp(m):
    int_path, bounds = _bounds(m)
    counters = (1 << (m.L + 1)) - 1 + (m.r - m.L) * m.j * m.w
    params = (m.r - m.L) * m.j * (8 if m.sketch == "cs" else 4)
    seed = m.hash_seed.encode()
    fields = [("d", "uint8_t", m.d), ("r", "uint8_t", m.r), ("j", "uint8_t", m.j),
              ("sketch", "uint8_t", 1 if m.sketch == "cs" else 0), ("k", "uint32_t", m.k),
              ("w", "uint32_t", m.w), ("q", "uint64_t", m.q), ("clamp_p", "uint64_t", m.clamp_p),
              ("sigma", "uint64_t[]", list(m.sigma))] + bounds + [
        ("hash_seed", "bytes", seed), ("hash_seed_len", "uint16_t", len(seed))]
    # es_privhp_mem_size: int32 counters, then uint16 hash parameters padded to 4 bytes
    return int_path, 4 * counters + ((2 * params + 3) & ~3), fields


def _cdf(m):
    int_path, bounds = _bounds(m)
    fields = [("d", "uint8_t", m.d), ("m", "uint8_t", len(m.branching)), ("K", "uint32_t", m.K),
              ("branching", "uint32_t[]", list(m.branching)), ("q", "uint64_t", m.q),
              ("sigma", "uint64_t[]", list(m.sigma))] + bounds
    return int_path, 4 * m.d * sum(m.widths), fields


def _profile(m):
    seed = m.sample_seed.encode() if m.bits else b""   # C derives the Feistel keys from it
    fields = [("lo", "uint32_t", m.lo), ("hi", "uint32_t", m.hi), ("cap", "uint32_t", m.cap),
              ("p", "uint64_t", m.p), ("q", "uint64_t", m.q), ("bits", "uint8_t", m.bits),
              ("seed", "bytes", seed or None), ("seed_len", "uint16_t", len(seed)),
              ("names", "names", list(m.name_bytes))]
    return True, 4 * m.n, fields


def _phdstream(m):
    n, batch = m.max_nodes, m.batch_max
    per_node = 3 + {"simple": 0, "block": 4, "tree": 1 + 2 * getattr(m, "levels", 0)}[m.counter] + (m.fold > 0)
    fields = [("d", "uint8_t", m.d), ("depth", "uint8_t", m.depth),
              ("counter", "uint8_t", ("simple", "block", "tree").index(m.counter)), ("fold", "uint8_t", m.fold),
              ("block", "uint32_t", m.block), ("horizon", "uint32_t", m.horizon),
              ("max_nodes", "uint32_t", n), ("batch_max", "uint32_t", batch), ("snap", "uint32_t", m.snap_every),
              ("eps_num", "uint64_t", m.eps_num), ("eps_den", "uint64_t", m.eps_den),
              ("lo", "int32_t[]", list(m.lo)), ("hi", "int32_t[]", list(m.hi)),
              ("names", "names", [s.encode() for s in m.names[:m.d]])]  # the channels' (m.names ends with the op)
    # es_phdstream_mem_size: int32 pool (Off with folding), counters, queue (6),
    # leaf increments and batch codes; then batch signs, two bitmaps and the
    # fold streaks, padded to 4 bytes
    tail = batch + 2 * ((n + 7) >> 3) + (n if m.fold else 0)
    return True, 4 * (n * (per_node + 7) + batch) + ((tail + 3) & ~3), fields


def _marginals(m):
    """A marginals C config: marginal w's columns in 3 slots (cols[3w..]),
    ngroups[w] 0 for an ungrouped marginal, the grouped ones' cell -> group
    maps concatenated, and the schema pre-encoded exactly as the Python agent
    writes it into the frame (the C core writes these bytes raw)."""
    schema = marginals_release.schema_bytes(m.schema)
    maps = [g for g in m.groups if g is not None]
    fields = [("d", "uint8_t", m.d), ("n", "uint16_t", len(m.cols)), ("sizes", "uint16_t[]", list(m.sizes)),
              ("way", "uint8_t[]", [len(c) for c in m.cols]),
              ("cols", "uint8_t[]", [c[k] if k < len(c) else 0 for c in m.cols for k in range(3)]),
              ("ngroups", "uint32_t[]", [0 if g is None else n for g, n in zip(m.groups, m.ngroups)]),
              ("groups", "uint16_t[]", np.concatenate(maps).tolist() if maps else None),
              ("q", "uint64_t", m.q), ("sigma", "uint64_t[]", list(m.sigma)),
              ("schema", "bytes", schema), ("schema_len", "uint32_t", len(schema))]
    return True, 4 * sum(m.ngroups), fields


PARAMS = {"privhp": _privhp, "cdf": _cdf, "profile": _profile, "phdstream": _phdstream, "marginals": _marginals}


def _float_bounds(m):
    """(lo, hi) per column as the float paths compare readings with them:
    a marginals column's cells are [0, size); none for profile and phdstream."""
    if m.kind == "marginals":
        return [0] * m.d, list(m.sizes)
    if m.kind in ("profile", "phdstream"):
        return [], []
    return list(m.lo), list(m.hi)


def core_params(cfg):
    """The numbers the C core takes, from a config the Python agent's checks
    accept: shared by the cffi binding and the firmware config header
    (host_tools/targets/firmware.py) alike.

    Returns {"factor", "eps", "inputs" (a reading's column names), "mechs": [{"kind",
    "cols" (reading columns it reads, in its channel order; for phdstream the
    channels then the op), "d" (values per reading it takes), "int_path"
    (integer readings take its int32 update; phdstream takes integers only),
    "mem_bytes" (es_<kind>_mem_size), "fields": [(C field, C type, value), ...]
    in the C struct's order, "bounds": (lo, hi) as the float paths need them,
    empty for profile and phdstream, [0, size) per marginals column}],
    "continual" (a phdstream config)}.
    """
    mechs, factor, eps, inputs, cols = validate(cfg)
    out = []
    for m, c in zip(mechs, cols):
        int_path, mem, fields = PARAMS[m.kind](m)
        out.append({"kind": m.kind, "cols": c, "d": len(c), "int_path": int_path, "mem_bytes": mem,
                    "fields": fields, "bounds": _float_bounds(m)})
    return {"factor": factor, "eps": eps, "inputs": inputs, "mechs": out,
            "mem_bytes": sum(p["mem_bytes"] for p in out), "continual": mechs[0].kind == "phdstream"}


def core_events(rows, names=None):
    """PHDStream events ``rows`` (n, channels + op) as the int32 array every
    runtime takes (the C core's update, the MicroPython port's int64 records,
    the Python agent's ints): each channel value an integer within int32, the
    op exactly 1 (insert) or -1 (delete). ``rows``: a numeric array, or an
    object array of Python values (a bool is not an integer there). ``names``
    (optional, n ints): the rows' numbers in messages (default 0..n-1).
    Raises ReadingError (a ValueError) naming the first bad row, before
    anything is counted."""
    x = np.asarray(rows)
    if x.ndim != 2 or x.shape[1] < 2:
        raise ReadingError("phdstream events are rows of channels then the op, got shape %s" % (x.shape,))
    if x.dtype.kind == "O":
        ok, v = _object_cells(x)
    elif x.dtype.kind in "iuf":
        with np.errstate(invalid="ignore"):
            ok = (x >= INT32_MIN) & (x <= INT32_MAX) & (x == np.floor(x) if x.dtype.kind == "f" else True)
        v = np.where(ok, x, 0).astype(np.int64)
    else:
        raise ReadingError("phdstream events must be integers, got %s values" % x.dtype)
    ok[:, -1] &= (v[:, -1] == 1) | (v[:, -1] == -1)
    bad = np.argwhere(~ok)
    if bad.size:
        r, c = bad[0]
        at, cell = "reading %d" % (r if names is None else names[r]), x[r, c]
        cell = cell.item() if isinstance(cell, np.generic) else cell
        if c == x.shape[1] - 1:
            raise ReadingError("%s: op %r is not +1/-1 (insert/delete)" % (at, cell))
        raise ReadingError("%s: phdstream channel %d must be an integer in [-2**31, 2**31 - 1], got %r"
                           % (at, c, cell))
    return np.ascontiguousarray(v, dtype=np.int32)


def _object_cells(x):
    """(ok, int64 values) of an object array: ok where a cell is an int (not
    a bool) or an integral float, within int32."""
    ok, v = np.zeros(x.shape, bool), np.zeros(x.shape, np.int64)
    for at, c in np.ndenumerate(x):
        if (is_int(c) or (isinstance(c, (float, np.floating)) and float(c).is_integer())) \
                and INT32_MIN <= c <= INT32_MAX:
            ok[at], v[at] = True, int(c)
    return ok, v


def core_readings(data, int_path):
    """("i32", int32 rows) when the integer path applies (integer bounds,
    integral readings; values outside int32 clip, which keeps their cell since
    the bounds sit inside INT32_SAFE), else ("f64", float64 rows)."""
    data = np.asarray(data)
    if int_path:
        ints = data if data.dtype.kind in "iu" else None
        if ints is None and data.dtype.kind == "f" and np.all(np.abs(data) < 2 ** 53) \
                and np.all(data == np.floor(data)):
            ints = data.astype(np.int64)
        if ints is not None:
            return "i32", np.ascontiguousarray(np.clip(ints, INT32_MIN, INT32_MAX), dtype=np.int32)
    return "f64", np.ascontiguousarray(data, dtype=np.float64)
