"""The native runtime: the agent's C core (agent/c) through cffi, batch calls.

    a = NativeAgent(cfg, seed=b"...", device_id="dev", key=None)
    a.update((412, 1977))           # one reading
    a.update_rows(array)            # (n, d) numpy array: one C call for all rows
    frame = a.release()             # bytes, identical to agent.Agent's

The config is parsed and validated by the Python agent's own code
(agent/privhp_build.py, agent/device.py), then its numbers are handed to C;
the noise, hashes, update and frame are the C core's. Integer readings on
integer bounds take the integer quantiser (es_quant_i32.c); anything else takes
es_quant_f64.c, which repeats the Python agent's float operations exactly.

Where the extension was not built (no C compiler at install), ``NativeAgent``
is the Python agent plus host_tools/batch.py, with a visible warning: same
bytes, slower. ``includedir()`` gives firmware builds the C headers and sources.
"""
import os
import struct
import warnings

import numpy as np

from agent.errors import ConfigError, SealedError

try:
    from host_tools._es_native import ffi, lib
except ImportError:  # not built: pure-Python fallback below
    ffi = lib = None

ES_OK, ES_E_CONFIG, ES_E_MEMORY, ES_E_SEALED, ES_E_FULL, ES_E_ENTROPY, ES_E_RANGE = 0, -1, -2, -3, -4, -5, -6
INT32_SAFE = (-(1 << 31) + 1, (1 << 31) - 2)  # int bounds the i32 path takes (readings clip outside)
EXACT_F64 = 1 << 53                            # integer bounds exact as doubles
FALLBACK_WARNING = ("edgesynth: the native core (host_tools._es_native) is not built, probably no C "
                    "compiler at install; the native runtime falls back to the Python agent (same "
                    "frames, slower). Reinstall with a compiler: pip install -e .")


def includedir():
    """Directory holding es_core.h and the core's .c files (for firmware builds)."""
    import agent
    return os.path.join(os.path.dirname(os.path.abspath(agent.__file__)), "c")


def available():
    """True when the compiled core is importable."""
    return lib is not None


def _check(status, what):
    if status == ES_OK:
        return
    if status == ES_E_SEALED:
        raise SealedError("state was released; start a new epoch with fresh noise")
    if status == ES_E_FULL:
        raise OverflowError("%s: 2**31 - 2**29 readings counted; int32 counters could overflow" % what)
    if status == ES_E_RANGE:
        raise ConfigError("%s: noise draw out of range" % what)
    if status == ES_E_ENTROPY:
        raise ConfigError("%s: the DRBG refused (entropy or reseed interval)" % what)
    if status == ES_E_CONFIG and what == "noise":
        raise ConfigError("a noise scale j*q/p exceeds 2**22: some budget share is too small")
    raise ConfigError("%s failed with status %d" % (what, status))


def _f64_bits(v):
    return struct.unpack("<Q", struct.pack("<d", float(v)))[0]


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def validate(cfg):
    """The Python agent's checks, without building it: returns
    (privhp fields object, relation factor, (eps num, den)).

    Raises ConfigError like ``agent.Agent``; configs the C core cannot take
    (several mechanisms, integer bounds beyond 2**53) get a clear one too.
    """
    from agent import device
    from agent.privhp_build import parse
    if not isinstance(cfg, dict) or cfg.get("format") != device.FORMAT:
        raise ConfigError("config format must be %d" % device.FORMAT)
    eps = device.ratio(cfg.get("epsilon"), "epsilon")
    relation = cfg.get("relation", "add-remove")
    if relation not in device.RELATIONS:
        raise ConfigError("relation must be 'add-remove' or 'replace', got %r" % (relation,))
    specs = cfg.get("mechanisms")
    if not isinstance(specs, list) or len(specs) != 1 or not isinstance(specs[0], dict) \
            or specs[0].get("kind") != "privhp":
        raise ConfigError("the native core runs configs with exactly one privhp mechanism")

    class Fields:
        pass
    m = Fields()
    parse(m, specs[0])
    for v in m.lo + m.hi:
        if _is_int(v) and abs(v) >= EXACT_F64:
            raise ConfigError("the native core needs integer bounds below 2**53 in magnitude, got %d" % v)
    budget = m.clamp_p + sum(m.sigma)
    if budget * eps[1] != eps[0] * m.q:
        raise ConfigError("mechanism budgets add up to %d/%d, not epsilon %d/%d"
                          % (budget, m.q, eps[0], eps[1]))
    return m, device.RELATIONS[relation], eps


def core_params(cfg):
    """The numbers the C core takes (es_privhp_cfg_t and es_agent_init), from a
    config the Python agent's checks accept: shared by the cffi binding and the
    firmware config header (host_tools/firmware.py)."""
    m, factor, eps = validate(cfg)
    ints = [_is_int(a) and _is_int(b) and INT32_SAFE[0] <= a and b <= INT32_SAFE[1]
            for a, b in zip(m.lo, m.hi)]
    return {"d": m.d, "r": m.r, "j": m.j, "sketch": 1 if m.sketch == "cs" else 0, "k": m.k, "w": m.w,
            "q": m.q, "clamp_p": m.clamp_p, "sigma": list(m.sigma), "L": m.L,
            "int_mask": sum(1 << i for i in range(m.d) if ints[i]), "int_path": all(ints),
            "lo": list(m.lo), "hi": list(m.hi), "lo_f": [float(v) for v in m.lo],
            "hi_f": [float(v) for v in m.hi], "lo_bits": [_f64_bits(v) for v in m.lo],
            "hi_bits": [_f64_bits(v) for v in m.hi], "names": list(m.name_bytes),
            "hash_seed": m.hash_seed.encode(), "factor": factor, "eps": eps,
            "mem_bytes": mem_bytes(m)}


def mem_bytes(m):
    """es_privhp_mem_size: int32 counters, then uint16 hash parameters padded to 4 bytes."""
    counters = (1 << (m.L + 1)) - 1 + (m.r - m.L) * m.j * m.w
    params = (m.r - m.L) * m.j * (8 if m.sketch == "cs" else 4)
    return 4 * counters + ((2 * params + 3) & ~3)


def device_bytes(device_id):
    from agent.device import _device_id
    return _device_id(device_id)


def core_readings(data, int_path):
    """("i32", int32 rows) when the integer quantiser applies (integer bounds,
    integral readings; values outside int32 clip, which keeps their cell since
    the bounds sit inside INT32_SAFE), else ("f64", float64 rows)."""
    data = np.asarray(data)
    if int_path:
        ints = data if data.dtype.kind in "iu" else None
        if ints is None and data.dtype.kind == "f" and np.all(np.abs(data) < 2 ** 53) \
                and np.all(data == np.floor(data)):
            ints = data.astype(np.int64)
        if ints is not None:
            return "i32", np.ascontiguousarray(np.clip(ints, -(1 << 31), (1 << 31) - 1), dtype=np.int32)
    return "f64", np.ascontiguousarray(data, dtype=np.float64)


class NativeAgent:
    """The C core holding one PrivHP state; the API of ``agent.Agent``."""

    def __new__(cls, *args, **kw):
        if lib is None:
            warnings.warn(FALLBACK_WARNING, RuntimeWarning, stacklevel=2)
            return FallbackAgent(*args, **kw)
        return super().__new__(cls)

    def __init__(self, cfg, seed=None, device_id="device", epoch=0, seq=0, key=None):
        p = core_params(cfg)
        dev = device_bytes(device_id)
        for name, v in (("epoch", epoch), ("seq", seq)):
            if not _is_int(v) or not 0 <= v < 1 << 32:
                raise ConfigError("%s must be an integer in [0, 2**32), got %r" % (name, v))
        self.d = p["d"]
        self.int_path = p["int_path"]
        factor = p["factor"]
        eps = p["eps"]
        keep = self._keep = []  # cffi objects the C structs point into

        def new(ctype, init):
            obj = ffi.new(ctype, init)
            keep.append(obj)
            return obj
        c = self._cfg = new("es_privhp_cfg_t *", None)
        for f in ("d", "r", "j", "sketch", "k", "w", "q", "clamp_p", "int_mask"):
            setattr(c, f, p[f])
        c.sigma = new("uint64_t[]", p["sigma"])
        if self.int_path:
            c.lo_i = new("int32_t[]", p["lo"])
            c.hi_i = new("int32_t[]", p["hi"])
        c.lo_f = new("double[]", p["lo_f"])
        c.hi_f = new("double[]", p["hi_f"])
        c.lo_bits = new("uint64_t[]", p["lo_bits"])
        c.hi_bits = new("uint64_t[]", p["hi_bits"])
        c.names = new("char *[]", [new("char[]", b) for b in p["names"]])
        c.hash_seed = new("uint8_t[]", p["hash_seed"])
        c.hash_seed_len = len(p["hash_seed"])
        size = lib.es_privhp_mem_size(c)
        if size != p["mem_bytes"]:
            raise ConfigError("the native core rejected the privhp parameters")
        self._mem = new("uint32_t[]", (size + 3) // 4)
        st = self._state = new("es_privhp_t *", None)
        _check(lib.es_privhp_init(st, c, factor, self._mem, size), "privhp init")
        rng = ffi.new("es_drbg_t *")
        if seed is None:
            from firmware_shims.entropy import gather
            entropy, nonce = gather()
            _check(lib.es_drbg_init(rng, entropy, len(entropy), nonce, len(nonce)), "DRBG")
        else:
            seed_b = seed.encode() if isinstance(seed, str) else bytes(seed)
            _check(lib.es_drbg_seeded(rng, seed_b, len(seed_b)), "DRBG")
        self._id = new("uint8_t[]", dev)
        mechs = new("es_privhp_t *[]", [st])
        a = self._agent = new("es_agent_t *", None)
        key_b = None if key is None else bytes(key)
        _check(lib.es_agent_init(a, mechs, 1, factor, eps[0], eps[1], self._id, len(dev), epoch, seq,
                                 key_b if key_b is not None else ffi.NULL,
                                 0 if key_b is None else len(key_b), rng), "noise")
        self._scratch = ffi.new("double[]", self.d)

    @property
    def sealed(self):
        return bool(self._agent.sealed)

    def update(self, x):
        """Count one reading (a sequence of d numbers)."""
        if self.int_path and all(_is_int(v) for v in x):
            buf = ffi.new("int32_t[]", [min(max(v, -(1 << 31)), (1 << 31) - 1) for v in x])
            _check(lib.es_privhp_update_i32(self._state, buf), "update")
            return
        s = self._scratch
        for i in range(self.d):
            s[i] = float(x[i])  # ints beyond 2**53 round but stay outside the box: same cell
        _check(lib.es_privhp_update_f64(self._state, s), "update")

    def update_rows(self, data):
        """Count every row of ``data`` (n, d): one C call. Integer arrays (or
        float arrays holding integers) on integer bounds take the integer path."""
        data = np.asarray(data)
        if data.ndim != 2 or data.shape[1] != self.d:
            raise ValueError("expected an (n, %d) array of readings" % self.d)
        kind, x = core_readings(data, self.int_path)
        if kind == "i32":
            st = lib.es_privhp_update_i32_rows(self._state, ffi.from_buffer("int32_t[]", x), len(x))
        else:
            st = lib.es_privhp_update_f64_rows(self._state, ffi.from_buffer("double[]", x), len(x))
        _check(st, "update")

    def release(self):
        """Seal the state and return the frame bytes (repeatable, identical)."""
        size = lib.es_agent_frame_size(self._agent)
        out = ffi.new("uint8_t[]", size)
        n = lib.es_agent_release_buf(self._agent, out, size)
        _check(0 if n == size else (n if n < 0 else ES_E_MEMORY), "release")
        return bytes(ffi.buffer(out, n))


class FallbackAgent:
    """The Python agent behind NativeAgent's API, where the core is not built."""

    def __init__(self, cfg, seed=None, device_id="device", epoch=0, seq=0, key=None):
        import agent
        self._a = agent.Agent(cfg, seed=seed, device_id=device_id, epoch=epoch, seq=seq, key=key)

    @property
    def sealed(self):
        return self._a.sealed

    def update(self, x):
        self._a.update(x)

    def update_rows(self, data):
        from host_tools.batch import ingest
        for m in self._a.mechs:
            ingest(m, data)

    def release(self):
        return bytes(self._a.release())


def run_native(cfg, data, seed=None, device_id="device", epoch=0, seq=0, key=None, progress=None,
               block=1 << 16):
    """Frame bytes of the C core fed ``data`` (n, d) in batch calls."""
    from host_tools.errors import InputError
    try:
        a = NativeAgent(cfg, seed=seed, device_id=device_id, epoch=epoch, seq=seq, key=key)
    except ConfigError as e:
        raise InputError("invalid device config: %s" % e)
    for start in range(0, len(data), block):
        a.update_rows(data[start:start + block])
        if progress:
            progress(min(block, len(data) - start))
    return a.release()
