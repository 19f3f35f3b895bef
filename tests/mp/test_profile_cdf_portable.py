"""Portable tests of the CDF and profile device states: CPython (pytest) and the
MicroPython unix port (tests/mp/run.py), in the style of test_agent_portable.py.

Golden digests were computed once on CPython and pasted in; every runtime must
reproduce them (the sampler's draw order and the wire layout are a contract).
"""
import gc
import hashlib
from array import array

import agent

try:
    import micropython
except ImportError:  # CPython: allocation checks need MicroPython
    micropython = None

LIM = 1 << 30
N_UPDATES = 5000


def cdf_cfg(lo=0, hi=4096, K=1000, br=(10, 10, 10), name="t"):
    """Budgets 1/3 each over q = 3: epsilon 1 exactly."""
    return {"kind": "cdf", "names": [name], "lo": [lo], "hi": [hi], "bins": K, "branching": list(br),
            "q": 3 * len(br), "sigma": [3] * len(br)}


def profile_cfg(lo=0, hi=512, cap=9, name="id", bits=0):
    spec = {"kind": "profile", "names": [name], "lo": lo, "hi": hi, "cap": cap, "q": 1, "p": 1}
    if bits:  # hashed ids from [0, 2**bits), a keyed-permutation sample of them counted
        spec["sample"] = {"bits": bits, "seed": "portable"}
    return spec


def device(mechs, eps, seed=b"portable-sketch!", inputs=None):
    cfg = {"format": 1, "epsilon": list(eps), "mechanisms": mechs}
    if inputs is not None:
        cfg["inputs"] = inputs
    return agent.Agent(cfg, seed=seed)


class Lcg:
    """x -> (1021 x + 12345) mod 2**20: below 2**30 on every runtime."""

    def __init__(self, seed):
        self.x = seed & 0xFFFFF

    def below(self, m):
        self.x = (1021 * self.x + 12345) & 0xFFFFF
        return (self.x >> 4) % m


def _total(arr):
    s = 0
    for v in arr:
        s += v
    return s


def _no_alloc(a, rows, check):
    up = a.update
    for x in rows:  # warm up outside the lock
        up(x)
    before = check()
    err = None
    n = 0
    if micropython is not None:
        gc.collect()
        micropython.heap_lock()
    try:
        while n < N_UPDATES:
            up(rows[n % len(rows)])
            n += 1
    except MemoryError as e:
        err = e
    finally:
        if micropython is not None:
            micropython.heap_unlock()
    assert err is None, "update allocated on the heap after %d readings: %r" % (n, err)
    return before


def _rows(lo, hi, n=64):
    g = Lcg(3)
    rows = [(lo - 1,), (lo,), (hi - 1,), (hi,), (hi + 1000,), (-(1 << 29),)]
    while len(rows) < n:
        rows.append((lo + g.below(hi - lo),))
    return rows


def test_cdf_update_no_alloc_direct_and_long_division():
    # span * K below 2**30 (direct division), then above (long division over K's bits)
    for lo, hi, K, br in ((0, 4096, 1000, (10, 10, 10)), (-5, (1 << 22) - 5, 4096, (16, 16, 16))):
        a = device([cdf_cfg(lo, hi, K, br)], (1, 1))
        m = a.mechs[0]
        b1, b3 = _no_alloc(a, _rows(lo, hi), lambda: (_total(m.rows[0][0]), _total(m.rows[0][2])))
        assert _total(m.rows[0][0]) - b1 == N_UPDATES  # one count per reading on level 1
        assert _total(m.rows[0][2]) - b3 == N_UPDATES  # and one on the leaves
        assert m.counter_bytes() == 4 * (len(m.rows[0][0]) + len(m.rows[0][1]) + len(m.rows[0][2]))


def test_profile_update_no_alloc_and_cap():
    a = device([profile_cfg(100, 612, cap=9)], (1, 1))
    m = a.mechs[0]
    low = 0
    for v in m.ctr:
        assert v <= 9
        if v < 0:
            low += 1
    assert low > 0  # the noise is never clipped from below
    rows = _rows(100, 612)
    _no_alloc(a, rows, lambda: 0)
    for v in m.ctr:
        assert v <= 9
    assert m.ctr[rows[1][0] - 100] == 9  # id lo was seen far more than the cap


def test_hashed_id_update_no_alloc_and_bijection():
    a = device([profile_cfg(0, 256, cap=1000, bits=8)], (1, 1))
    m = a.mechs[0]
    before = array("i", m.ctr)
    for x in range(256):
        a.update((x,))
    for i in range(256):  # the Feistel permutation hits every counter once
        assert m.ctr[i] - before[i] == 1
    big = device([profile_cfg(0, 4096, cap=9, bits=28)], (1, 1))
    g = Lcg(4)
    rows = [((g.below(1 << 14) << 14) | g.below(1 << 14),) for _ in range(60)]
    rows += [(-1,), (1 << 28,), ((1 << 28) - 1,), (0,)]
    _no_alloc(big, rows, lambda: 0)


def test_two_mechanisms_each_read_their_column_without_alloc():
    a = device([cdf_cfg(name="t"), profile_cfg(name="id")], (2, 1), inputs=["id", "t"])
    c, p = a.mechs
    g = Lcg(9)
    rows = [(g.below(600), g.below(4096)) for _ in range(64)]
    b0 = _no_alloc(a, rows, lambda: _total(c.rows[0][0]))
    assert _total(c.rows[0][0]) - b0 == N_UPDATES


def test_cdf_bins_are_exact():
    # the leaf that moves is floor((x - lo) * K / span), by exact integer arithmetic
    lo, hi, K = -5, (1 << 22) - 5, 1000  # span * K above 2**30: the long division
    a = device([cdf_cfg(lo, hi, K, (10, 10, 10))], (1, 1))
    m = a.mechs[0]
    leaves = m.rows[0][2]
    span = hi - lo
    xs = [lo, lo + 1, hi - 1, hi, lo - 1]
    for j in (1, 17, 500, 998, 999):
        e = lo + (j * span + K - 1) // K  # first reading of bin j
        xs.append(e)
        xs.append(e - 1)
    for x in xs:
        before = array("i", leaves)
        a.update((x,))
        moved = [i for i in range(K) if leaves[i] != before[i]]
        want = 0 if x <= lo else K - 1 if x >= hi else (x - lo) * K // span
        assert moved == [want], (x, moved, want)


def test_long_division_stays_below_2_30():
    """CHECKER of CDF.update's long division at the largest integer span the
    config allows: every intermediate is below 3 * span < 2**30."""
    s = (1 << 28) - 1
    K = (1 << 24) - 3
    bits = []
    k = K
    while k:
        bits.append(k & 1)
        k >>= 1
    bits.reverse()
    for r in (0, 1, s // 3, s // 2, s - 1):
        j = rem = 0
        for bit in bits:
            j += j
            rem += rem
            if bit:
                rem += r
            assert rem < LIM and j < LIM, (r, rem, j)
            while rem >= s:
                rem -= s
                j += 1
        assert j == r * K // s


def test_bad_specs_refused():
    for bad in ({"bins": 1}, {"branching": [10, 10, 9]}, {"hi": [1 << 28]}, {"sigma": [3, 3]}):
        spec = cdf_cfg()
        spec.update(bad)
        try:
            device([spec], (1, 1))
        except agent.ConfigError:
            pass
        else:
            raise AssertionError("accepted %r" % (bad,))
    try:
        device([profile_cfg(0, 0)], (1, 1))
    except agent.ConfigError:
        pass
    else:
        raise AssertionError("an empty domain was accepted")


class HashSink:
    def __init__(self):
        self.h = hashlib.sha256()
        self.n = 0

    def __call__(self, buf, n):
        self.h.update(buf if n == len(buf) else memoryview(buf)[:n])
        self.n += n


def _digest(a):
    hs = HashSink()
    a.release(hs)
    return hs.n, hs.h.digest()


def test_release_vectors():
    a = device([cdf_cfg(name="t"), profile_cfg(name="id"), profile_cfg(0, 256, name="mac", bits=16)], (3, 1),
               seed=b"golden-sketches!")
    g = Lcg(5)
    for _ in range(2000):
        a.update((g.below(4200) - 50, g.below(600), g.below(1 << 16)))
    n, dg = _digest(a)
    assert _digest(a) == (n, dg)  # a resend is byte-identical
    assert (n, hexdigest(dg)) == GOLDEN_FRAME, (n, hexdigest(dg))


def hexdigest(b):
    out = ""
    for c in b:
        out += "%02x" % c
    return out


GOLDEN_FRAME = (7865, "fc1758b597c32b08572ba7657bba707ecea0998a8e6d31b5c7f69f2cd2cd8960")
