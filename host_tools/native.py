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
    eps = device._ratio(cfg.get("epsilon"), "epsilon")
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


class NativeAgent:
    """The C core holding one PrivHP state; the API of ``agent.Agent``."""

    def __new__(cls, *args, **kw):
        if lib is None:
            warnings.warn(FALLBACK_WARNING, RuntimeWarning, stacklevel=2)
            return FallbackAgent(*args, **kw)
        return super().__new__(cls)

    def __init__(self, cfg, seed=None, device_id="device", epoch=0, seq=0, key=None):
        from agent.device import _device_id
        m, factor, eps = validate(cfg)
        dev = _device_id(device_id)
        for name, v in (("epoch", epoch), ("seq", seq)):
            if not _is_int(v) or not 0 <= v < 1 << 32:
                raise ConfigError("%s must be an integer in [0, 2**32), got %r" % (name, v))
        self.d = m.d
        keep = self._keep = []  # cffi objects the C structs point into

        def new(ctype, init):
            obj = ffi.new(ctype, init)
            keep.append(obj)
            return obj
        c = self._cfg = new("es_privhp_cfg_t *", None)
        c.d, c.r, c.j, c.sketch = m.d, m.r, m.j, 1 if m.sketch == "cs" else 0
        c.k, c.w, c.q, c.clamp_p = m.k, m.w, m.q, m.clamp_p
        c.sigma = new("uint64_t[]", m.sigma)
        ints = [_is_int(a) and _is_int(b) and INT32_SAFE[0] <= a and b <= INT32_SAFE[1]
                for a, b in zip(m.lo, m.hi)]
        self.int_path = all(ints)
        c.int_mask = sum(1 << i for i in range(m.d) if ints[i])
        if self.int_path:
            c.lo_i = new("int32_t[]", m.lo)
            c.hi_i = new("int32_t[]", m.hi)
        c.lo_f = new("double[]", [float(v) for v in m.lo])
        c.hi_f = new("double[]", [float(v) for v in m.hi])
        c.lo_bits = new("uint64_t[]", [_f64_bits(v) for v in m.lo])
        c.hi_bits = new("uint64_t[]", [_f64_bits(v) for v in m.hi])
        names = [new("char[]", b) for b in m.name_bytes]
        c.names = new("char *[]", names)
        seed_b = m.hash_seed.encode()
        c.hash_seed = new("uint8_t[]", seed_b)
        c.hash_seed_len = len(seed_b)
        size = lib.es_privhp_mem_size(c)
        if size == 0:
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
        self._scratch = ffi.new("double[]", m.d)

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
        if self.int_path:
            ints = data if data.dtype.kind in "iu" else None
            if ints is None and data.dtype.kind == "f" and np.all(np.abs(data) < 2 ** 53) \
                    and np.all(data == np.floor(data)):
                ints = data.astype(np.int64)
            if ints is not None:
                # outside-the-box values keep their cell: bounds sit inside INT32_SAFE
                x = np.ascontiguousarray(np.clip(ints, -(1 << 31), (1 << 31) - 1), dtype=np.int32)
                _check(lib.es_privhp_update_i32_rows(self._state, ffi.from_buffer("int32_t[]", x),
                                                     len(x)), "update")
                return
        x = np.ascontiguousarray(data, dtype=np.float64)
        _check(lib.es_privhp_update_f64_rows(self._state, ffi.from_buffer("double[]", x), len(x)),
               "update")

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
