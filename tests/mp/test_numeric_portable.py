"""Portable tests of the numeric facade and the block update (CPython and MicroPython).

Plain ``test_*`` functions with ``assert``: ``tests/mp/run.py`` runs them under
the MicroPython unix port (array backend: it has no ulab), and
``tests/test_numeric.py`` runs them under pytest once per forced backend.

* facade: every importable backend gives the bits, remainders and clamp
  counts of the scalar code of PrivHP.update (written out below as the
  reference), on random and boundary data, integer and float channels;
* ``update_block`` on the currently selected backend leaves frames
  byte-identical to per-reading ``update`` (same config, seed and readings),
  for blocks of 1, 7 and 64 readings and one longer than a chunk.
"""
import gc
import hashlib
from array import array

import agent
from agent.privhp.block import CHUNK, update_block
from firmware_shims import numeric as num

try:
    import micropython
except ImportError:
    micropython = None

LIM = 1 << 30
SIZES = (1, 7, 64)


# ------------------------------------------------------------------ helpers
def make_cfg(sketch="cms", r=16, k=64, w=256, j=2, lo=None, hi=None, eps=(1, 2), clamp=True):
    """One-mechanism PrivHP config whose budgets add up to epsilon exactly
    (the pattern of test_agent_portable.py: sum(sigma) + clamp_p == eps * q)."""
    if lo is None:
        lo = [0, 0]
    if hi is None:
        hi = [4096, 4096]
    q = 1 << 20
    assert (q * eps[0]) % eps[1] == 0
    total = q * eps[0] // eps[1]
    clamp_p = total // 64 if clamp else 0
    rest = total - clamp_p
    base = rest // (r + 1)
    sigma = [base] * (r + 1)
    sigma[r] += rest - base * (r + 1)
    s = clamp_p
    for v in sigma:
        s += v
    assert s * eps[1] == eps[0] * q  # exact, in integers
    return {
        "format": 1, "epsilon": [eps[0], eps[1]], "relation": "add-remove",
        "mechanisms": [{
            "kind": "privhp", "names": ["c%d" % i for i in range(len(lo))], "lo": lo, "hi": hi,
            "r": r, "k": k, "w": w, "j": j, "sketch": sketch,
            "hash_seed": "numeric-tests", "q": q, "sigma": sigma, "clamp_p": clamp_p,
        }],
    }


class Lcg:
    """x -> (1021 x + 12345) mod 2**20: the same stream on every runtime, < 2**30."""

    def __init__(self, seed):
        self.x = seed & 0xFFFFF

    def next(self):
        self.x = (1021 * self.x + 12345) & 0xFFFFF
        return self.x

    def below(self, m):
        return (self.next() >> 4) % m  # m <= 65536


def _nan():
    return float("inf") - float("inf")


def int_values(lo, hi, n, seed):
    """Boundary integers first (every clamp case, extremes), then random ones
    just around the box."""
    vals = [lo - 1, lo, lo + 1, hi - 1, hi, hi + 1, lo - 100000, hi + 100000,
            -(1 << 29), (1 << 29) - 1, 0, (lo + hi) // 2]
    g = Lcg(seed)
    width = hi - lo + 2
    while len(vals) < n:
        if width <= 65536:
            vals.append(lo - 1 + g.below(width))
        else:
            vals.append(lo - 1 + g.below(65536) * (width // 65536) + g.below(width % 65536 + 1))
    return vals[:n]


def float_values(lo, hi, n, seed):
    """Boundary floats (NaN, infinities, signed zero, tiny steps out of the box)
    then random ones over a slightly wider box. No decimal literals: every
    value comes from exact operations, identical on every runtime."""
    span = hi - lo
    vals = [lo, hi, lo - span / 1048576.0, hi + span / 1048576.0, _nan(), float("inf"),
            -float("inf"), -0.0, 0.0, lo + span / 3.0, hi - span / 7.0, lo - 1e30 / 1e10,
            hi + 1, lo - 1, (lo + hi) / 2.0, 5e-324]
    g = Lcg(seed)
    while len(vals) < n:
        u = g.below(65536) / 65536.0
        vals.append(lo - span / 16.0 + u * span * 1.125)
    return vals[:n]


def ref_clamp(xs, lo, hi):
    """The clamp step of PrivHP.update, reading by reading."""
    rem = []
    flag = []
    for x in xs:
        if x > hi:
            rem.append(hi - lo)
            flag.append(1)
        elif x >= lo:
            rem.append(x - lo)
            flag.append(0)
        else:
            rem.append(0)
            flag.append(1)
    return rem, flag


def ref_div(rem, s):
    """One long-division step of PrivHP.update: (bits, new remainders)."""
    bits = []
    out = []
    for t in rem:
        t = t + t
        if t >= s:
            out.append(t - s)
            bits.append(1)
        else:
            out.append(t)
            bits.append(0)
    return bits, out


def _same_numbers(a, b, what):
    assert len(a) == len(b), (what, len(a), len(b))
    for i in range(len(a)):
        x = a[i]
        y = b[i]
        if x != y and not (x != x and y != y):
            raise AssertionError("%s differs at %d: %r != %r" % (what, i, x, y))


class Backend:
    """``with``-less backend switch that always restores the selection."""

    def __init__(self):
        self.saved = num.BACKEND

    def restore(self):
        num.select(self.saved)


def _check_channel(xs, lo, hi, steps, int_buffer=None):
    """Every available backend: clamp and ``steps`` division steps equal the
    reference; and the combined flags of two channels count correctly."""
    rem0, flag0 = ref_clamp(xs, lo, hi)
    span = hi - lo
    sw = Backend()
    try:
        for name in num.available():
            num.select(name)
            col = xs if int_buffer is None else int_buffer
            rem, flags, clamped = num.clamp_rem(col, lo, hi)
            _same_numbers(num.tolist(rem), rem0, "%s rem" % name)
            _same_numbers(num.tolist(flags), flag0, "%s flags" % name)
            assert clamped == sum(flag0), (name, clamped, sum(flag0))
            ref = rem0
            bm = bytearray(3 + len(xs))
            for step in range(steps):
                want_bits, ref = ref_div(ref, span)
                if step & 1:
                    bits, rem = num.div_step(rem, span)
                    got = num.tolist(bits)
                else:
                    bits, rem = num.div_step(rem, span, bm, 3)
                    assert bits is bm
                    got = [bm[3 + i] for i in range(len(xs))]
                _same_numbers(got, want_bits, "%s bits at step %d" % (name, step))
                _same_numbers(num.tolist(rem), ref, "%s rem at step %d" % (name, step))
            # a second channel: its flags OR the first one's
            rev = [xs[len(xs) - 1 - i] for i in range(len(xs))]
            rem2, flags2, clamped2 = num.clamp_rem(rev, lo, hi, flags)
            both = 0
            for i in range(len(xs)):
                if flag0[i] or flag0[len(xs) - 1 - i]:
                    both += 1
            assert clamped2 == both, (name, clamped2, both)
            num.clear(rem)
            for v in num.tolist(rem):
                assert v == 0
    finally:
        sw.restore()


# ---------------------------------------------------------------- the facade
def test_backend_selected():
    names = num.available()
    assert "array" in names and num.BACKEND in names, (names, num.BACKEND)
    if micropython is not None:
        assert "numpy" not in names
    sw = Backend()
    try:
        assert num.select("array") == "array" and num.BACKEND == "array"
        try:
            num.select("cuda")
        except ValueError:
            pass
        else:
            raise AssertionError("an unknown backend must be refused")
    finally:
        sw.restore()


def test_asarray_dtypes():
    sw = Backend()
    try:
        for name in num.available():
            num.select(name)
            for dt, vals in (("u8", [0, 7, 255]), ("i8", [-128, 0, 127]), ("u16", [0, 4095, 65535]),
                             ("i16", [-32768, 5, 32767]), ("bool", [0, 1, 1]), ("f", [0.5, -2.0, 3])):
                a = num.asarray(vals, dt)
                assert num.tolist(a) == vals, (name, dt, num.tolist(a))
            a = num.asarray(array("H", [1, 2, 65535]), "u16")
            assert num.tolist(a) == [1, 2, 65535]
            for dt in ("i32", "u32", "i64", "int32", "int64", "f32"):
                try:
                    num.asarray([1, 2], dt)
                except ValueError:
                    pass
                else:
                    raise AssertionError("%s: dtype %s must be refused" % (name, dt))
            for dt, bad in (("u8", 256), ("u16", -1), ("i16", 32768), ("i8", -129), ("u16", 1.5)):
                try:
                    num.asarray([0, bad], dt)
                except ValueError:
                    pass
                else:
                    raise AssertionError("%s: %r must not fit %s" % (name, bad, dt))
    finally:
        sw.restore()


def test_is_int_column():
    assert num.is_int_column([1, 2, -3])
    assert num.is_int_column(array("H", [1, 2]))
    assert num.is_int_column(bytearray(b"\x01\x02"))
    assert num.is_int_column([True, 0])
    assert not num.is_int_column([1, 2.0])
    assert not num.is_int_column(array("d", [1.0]))
    for bad in ([1, None], [2.5, "3"]):
        try:
            num.is_int_column(bad)
        except TypeError:
            pass
        else:
            raise AssertionError("%r holds a non-number" % (bad,))


def test_clamp_div_int_adc():
    # ADC codes in a uint16 buffer, int16 path (span 4096 <= 16383)
    g = Lcg(21)
    vals = [0, 1, 4095, 4096, 4097, 65535] + [g.below(4300) for _ in range(200)]
    _check_channel(vals, 0, 4096, 13, int_buffer=array("H", vals))


def test_clamp_div_int_boundaries():
    # int16 path at its limit, float path beyond it, negative bounds, huge span
    for lo, hi, steps in ((0, 16383, 15), (-5000, 11383, 15), (0, 16384, 16), (-7, 100003, 18),
                          (1000, 1003, 4), (-(1 << 28), (1 << 28) + 12345, 30),
                          (0, (1 << 29) - 1, 30)):
        _check_channel(int_values(lo, hi, 150, lo + hi), lo, hi, steps)


def test_clamp_div_float():
    third = 1 / 3.0
    for lo, hi in ((0.0, 1.0), (-1.5, 2.75), (third, 7 * third), (-1e6 / 3.0, 1e6 / 7.0),
                   (0, 1000.5), (-3, 3)):
        _check_channel(float_values(lo, hi, 150, 5), lo, hi, 30)
    # integer readings (and ints far out of the box) against float bounds
    _check_channel(int_values(-3, 3, 80, 2), -1.25, 2.5, 20)
    # integer bounds, float readings: the float path, exact
    _check_channel(float_values(0, 4096, 120, 9), 0, 4096, 14)


def test_clamp_div_empty_and_single():
    _check_channel([], 0, 10, 3)
    _check_channel([5], 0, 10, 3)
    _check_channel([_nan()], 0.0, 1.0, 3)


# ------------------------------------------------------------ block update
def _release_digest(a):
    h = hashlib.sha256()

    def sink(buf, n):
        h.update(buf if n == len(buf) else memoryview(buf)[:n])
    a.release(sink)
    return h.digest()


def _columns(rows, d, kind):
    if kind == "H":
        return [array("H", [x[i] for x in rows]) for i in range(d)]
    if kind == "tuple":
        return [tuple([x[i] for x in rows]) for i in range(d)]
    return [[x[i] for x in rows] for i in range(d)]


def _compare(cfg, rows, kinds=("list",), sizes=SIZES, seed=b"block-seed"):
    """Frames of per-reading update and of update_block (blocks cycling
    through ``sizes``, column types through ``kinds``) must be identical."""
    a = agent.Agent(cfg, seed=seed)
    up = a.update
    for x in rows:
        up(x)
    want = _release_digest(a)
    clamp_a = a.mechs[0].clamp
    a = None
    gc.collect()
    b = agent.Agent(cfg, seed=seed)
    m = b.mechs[0]
    d = m.d
    i = 0
    t = 0
    while i < len(rows):
        n = sizes[t % len(sizes)]
        blk = rows[i:i + n]
        got = update_block(m, _columns(blk, d, kinds[t % len(kinds)]))
        assert got == len(blk)
        i += n
        t += 1
    assert m.clamp == clamp_a, (m.clamp, clamp_a)
    for v in m.rem:
        assert v == 0
    bits = getattr(m, "_block_bits", None)
    if bits is not None:
        for v in bits:
            assert v == 0, "the bit matrix kept reading-derived bits"
    assert _release_digest(b) == want, "update_block frame differs from per-reading update"
    return b


def _int_rows(n, lo, hi, seed, adc=False):
    rows = []
    if not adc:
        a = int_values(lo, hi, n, seed)
        b = int_values(lo, hi, n, seed + 1)
        for i in range(n):
            rows.append((a[i], b[(i * 7) % n]))
        return rows
    g = Lcg(seed)
    for i in range(n):
        rows.append((g.below(4200), g.below(4200)))  # 12-bit ADC codes, a few above hi
    return rows


def test_block_cms_j2_int():
    cfg = make_cfg()
    _compare(cfg, _int_rows(150, 0, 4096, 3))
    _compare(cfg, _int_rows(150, 0, 4096, 4, adc=True), kinds=("H", "list", "tuple"))


def test_block_count_sketch_j3():
    cfg = make_cfg(sketch="cs", j=3)
    _compare(cfg, _int_rows(150, 0, 4096, 5))
    _compare(cfg, _int_rows(100, 0, 4096, 6, adc=True), kinds=("H",))


def test_block_pmm():
    cfg = make_cfg(r=10, k=1024)  # k >= 2**r: a complete tree, no sketch
    _compare(cfg, _int_rows(150, 0, 4096, 7))


def test_block_float_1d():
    third = 1 / 3.0
    cfg = make_cfg(lo=[-third], hi=[5 * third], r=14, k=16, w=128)
    rows = [(x,) for x in float_values(-third, 5 * third, 200, 8)]
    _compare(cfg, rows)
    # mixed: int readings in a float channel, float readings in an int one
    _compare(cfg, [(x,) for x in int_values(-2, 3, 60, 9)])
    cfg = make_cfg(lo=[0], hi=[4096], r=12, k=8, w=64, j=1)
    _compare(cfg, [(x,) for x in float_values(0, 4096, 120, 10)])


def test_block_deep_hash_classes():
    # r = 29 reaches every limb class of the hash: node ids below 2**14,
    # below 2**28 and above (x2 != 0); int span of 2**29 - 1 (float path)
    for sketch, j in (("cms", 2), ("cms", 1), ("cms", 3), ("cs", 2)):
        cfg = make_cfg(sketch=sketch, r=29, k=4, w=16, j=j, lo=[0], hi=[(1 << 29) - 1])
        _compare(cfg, [(x,) for x in int_values(0, (1 << 29) - 1, 90, 11)])


def test_block_wider_than_a_chunk():
    cfg = make_cfg(r=8, k=256, lo=[0, -100], hi=[1000, 300])
    n = CHUNK + 37
    g = Lcg(12)
    rows = [(g.below(1100) - 50, g.below(500) - 150) for _ in range(n)]
    _compare(cfg, rows, sizes=(n, 3))


def test_block_no_clamp_counter():
    cfg = make_cfg(clamp=False)
    b = _compare(cfg, _int_rows(70, 0, 4096, 13))
    assert b.mechs[0].clamp == 0


def test_block_refused_when_sealed():
    a = agent.Agent(make_cfg(r=10, k=1024), seed=b"sealed")
    m = a.mechs[0]
    update_block(m, ([1, 2], [3, 4]))
    f = a.release()
    try:
        update_block(m, ([1, 2], [3, 4]))
    except agent.SealedError:
        pass
    else:
        raise AssertionError("update_block after release must raise SealedError")
    assert a.release() == f


def test_block_bad_shapes():
    a = agent.Agent(make_cfg(r=10, k=1024), seed=b"shapes")
    m = a.mechs[0]
    root = m.tree_rows[0][0]
    for cols in (([1, 2],), ([1, 2], [3]), ([1], [2], [3])):
        try:
            update_block(m, cols)
        except ValueError:
            pass
        else:
            raise AssertionError("columns %r must be refused" % (cols,))
    assert update_block(m, ([], [])) == 0
    assert m.tree_rows[0][0] == root
    assert update_block(m, ([5], [6])) == 1
    assert m.tree_rows[0][0] == root + 1


def test_block_bad_values_count_nothing():
    a = agent.Agent(make_cfg(), seed=b"bad-values")
    m = a.mechs[0]
    update_block(m, ([1, 2, 3], [4, 5, 6]))
    root = m.tree_rows[0][0]
    clamp = m.clamp
    sketch = hashlib.sha256()
    for row in m.sketch_rows:
        sketch.update(row)
    for cols in (([1, "x", 3], [4, 5, 6]), ([1, 2, 3], [4, 5, None])):
        try:
            update_block(m, cols)
        except (TypeError, ValueError):
            pass
        else:
            raise AssertionError("non-numbers must be refused: %r" % (cols,))
    assert m.tree_rows[0][0] == root and m.clamp == clamp
    again = hashlib.sha256()
    for row in m.sketch_rows:
        again.update(row)
    assert again.digest() == sketch.digest(), "a refused block changed the sketches"
    for v in m._block_bits:
        assert v == 0
    for v in m.rem:
        assert v == 0


def test_block_allocates_nothing_per_reading():
    # MicroPython: allocation of a block grows by less than one object per
    # reading (32 B on this 64-bit port): the facade's per-channel buffers
    # (2 x 8 B list slots + 1 flag byte per reading here), no boxed numbers
    if micropython is None or not hasattr(gc, "mem_alloc"):
        return
    a = agent.Agent(make_cfg(), seed=b"alloc")
    m = a.mechs[0]
    g = Lcg(14)
    cols = {}
    for n in (64, 256):
        cols[n] = (array("H", [g.below(4200) for _ in range(n)]),
                   array("H", [g.below(4200) for _ in range(n)]))
    update_block(m, cols[256])  # warm up: scratch and plan at full size
    update_block(m, cols[64])
    used = {}
    for n in (64, 256):
        gc.collect()
        gc.disable()
        a0 = gc.mem_alloc()
        update_block(m, cols[n])
        used[n] = gc.mem_alloc() - a0
        gc.enable()
    per = (used[256] - used[64]) / 192.0
    print("update_block allocated %d B (64 readings), %d B (256): %.1f B per reading"
          % (used[64], used[256], per))
    assert per < 32, "update_block allocates per reading: %r" % (used,)
