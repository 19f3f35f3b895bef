"""The native runtime: the agent's C core (agent/c) through cffi, batch calls.

    a = NativeAgent(cfg, seed=b"...", device_id="dev", key=None)
    a.update((412, 1977))           # one reading, its values in the config's input order
    a.update_rows(array)            # (n, inputs) numpy array: one C call per mechanism
    frame = a.release()             # bytes, identical to agent.Agent's

Every mechanism kind runs in C (privhp, cdf, profile, marginals), one or
several per device, and the continual phdstream alone: one agent over many windows,
``release()`` then ``next_window()`` per window (``run_native_stream``).
The config is parsed and validated by the Python agent's own code, then its
numbers are handed to C (host_tools/ccore.py, shared with the qemu runtime and
the firmware build); the noise, hashes, update and frame are the C core's. Per
mechanism, integer readings on integer bounds take the integer path
(es_privhp_i32.c, es_cdf.c); anything else takes the float path
(es_privhp_f64.c, es_cdf_f64.c), which repeats the Python agent's float
operations exactly. Profile ids are int32; phdstream events are integers;
marginals records are cell indices, int32 or doubles (es_marginals_f64.c:
floored; out of range, NaN or infinite -> the column's "other" cell).

Where the extension was not built (no C compiler at install), ``NativeAgent``
is the Python agent plus the vectorised ingestion of host_tools/runtimes/vectorized.py,
with a visible warning: same bytes, slower.
"""
import math
import warnings

import numpy as np

from edgesynth import agent
from edgesynth.agent.errors import SEALED, ConfigError, SealedError
from edgesynth.agent.wire import device_id_bytes
from edgesynth.ccore import EXACT_F64, INT32_MAX, INT32_MIN, core_events, core_params, core_readings, is_int
from edgesynth.errors import InputError
from edgesynth.firmware_shims import entropy as platform_entropy
from edgesynth.runtimes.vectorized import ingest_agent

try:
    from edgesynth.runtimes._es_native import ffi, lib
except ImportError:  # not built: pure-Python fallback below
    ffi = lib = None

ES_OK, ES_E_CONFIG, ES_E_MEMORY, ES_E_SEALED, ES_E_FULL, ES_E_ENTROPY, ES_E_RANGE = 0, -1, -2, -3, -4, -5, -6
FALLBACK_WARNING = ("edgesynth: the native core (edgesynth.runtimes._es_native) is not built, probably no C "
                    "compiler at install; the native runtime falls back to the Python agent (same "
                    "frames, slower). Reinstall with a compiler: pip install -e .")


def available():
    """True when the compiled core is importable."""
    return lib is not None


def _check(status, what):
    if status == ES_OK:
        return
    if status == ES_E_SEALED:
        raise SealedError(SEALED)
    if status == ES_E_FULL:  # the state is then unreleasable (es_core.h ES_MAX_ITEMS)
        raise OverflowError("%s: 2**31 - 2**29 readings counted; int32 counters could overflow, and a frame "
                            "of the first ones only is not private: this epoch's state cannot be released"
                            % what)
    if status == ES_E_RANGE:
        raise ConfigError("%s: noise draw out of range" % what)
    if status == ES_E_ENTROPY:
        raise ConfigError("%s: the DRBG refused (short entropy, a failed health test or the reseed "
                          "interval)" % what)
    if status == ES_E_CONFIG and what == "noise":
        raise ConfigError("a noise scale exceeds 2**22: some budget share is too small")
    raise ConfigError("%s failed with status %d" % (what, status))


def _as_double(v, lo, hi):
    """Reading ``v`` of a channel bounded by [lo, hi] as the float paths take it.

    The Python agent compares an integer with the bounds exactly and rounds it
    only in the arithmetic inside the box. Beyond 2**53 rounding could put a
    reading outside the box onto a bound, so such a reading becomes +-inf;
    inside the box it is float(v), as in Python's arithmetic."""
    if is_int(v) and abs(v) > EXACT_F64:
        if v > hi:
            return math.inf
        if v < lo:
            return -math.inf
    return float(v)


class _Mech:
    """One mechanism's C state, config struct and counter memory."""

    def __init__(self, p, factor, new):
        self.kind, self.cols, self.d, self.int_path = p["kind"], p["cols"], p["d"], p["int_path"]
        self.lo, self.hi = p["bounds"]
        cfg = new("es_%s_cfg_t *" % self.kind, None)
        for name, ctype, value in p["fields"]:
            if value is None:
                continue  # NULL pointer
            if ctype == "names":
                value = new("char *[]", [new("char[]", b) for b in value])
            elif ctype == "bytes":
                value = new("uint8_t[]", value)
            elif ctype.endswith("[]"):
                value = new(ctype.replace("f64bits", "uint64_t"), value)
            setattr(cfg, name, value)
        size = getattr(lib, "es_%s_mem_size" % self.kind)(cfg)
        if size != p["mem_bytes"]:
            raise ConfigError("the native core rejected the %s parameters" % self.kind)
        self.mem = new("uint32_t[]", (size + 3) // 4)
        self.state = new("es_%s_t *" % self.kind, None)
        _check(getattr(lib, "es_%s_init" % self.kind)(self.state, cfg, factor, self.mem, size),
               "%s init" % self.kind)
        self.base = ffi.addressof(self.state[0], "base")
        self._i32 = getattr(lib, "es_%s_update_i32" % self.kind)
        self._f64 = getattr(lib, "es_%s_update_f64" % self.kind, None)

    def reading(self, values):
        """(update function, C buffer) for one reading's values (its channel
        order); ValueError before anything is counted if it cannot take them
        (a phdstream event: ccore.core_events, which also refuses a value
        outside int32 that the Python agent would clamp)."""
        if self.kind == "phdstream":
            return self._i32, ffi.from_buffer("int32_t[]", core_events(np.array([values], dtype=object)))
        if self.kind == "profile" or (self.int_path and all(is_int(v) for v in values)):
            if not is_int(values[0]):
                raise ValueError("profile ids must be integers, got %r" % (values[0],))
            return self._i32, ffi.new("int32_t[]", [min(max(int(v), INT32_MIN), INT32_MAX) for v in values])
        return self._f64, ffi.new("double[]", [_as_double(v, a, b) for v, a, b in zip(values, self.lo, self.hi)])

    def rows(self, data):
        """(update function, C buffer, n) for every row of ``data`` (n, d);
        ValueError before anything is counted if it cannot take them."""
        if self.kind == "phdstream":
            x = core_events(data)
            return self._i32, ffi.from_buffer("int32_t[]", x), len(x)
        kind, x = core_readings(data, self.int_path)
        if kind == "i32":
            return self._i32, ffi.from_buffer("int32_t[]", x), len(x)
        if self.kind == "profile":
            raise ValueError("profile ids must be integers")
        if data.dtype.kind in "iu":  # the few integers beyond 2**53: compared exactly (_as_double)
            for row, col in zip(*np.nonzero((data > EXACT_F64) | (data < -EXACT_F64))):
                x[row, col] = _as_double(int(data[row, col]), self.lo[col], self.hi[col])
        return self._f64, ffi.from_buffer("double[]", x), len(x)

    def count(self, fn, buf, n):
        _check(fn(self.state, buf, n), "update")


class NativeAgent:
    """The C core holding a device's mechanism states; the API of ``agent.Agent``."""

    def __new__(cls, *args, **kw):
        if lib is None:
            warnings.warn(FALLBACK_WARNING, RuntimeWarning, stacklevel=2)
            return FallbackAgent(*args, **kw)
        return super().__new__(cls)

    def __init__(self, cfg, seed=None, device_id="device", epoch=0, seq=0, key=None):
        p = core_params(cfg)
        dev = device_id_bytes(device_id)
        for name, v in (("epoch", epoch), ("seq", seq)):
            if not is_int(v) or not 0 <= v < 1 << 32:
                raise ConfigError("%s must be an integer in [0, 2**32), got %r" % (name, v))
        self.inputs = len(p["inputs"])
        keep = self._keep = []  # cffi objects the C structs point into

        def new(ctype, init):
            obj = ffi.new(ctype, init)
            keep.append(obj)
            return obj
        self.mechs = [_Mech(m, p["factor"], new) for m in p["mechs"]]
        rng = ffi.new("es_drbg_t *")
        if seed is None:
            entropy, nonce = platform_entropy.gather()
            _check(lib.es_drbg_init(rng, entropy, len(entropy), nonce, len(nonce)), "DRBG")
        else:
            seed_b = seed.encode() if isinstance(seed, str) else bytes(seed)
            _check(lib.es_drbg_seeded(rng, seed_b, len(seed_b)), "DRBG")
        self._id = new("uint8_t[]", dev)
        bases = new("es_mech_t *[]", [m.base for m in self.mechs])
        a = self._agent = new("es_agent_t *", None)
        key_b = None if key is None else bytes(key)
        eps = p["eps"]
        _check(lib.es_agent_init(a, bases, len(self.mechs), p["factor"], eps[0], eps[1], self._id, len(dev),
                                 epoch, seq, key_b if key_b is not None else ffi.NULL,
                                 0 if key_b is None else len(key_b), rng), "noise")
        self.continual = p["continual"]

    @property
    def sealed(self):
        return bool(self._agent.sealed)

    def update(self, x):
        """Count one reading (a sequence of the config's input values)."""
        if self.sealed:  # before any mechanism counts: a sealed device changes nothing
            raise SealedError(SEALED)
        calls = [m.reading([x[c] for c in m.cols]) for m in self.mechs]  # all converted before any counts
        for m, (fn, buf) in zip(self.mechs, calls):
            m.count(fn, buf, 1)

    def update_rows(self, data):
        """Count every row of ``data`` (n, inputs): one C call per mechanism,
        each on its own columns. Integer arrays (or float arrays holding
        integers) on integer bounds take the integer path."""
        data = np.asarray(data)
        if data.ndim != 2 or data.shape[1] != self.inputs:
            raise ValueError("expected an (n, %d) array of readings" % self.inputs)
        if self.sealed:
            raise SealedError(SEALED)
        calls = [m.rows(data if m.cols == list(range(data.shape[1])) else data[:, m.cols]) for m in self.mechs]
        for m, call in zip(self.mechs, calls):  # every block converted first: a bad one counts nowhere
            m.count(*call)

    def release(self):
        """Seal the state and return the frame bytes (repeatable, identical).
        A continual (phdstream) state runs its window's step at the first."""
        _check(lib.es_agent_seal(self._agent), "release")
        size = lib.es_agent_frame_size(self._agent)
        out = ffi.new("uint8_t[]", size)
        n = lib.es_agent_release_buf(self._agent, out, size)
        _check(0 if n == size else (n if n < 0 else ES_E_MEMORY), "release")
        return bytes(ffi.buffer(out, n))

    def next_window(self, epoch=None):
        """agent.Agent.next_window: the next window of a continual
        (phdstream) state after its release (seq + 1, ``epoch`` by default the
        current one + 1); ConfigError as the Python agent raises it."""
        a = self._agent
        if not self.continual:
            raise ConfigError("next_window serves a phdstream config; another mechanism's next window is a "
                              "new Agent with fresh noise")
        if not a.sealed:
            raise ConfigError("release this window before the next one: each window is one step")
        if epoch is None:
            epoch = a.epoch + 1
        if not is_int(epoch) or not a.epoch < epoch < 1 << 32:
            raise ConfigError("the next window's epoch must be an integer in (%d, 2**32), got %r" % (a.epoch, epoch))
        if a.seq + 1 >= 1 << 32:
            raise ConfigError("seq must stay below 2**32")
        _check(lib.es_agent_next_window(a, epoch), "next window")


class FallbackAgent:
    """The Python agent behind NativeAgent's API, where the core is not built."""

    def __init__(self, cfg, seed=None, device_id="device", epoch=0, seq=0, key=None):
        self._a = agent.Agent(cfg, seed=seed, device_id=device_id, epoch=epoch, seq=seq, key=key)

    @property
    def sealed(self):
        return self._a.sealed

    def update(self, x):
        self._a.update(x)

    def update_rows(self, data):
        data = np.asarray(data)
        if self._a.mechs[0].kind == "phdstream":
            # continual: the agent's own update per event (a batch has nothing to vectorise)
            for row in core_events(data).tolist():  # ints, as the C path takes them
                self._a.update(row)
            return
        ingest_agent(self._a, data)

    def release(self):
        return bytes(self._a.release())

    def next_window(self, epoch=None):
        self._a.next_window(epoch)


def run_native(cfg, data, seed=None, device_id="device", epoch=0, seq=0, key=None, progress=None,
               block=1 << 16):
    """Frame bytes of the C core fed ``data`` (n, inputs) in batch calls."""
    try:
        a = NativeAgent(cfg, seed=seed, device_id=device_id, epoch=epoch, seq=seq, key=key)
    except ConfigError as e:
        raise InputError("invalid device config: %s" % e)
    for start in range(0, len(data), block):
        try:
            a.update_rows(data[start:start + block])
        except ValueError as e:
            raise InputError(str(e))
        if progress:
            progress(min(block, len(data) - start))
    return a.release()


def run_native_stream(cfg, windows, seed=None, device_id="device", key=None, progress=None):
    """Frames [(epoch, bytes), ...] of ONE continual (phdstream) C agent over
    ``windows`` [(epoch, seq, rows (k, inputs))]: each window's rows in one
    batch call, its release (the window's step), then next_window; the same
    bytes as runtimes.cpython.run_cpython_stream."""
    frames = []
    a = None
    try:
        for e, q, rows in windows:
            if a is None:
                a = NativeAgent(cfg, seed=seed, device_id=device_id, epoch=e, seq=q, key=key)
            else:
                a.next_window(e)
            if len(rows):
                a.update_rows(rows)
            frames.append((e, a.release()))
            if progress:
                progress(len(rows))
    except ConfigError as e:
        raise InputError("invalid device config: %s" % e)
    except ValueError as e:
        raise InputError(str(e))
    return frames
