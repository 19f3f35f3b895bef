"""Narrow numeric facade for bulk work on blocks of readings.

Three backends, chosen at import (``BACKEND``):

``"ulab"``   ``ulab.numpy`` on a device firmware that has it;
``"numpy"``  numpy on CPython, held to ulab's feature set (below), so that
             code passing here also runs on ulab;
``"array"``  plain Python over ``array``/``bytearray``/``list`` buffers: the
             MicroPython unix port and any firmware without ulab.

``select(name)`` forces a backend (tests, benchmarks); ``available()`` lists
the importable ones. Only the operations the block-update path needs exist:

* ``asarray(values, dtype)``: a backend array of dtype "u8", "i8", "u16",
  "i16", "f" or "bool" from a list or buffer (always a copy). Anything else
  (int32, int64, ...) raises ``ValueError``: ulab has no such dtypes.
* ``clamp_rem(x, lo, hi, flags=None) -> (rem, flags, clamped)``: the
  clamp-and-remainder step of one channel: rem = x - lo for lo <= x <= hi,
  ``hi - lo`` above hi, 0 below lo or NaN. ``flags`` (uint8, 1 = clamped) is
  OR-ed over the channels passed through it; ``clamped`` counts its ones,
  i.e. the readings clamped on any channel so far.
* ``div_step(rem, span, out=None, off=0) -> (bits, rem)``: one step of the
  exact binary long division over a whole array: t = 2*rem; bit = t >= span;
  rem = t - bit*span. ``bits`` is a uint8 array; with ``out`` (a bytearray)
  the bits are written to ``out[off:off+n]`` and ``out`` is returned instead.
  Always use the returned ``rem`` (in place on "array", new on ulab/numpy).
* ``tolist(a)``, ``clear(a)`` (zero in place), ``is_int_column(col)``.

Exactness: every backend gives exactly the bits and remainders of the scalar
code in agent/privhp/__init__.py. Per channel the representation is

* int16 when the bounds are integers, ``hi - lo <= INT16_SPAN_MAX`` (16383:
  2*rem stays below 2**15) and the readings are integers (ADC codes): the
  clamp runs in float (exact: the bounds are exactly representable and any
  reading beyond them still compares beyond them), the division in int16;
* the backend float otherwise. Doubling is exact in binary floating point and
  t - span is exact for span <= t <= 2*span (Sterbenz), so the division is
  exact for any float remainder; integers are exact below 2**FLOAT_BITS
  (2**53 with float64, 2**24 on float32 ports). Channels whose bounds or span
  reach 2**FLOAT_BITS go through the "array" code instead (exact Python
  numbers), on every backend.
* Caveat, float32 ports (most MCUs with ulab): non-integer float readings
  are rounded to float32, so bytes may differ from CPython -- the same caveat
  as the scalar path on that MCU, whose Python floats are float32 too. Integer
  channels are unaffected.

The "array" backend stores float remainders in a list (the very Python
numbers the scalar path would hold: exact on every port) and integer ones in
a list of small ints; it allocates O(1) objects per call, none per reading
for integer data.

Rules for the numpy backend (so that code passing on CPython passes on ulab),
enforced by ``_chk`` on every array this module makes or returns:
only uint8/int8/uint16/int16/float/bool dtypes; no fancy (integer-array)
indexing; no mixed-dtype arithmetic (integers are combined with int16
one-element arrays, never with Python ints whose dtype ulab would guess);
nothing relies on overflow; dtypes are compared, never printed; no
np.random; only functions ulab has (array, frombuffer, where, minimum,
maximum, sum, comparisons, tobytes, tolist).

This module never imports ``agent`` (docs/architecture.md: imports flow one way).
"""
from array import array

BACKEND = None
np = None
FLOAT_BITS = 53
INT16_SPAN_MAX = 16383
DTYPES = ("u8", "i8", "u16", "i16", "f", "bool")

_F = None        # backend float dtype
_ALLOWED = ()    # backend dtypes the numpy backend may hold
_LIMIT = 1 << 53  # 2**FLOAT_BITS
_INT_RANGE = {"u8": (0, 255), "i8": (-128, 127), "u16": (0, 65535),
              "i16": (-32768, 32767), "bool": (0, 1)}
_TYPECODE = {"u8": "B", "i8": "b", "u16": "H", "i16": "h", "bool": "B"}
try:
    array("d", [0.5])
    _FLOAT_CODE = "d"
except ValueError:  # a port without double arrays
    _FLOAT_CODE = "f"
_TYPECODE["f"] = _FLOAT_CODE


def _import(name):
    if name == "ulab":
        from ulab import numpy as mod
        return mod
    if name == "numpy":
        import sys
        if sys.implementation.name != "cpython":
            raise ImportError("the numpy backend is for CPython")
        import numpy as mod
        return mod
    if name == "array":
        return None
    raise ValueError("backend must be 'ulab', 'numpy' or 'array', got %r" % (name,))


def available():
    """Names of the backends importable here, in preference order."""
    out = []
    for name in ("ulab", "numpy", "array"):
        try:
            _import(name)
        except ImportError:
            continue
        out.append(name)
    return out


def select(name=None):
    """Use backend ``name`` ("ulab", "numpy", "array"; None: the first
    importable in that order). Returns the name; raises ImportError if that
    backend is not importable here."""
    global BACKEND, np, FLOAT_BITS, _F, _ALLOWED, _LIMIT
    if name is None:
        for cand in ("ulab", "numpy", "array"):
            try:
                _import(cand)
            except ImportError:
                continue
            name = cand
            break
    mod = _import(name)
    if name == "ulab":
        f = mod.float
        bits = 24 if mod.zeros(1, dtype=f).itemsize == 4 else 53
        allowed = (mod.uint8, mod.int8, mod.uint16, mod.int16, f)
    elif name == "numpy":
        f = mod.float64
        bits = 53
        allowed = (mod.uint8, mod.int8, mod.uint16, mod.int16, f, mod.bool_)
    else:
        f = None
        allowed = ()
        bits = 53 if _FLOAT_CODE == "d" and _float_bits() == 53 else 24
    BACKEND, np, _F, _ALLOWED, FLOAT_BITS = name, mod, f, allowed, bits
    _LIMIT = 1 << bits
    _S16.clear()
    return name


def _float_bits():
    """Mantissa bits (+1) of the interpreter's float: 53 or 24."""
    x = 1.0
    n = 0
    while x + 1.0 != x and n < 64:
        x = x + x
        n += 1
    return n


# ------------------------------------------------------------- helpers
def _chk(a):
    """Refuse an array whose dtype ulab does not have (numpy backend)."""
    if BACKEND == "numpy":
        dt = a.dtype
        for ok in _ALLOWED:
            if dt == ok:
                return a
        raise TypeError("numeric facade: array dtype outside ulab's set")
    return a


def _np_dtype(dtype):
    if dtype == "f":
        return _F
    if dtype == "bool":
        return np.uint8  # stored as 0/1 bytes, as ulab stores booleans
    return getattr(np, {"u8": "uint8", "i8": "int8", "u16": "uint16", "i16": "int16"}[dtype])


def is_int_column(col):
    """True if every value of ``col`` is an integer (bools count as 0/1),
    False if they are numbers and some is not an integer.

    Typed buffers are homogeneous: one look decides (MicroPython arrays have
    no ``typecode``). Lists and tuples are scanned, and a value that is not a
    number raises TypeError, as comparing it in PrivHP.update would (numpy
    would quietly turn None into NaN and "1.5" into 1.5)."""
    if isinstance(col, (bytes, bytearray)):
        return True
    dt = getattr(col, "dtype", None)
    if dt is not None and np is not None:
        if hasattr(dt, "kind"):  # numpy
            if dt.kind not in "biuf":
                raise TypeError("readings must be numbers, got an array of kind %r" % dt.kind)
            return dt.kind != "f"
        return dt != _F  # ulab: every other dtype is an integer one
    if isinstance(col, array):
        if len(col) == 0:
            return True
        return isinstance(col[0], int)
    integer = True
    for v in col:
        if isinstance(v, int) or v is True or v is False:
            continue
        if isinstance(v, float):
            integer = False
            continue
        kind = getattr(getattr(v, "dtype", None), "kind", None)  # numpy scalars
        if kind is not None and kind in "biu":
            continue
        if kind == "f":
            integer = False
            continue
        raise TypeError("readings must be numbers, got %r" % (v,))
    return integer


def _exact(lo, hi, span):
    """Bounds and span representable exactly in the backend float."""
    lim = _LIMIT
    return -lim < lo < lim and -lim < hi < lim and span < lim


def asarray(values, dtype):
    """A new backend array of ``dtype`` holding ``values`` (list or buffer).

    Integer dtypes refuse non-integral and out-of-range values (ValueError):
    nothing here relies on any library's overflow behaviour. A creation
    helper (one Python pass), not a hot-path operation."""
    if dtype not in DTYPES:
        raise ValueError("dtype %r is not one of ulab's: %s" % (dtype, ", ".join(DTYPES)))
    vals = []
    for v in values:
        if dtype != "f":
            try:
                iv = int(v)
            except (TypeError, ValueError, OverflowError):
                iv = None
            lo, hi = _INT_RANGE[dtype]
            if iv is None or iv != v or iv < lo or iv > hi:
                raise ValueError("value %r does not fit dtype %s" % (v, dtype))
            v = iv
        else:
            v = float(v)
        vals.append(v)
    if BACKEND == "array":
        return array(_TYPECODE[dtype], vals)
    return _chk(np.array(vals, dtype=_np_dtype(dtype)))


def tolist(a):
    """Plain list of the values of a backend array (or any sequence)."""
    if hasattr(a, "tolist"):
        return a.tolist()
    return [v for v in a]


def clear(a):
    """Zero ``a`` in place (hygiene: buffers that encoded readings)."""
    if isinstance(a, (list, bytearray, array)):
        for i in range(len(a)):
            a[i] = 0
    else:
        a[:] = 0


# ------------------------------------------------------- array backend
def _py_clamp_rem(x, lo, hi, flags):
    n = len(x)
    span = hi - lo
    rem = [0] * n
    if flags is None:
        flags = bytearray(n)
    for j in range(n):
        v = x[j]
        if v > hi:
            rem[j] = span
            flags[j] = 1
        elif v >= lo:
            rem[j] = v - lo
        else:  # below the box, or NaN
            flags[j] = 1
    c = 0
    for f in flags:
        if f:
            c += 1
    return rem, flags, c


def _py_div_step(rem, s, out, off):
    n = len(rem)
    if out is None:
        out = bytearray(n)
        off = 0
    for j in range(n):
        t = rem[j]
        t = t + t
        if t >= s:
            rem[j] = t - s
            out[off + j] = 1
        else:
            rem[j] = t
            out[off + j] = 0
    return out, rem


# -------------------------------------------------- ulab / numpy backend
def _to_float(x):
    """Any column as a backend float array (a copy)."""
    if isinstance(x, (bytes, bytearray)):
        x = np.frombuffer(x, dtype=np.uint8)
    return _chk(np.array(x, dtype=_F))


def _u8(a):
    return _chk(np.array(a, dtype=np.uint8))


def _np_clamp_rem(x, lo, hi, flags, integer):
    xf = _to_float(x)
    lof = float(lo)
    hif = float(hi)
    ge = xf >= lof
    c = np.minimum(np.maximum(xf, lof), hif)
    rem = _chk(np.where(ge, c - lof, 0.0))   # hi - lo above the box, 0 below or NaN
    fl = _chk(np.maximum(_u8(xf > hif), _u8(~ge)))
    if flags is not None:
        if isinstance(flags, (bytes, bytearray)):
            flags = np.frombuffer(flags, dtype=np.uint8)
        fl = _chk(np.maximum(fl, _u8(flags)))
    clamped = int(np.sum(_chk(np.array(fl, dtype=_F))))
    if integer:
        rem = _chk(np.array(rem, dtype=np.int16))  # integers in [0, 16383]: exact
    return rem, fl, clamped


_S16 = {}  # span -> its int16 one-element array (a handful of channels)


def _np_div_step(rem, span, out, off):
    if rem.dtype == np.int16:
        s = _S16.get(span)
        if s is None:
            if len(_S16) > 32:
                _S16.clear()
            s = _chk(np.array([span], dtype=np.int16))
            _S16[span] = s
    else:
        s = float(span)
    t = rem + rem
    b = t >= s
    rem = _chk(np.where(b, t - s, t))
    if out is None:
        return _u8(b), rem
    out[off:off + len(rem)] = b.tobytes()  # booleans are 0/1 bytes in numpy and ulab
    return out, rem


# ------------------------------------------------------------- the API
def clamp_rem(x, lo, hi, flags=None):
    """Clamp-and-remainder step for one channel ``x`` (list or buffer) with
    public bounds ``lo < hi``. Returns ``(rem, flags, clamped)`` (module
    docstring); the same numbers as PrivHP.update, exactly."""
    span = hi - lo
    if BACKEND == "array" or not _exact(lo, hi, span):
        return _py_clamp_rem(x, lo, hi, flags)
    intcol = is_int_column(x)  # also refuses non-numbers (TypeError)
    integer = isinstance(lo, int) and isinstance(hi, int) and span <= INT16_SPAN_MAX and intcol
    return _np_clamp_rem(x, lo, hi, flags, integer)


def div_step(rem, span, out=None, off=0):
    """One exact long-division step over ``rem`` (from ``clamp_rem`` or a
    previous ``div_step``) by ``span`` (the channel's hi - lo)."""
    if isinstance(rem, list):
        return _py_div_step(rem, span, out, off)
    return _np_div_step(rem, span, out, off)


select()
