"""Portable tests of the device agent: CPython (pytest) and the MicroPython unix port.

Plain ``test_*`` functions with ``assert``; no pytest, typing or functools, so the
same file runs under ``tests/mp/run.py`` on MicroPython and under pytest through
``tests/test_portable_cpython.py``. Checks that can only be made on MicroPython
(``micropython.heap_lock()``, ``gc.mem_alloc()``) are skipped on CPython after the
portable part of the test has run.

Golden vectors below were computed once on CPython and pasted in; both runtimes
must reproduce them exactly (the DRBG byte order and the sampler's draw order
are a cross-runtime contract, see agent/dlap.py).
"""
import gc
import hashlib
from array import array

import agent
from agent.dlap import discrete_laplace
from agent.hashing import LIMB_MASK, P, derive_params, hash_id
from agent.privhp.build import MAX_DEPTH
from firmware_shims.drbg import seeded_source
from firmware_shims.hmac256 import HMAC256, hmac_sha256

try:
    import micropython
except ImportError:  # CPython: allocation checks need MicroPython
    micropython = None

LIM = 1 << 30  # MCU small ints are 31-bit signed: every hot-path value must stay below this
LO, HI = 0, 4096
N_UPDATES = 10000


# ------------------------------------------------------------------ configs
def make_cfg(sketch="cms", r=16, k=64, w=256, j=2, lo=None, hi=None, eps=(1, 2), clamp=True):
    """One-mechanism PrivHP config whose budgets add up to epsilon exactly.

    sum(sigma) + clamp_p must equal epsilon * q, so everything is computed from
    integers: q is a power of two, clamp_p a fixed share, the rest split evenly
    over the r + 1 levels with the remainder on the last level.
    """
    if lo is None:
        lo = [LO, LO]
    if hi is None:
        hi = [HI, HI]
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
    names = ["c%d" % i for i in range(len(lo))]
    return {
        "format": 1, "epsilon": [eps[0], eps[1]], "relation": "add-remove",
        "mechanisms": [{
            "kind": "privhp", "names": names, "lo": lo, "hi": hi,
            "r": r, "k": k, "w": w, "j": j, "sketch": sketch,
            "hash_seed": "portable-tests", "q": q, "sigma": sigma, "clamp_p": clamp_p,
        }],
    }


def cfg_cms():
    return make_cfg()


def cfg_cs():
    return make_cfg(sketch="cs", j=3)


def cfg_pmm():
    # k >= 2**r: every level is an exact tree level, no sketches
    return make_cfg(r=10, k=1024)


class Lcg:
    """Tiny deterministic PRNG for test streams: x -> (1021 x + 12345) mod 2**20.

    1021 * (2**20 - 1) + 12345 < 2**30, so it never leaves MCU small ints, and
    it gives the same stream on every runtime (unlike ``random``).
    """

    def __init__(self, seed):
        self.x = seed & 0xFFFFF

    def next(self):
        self.x = (1021 * self.x + 12345) & 0xFFFFF
        return self.x

    def below(self, m):
        return (self.next() >> 4) % m  # high bits; m <= 65536


def boundary_rows(lo, hi):
    """64 integer readings: random in-box ones plus every boundary case.

    Below lo, == lo, == hi, above hi, and extreme out-of-range values (still
    small ints on an MCU). Returns (rows, number of rows outside the box).
    """
    edge = (lo - 1, lo, lo + 1, hi - 1, hi, hi + 1, lo - 100000, hi + 100000,
            -(1 << 29), (1 << 29) - 1)
    rows = []
    for a in edge:
        for b in (lo, hi, a):
            rows.append((a, b))
    g = Lcg(7)
    while len(rows) < 64:
        rows.append((lo + g.below(hi - lo), lo + g.below(hi - lo)))
    outside = 0
    for x in rows:
        if x[0] < lo or x[0] > hi or x[1] < lo or x[1] > hi:
            outside += 1
    return rows, outside


# ----------------------------------------------- update allocates nothing
def _updates_allocate_nothing(cfg):
    a = agent.Agent(cfg, seed=b"heap-lock")
    m = a.mechs[0]
    rows, outside = boundary_rows(LO, HI)
    up = a.update
    for x in rows:  # warm up outside the lock
        up(x)
    t0 = m.tree_rows[0][0]
    c0 = m.clamp
    sk0 = _digest_all(m.sketch_rows) if m.sketch_rows else b""
    err = None
    n = 0
    if micropython is not None:
        gc.collect()
        micropython.heap_lock()
    try:
        while n < N_UPDATES:
            up(rows[n & 63])
            n += 1
    except MemoryError as e:
        err = e
    finally:
        if micropython is not None:
            micropython.heap_unlock()
    assert err is None, "update allocated on the heap after %d readings: %r" % (n, err)
    # the counters moved: every reading counts at the root, out-of-box ones in clamp
    assert m.tree_rows[0][0] - t0 == N_UPDATES, (m.tree_rows[0][0], t0)
    per_pass = outside * (N_UPDATES // 64) + _outside_prefix(rows, LO, HI, N_UPDATES % 64)
    assert m.clamp - c0 == per_pass, (m.clamp - c0, per_pass)
    if m.sketch_rows:
        assert _digest_all(m.sketch_rows) != sk0
    return m


def _outside_prefix(rows, lo, hi, n):
    c = 0
    for x in rows[:n]:
        if x[0] < lo or x[0] > hi or x[1] < lo or x[1] > hi:
            c += 1
    return c


def test_update_no_alloc_cms():
    m = _updates_allocate_nothing(cfg_cms())
    assert m.sketch == "cms" and m.L == 6 and _cells(m.sketch_rows) == 10 * 2 * 256


def test_update_no_alloc_count_sketch():
    m = _updates_allocate_nothing(cfg_cs())
    assert m.sketch == "cs" and m.j == 3 and _cells(m.sketch_rows) == 10 * 3 * 256


def test_update_no_alloc_pmm():
    m = _updates_allocate_nothing(cfg_pmm())
    assert m.L == m.r == 10 and not m.sketch_rows and _cells(m.tree_rows) == 2047


# --------------------------------------------------------------- release
def _digest(buf):
    """SHA-256 of any buffer (array, bytearray, bytes) without copying it."""
    return hashlib.sha256(buf).digest()


def _digest_all(arrays):
    """SHA-256 over a list of counter arrays, without copying them."""
    h = hashlib.sha256()
    for buf in arrays:
        h.update(buf)
    return h.digest()


def _cells(arrays):
    n = 0
    for a in arrays:
        n += len(a)
    return n


def _fed_agent(cfg, seed, n=3000, stream=11, key=None):
    a = agent.Agent(cfg, seed=seed, key=key)
    g = Lcg(stream)
    span = HI - LO + 64
    for _ in range(n):
        a.update((LO - 32 + g.below(span), LO - 32 + g.below(span)))
    return a


class HashSink:
    """``sink(buf, n)`` feeding a running SHA-256; counts bytes."""

    def __init__(self):
        self.h = hashlib.sha256()
        self.n = 0

    def __call__(self, buf, n):
        # the encoder's header buffers are exact-size; only short counter chunks need a view
        self.h.update(buf if n == len(buf) else memoryview(buf)[:n])
        self.n += n


def _null_sink(buf, n):
    pass


def test_release_streaming_allocates_little():
    cfg = cfg_cms()
    # warm-up release on a twin: first-call costs, and the frame size
    twin = _fed_agent(cfg, b"stream-seed")
    size = twin.release(_null_sink)
    twin = None
    gc.collect()
    a = _fed_agent(cfg, b"stream-seed")
    # a transport-like sink: copy into a preallocated staging buffer, hash it when full
    stage = bytearray(256)
    fill = array("i", [0, 0])  # bytes in stage, bytes in total
    sh = hashlib.sha256()

    def copy_sink(buf, n):  # allocation-free: byte loop, exact-size buffer to the hash
        f = fill[0]
        i = 0
        while i < n:
            stage[f] = buf[i]
            f += 1
            i += 1
            if f == 256:
                sh.update(stage)
                f = 0
        fill[0] = f
        fill[1] += n

    hs = HashSink()
    measure = hasattr(gc, "mem_alloc")
    grew = grew_hash = -1
    gc.collect()
    if measure:
        gc.disable()
        a0 = gc.mem_alloc()
    try:
        total = a.release(copy_sink)  # the first release of this agent
        if measure:
            a1 = gc.mem_alloc()
            total2 = a.release(hs)
            a2 = gc.mem_alloc()
            grew, grew_hash = a1 - a0, a2 - a1
        else:
            total2 = a.release(hs)
    finally:
        gc.enable()
    sh.update(memoryview(stage)[:fill[0]])
    assert total == fill[1] == total2 == hs.n == size, (total, fill[1], total2, hs.n, size)
    assert sh.digest() == hs.h.digest()
    if measure:
        print("release of %d B: copy sink allocated %d B, hash sink %d B" % (total, grew, grew_hash))
        assert grew <= 1024, "streaming release allocated %d B (> 1024) for a %d B frame" % (grew, total)
        assert grew_hash <= 1024, "hash-sink release allocated %d B (> 1024)" % grew_hash


def test_release_stream_equals_bytes():
    a = _fed_agent(cfg_pmm(), b"eq-seed")
    hs = HashSink()
    n = a.release(hs)
    f = a.release()
    assert len(f) == n and _digest(f) == hs.h.digest()


def _release_digest(a):
    hs = HashSink()
    a.release(hs)
    return hs.h.digest()


def test_release_deterministic():
    # bytes API on a small config: equal bytes, twice
    a = _fed_agent(cfg_pmm(), b"det-seed")
    f1 = a.release()
    assert a.release() == f1  # a second release is free and identical
    a = None
    d1 = _digest(f1)
    f1 = None
    gc.collect()
    b = _fed_agent(cfg_pmm(), b"det-seed")
    assert _digest(b.release()) == d1, "same seed + stream gave different bytes"
    b = None
    gc.collect()
    # the device config, compared through streamed digests (one agent alive at a time)
    cfg = cfg_cms()
    a = _fed_agent(cfg, b"det-seed")
    d1 = _release_digest(a)
    assert _release_digest(a) == d1
    try:
        a.update((1, 2))
    except agent.SealedError:
        pass
    else:
        raise AssertionError("update after release must raise SealedError")
    try:
        a.update_many([(1, 2)])
    except agent.SealedError:
        pass
    else:
        raise AssertionError("update_many after release must raise SealedError")
    a = None
    gc.collect()
    assert _release_digest(_fed_agent(cfg, b"det-seed")) == d1, "same seed + stream, different bytes"
    gc.collect()
    assert _release_digest(_fed_agent(cfg, b"det-seed-2")) != d1, "the seed did not change the noise"
    gc.collect()
    assert _release_digest(_fed_agent(cfg, b"det-seed", stream=12)) != d1, "the stream was ignored"


def test_release_tag_covers_frame():
    key = b"k" * 32
    a = _fed_agent(cfg_pmm(), b"tag-seed", n=10, key=key)
    f = a.release()
    assert a.release() == f
    # frame = [magic, id, bin32 payload, bin8(32) tag]; the tag covers all before it
    assert f[-34] == 0xC4 and f[-33] == 32
    assert f[-32:] == hmac_sha256(key, memoryview(f)[:-34])


# ----------------------------------------------------------- known answers
BELOW_SEED = b"edgesynth-kat-below"
BELOW_MODS = (2, 3, 7, 10, 255, 256, 257, 1000, 4096, 32749, 65536, 65537, 1000003, 16777216)
BELOW_KAT = (0, 1, 6, 6, 44, 235, 140, 961, 3517, 8163, 65393, 8257, 381497, 9325852)
BELOW_BYTES = 25

DLAP_SEED = b"edgesynth-kat-dlap"
DLAP_KAT = (
    ((1, 1), (0, -3, 0, 1, -2, 3, 1, 0)),
    ((10, 1), (-5, 1, 10, 2, 13, -17, 18, -1)),
    ((3, 7), (0, 0, 0, 0, 0, 0, 1, 0)),
    ((1048576, 61680), (6, -34, 4, 33, 27, 3, 4, -11)),
    ((2, 1), (2, -5, 1, 3, 3, 5, 1, 0)),
)
DLAP_BYTES = 417

HASH_SEED = b"edgesynth-kat-hash"
HASH_PARAMS = (6588, 20658, 11419, 29728, 15267, 32277, 11556, 6515)
HASH_IDS = (0, 1, 2, 16383, 16384, 16385, (1 << 28) - 1, 1 << 28, (1 << 30) - 1)
HASH_KAT0 = (6588, 27246, 15155, 18436, 18007, 5916, 876, 3567, 24562)
HASH_KAT4 = (15267, 14795, 14323, 11255, 26823, 26351, 11234, 21782, 30779)


def test_kat_drbg_below():
    rng = seeded_source(BELOW_SEED)
    got = tuple([rng.below(m) for m in BELOW_MODS])
    assert got == BELOW_KAT, got
    assert rng.consumed == BELOW_BYTES, rng.consumed
    # a str seed is the same seed
    rng = seeded_source(BELOW_SEED.decode())
    assert tuple([rng.below(m) for m in BELOW_MODS]) == BELOW_KAT


def test_kat_discrete_laplace():
    rng = seeded_source(DLAP_SEED)
    for scale, want in DLAP_KAT:
        got = tuple([discrete_laplace(rng, scale[0], scale[1]) for _ in range(8)])
        assert got == want, (scale, got)
    assert rng.consumed == DLAP_BYTES, rng.consumed


def test_kat_hash_id():
    p = derive_params(HASH_SEED, 8)
    assert tuple(p) == HASH_PARAMS, p
    assert tuple([hash_id(p, 0, i) for i in HASH_IDS]) == HASH_KAT0
    assert tuple([hash_id(p, 4, i) for i in HASH_IDS]) == HASH_KAT4


def _hex(b):
    return "".join(["%02x" % c for c in b])


def test_kat_hmac_rfc4231():
    # RFC 4231 section 4.2 (test case 1) and 4.3 (test case 2), HMAC-SHA-256
    tc1 = "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
    tc2 = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    assert _hex(hmac_sha256(b"\x0b" * 20, b"Hi There")) == tc1
    assert _hex(hmac_sha256(b"Jefe", b"what do ya want for nothing?")) == tc2
    m = HMAC256(b"Jefe")  # incremental API, reusable
    for _ in range(2):
        m.start()
        m.update(b"what do ya ")
        m.update(bytearray(b"want for nothing?"))
        assert _hex(m.finish()) == tc2


# ------------------------------------------------------------ integer safety
def test_int_bounds_analytic():
    # node ids 2**l + v < 2**(l+1) <= 2**(MAX_DEPTH+1)
    assert (1 << (MAX_DEPTH + 1)) - 1 < LIM
    # worst-case multilinear hash sum: b + a1*x0 + a2*x1 + a3*x2 with x0, x1 <= LIMB_MASK
    # and x2 = node >> 28 <= 3 for node < 2**30
    x2max = (LIM - 1) >> 28
    assert (P - 1) * (1 + LIMB_MASK + LIMB_MASK + x2max) < LIM
    for mk in (cfg_cms, cfg_cs, cfg_pmm):
        m = None  # one state alive at a time
        gc.collect()
        m = agent.Agent(mk(), seed=b"bounds").mechs[0]
        assert (1 << (m.r + 1)) - 1 < LIM  # every node id of this config
        for v in m.hash:
            assert 0 <= v < P, v
        for s in m.span:  # quantisation: rem <= span, so 2 * rem <= 2 * span
            assert 2 * s < LIM, s
        for arr in m.counters():
            for v in arr:  # noise leaves counters far from the 31-bit edge
                assert -(1 << 20) < v < (1 << 20), v


def _mirror_update(m, x, tree, sk, step):
    """CHECKER, not a second implementation: re-derives the cells that
    ``PrivHP.update`` touches for reading ``x``, asserting that every
    intermediate of the per-level arithmetic is a 31-bit small int (< 2**30),
    and adds ``step`` times the device's increment to those cells of
    ``tree``/``sk``. The caller uses step -1 on the device's own tables to
    prove the checked arithmetic is the arithmetic the product ran.
    Returns 1 if the reading was clamped."""
    d, span, lo, hi = m.d, m.span, m.lo, m.hi
    rem = [0] * d
    clamped = 0
    for i in range(d):
        if x[i] > hi[i]:
            rem[i] = span[i]
            clamped = 1
        elif x[i] >= lo[i]:
            rem[i] = x[i] - lo[i]
        else:
            clamped = 1
        assert 0 <= rem[i] < LIM
    tree[0][0] += step
    cs = m.sketch == "cs"
    per = 8 if cs else 4
    prm, j, w = m.hash, m.j, m.w
    v = 0
    for lvl in range(1, m.r + 1):
        i = (lvl - 1) % d
        t = rem[i] + rem[i]
        assert t < LIM, ("rem doubling", lvl, t)
        if t >= span[i]:
            rem[i] = t - span[i]
            v = v + v + 1
        else:
            rem[i] = t
            v = v + v
        node = v + (1 << lvl)
        assert 0 <= rem[i] < LIM and node < LIM, (lvl, rem[i], node)
        if lvl <= m.L:
            tree[lvl][v] += step
            continue
        x0, x1, x2 = node & 16383, (node >> 14) & 16383, node >> 28
        for row in range(j):
            pb = ((lvl - m.L - 1) * j + row) * per
            h = _mirror_hash(prm, pb, x0, x1, x2)
            tab = sk[(lvl - m.L - 1) * j + row]
            idx = h & (w - 1)
            if cs:
                g = _mirror_hash(prm, pb + 4, x0, x1, x2)
                tab[idx] += step * (1 - ((g & 1) << 1))
            else:
                tab[idx] += step
    return clamped


def _mirror_hash(prm, pb, x0, x1, x2):
    # b + a1*x0 + a2*x1 + a3*x2, left to right as the device evaluates it
    s = prm[pb]
    p = prm[pb + 1] * x0
    assert p < LIM, ("hash product", p)
    s += p
    assert s < LIM, ("hash sum", s)
    p = prm[pb + 2] * x1
    assert p < LIM, ("hash product", p)
    s += p
    assert s < LIM, ("hash sum", s)
    p = prm[pb + 3] * x2
    assert p < LIM, ("hash product", p)
    s += p
    assert s < LIM, ("hash sum", s)
    return s % P


def _mirror_check(cfg, n, seed):
    """Feed ``n`` readings to the device; after each one the mirror takes back
    (``step`` = -1) the increments it computed. The counters must end where the
    noise left them, so mirror and device touched the same cells: no copy of the
    tables is needed, which keeps this test inside a 64 KB heap."""
    a = agent.Agent(cfg, seed=b"mirror")
    m = a.mechs[0]
    t0, s0, c0 = _digest_all(m.tree_rows), _digest_all(m.sketch_rows), m.clamp
    g = Lcg(seed)
    lo, hi = LO - 200, HI + 200
    moved = 0
    for k in range(n):
        if k % 97 == 0:  # boundaries, regularly
            x = ((LO, HI, LO - 1, HI + 1)[k & 3], (HI, LO, HI + 1, LO - 1)[(k >> 2) & 3])
        else:
            x = (lo + g.below(hi - lo), lo + g.below(hi - lo))
        a.update(x)
        if k == 0:
            moved = _digest_all(m.sketch_rows) != s0  # the update did touch the sketches
        m.clamp -= _mirror_update(m, x, m.tree_rows, m.sketch_rows, -1)
    assert moved
    assert _digest_all(m.tree_rows) == t0, "mirror disagrees with the device tree"
    assert _digest_all(m.sketch_rows) == s0, "mirror disagrees with the device sketches"
    assert m.clamp == c0


def test_int_mirror_cms():
    _mirror_check(cfg_cms(), 20000, 3)


def test_int_mirror_count_sketch():
    _mirror_check(cfg_cs(), 20000, 5)


def test_config_budget_must_be_exact():
    cfg = cfg_cms()
    agent.Agent(cfg, seed=b"ok")
    cfg["mechanisms"][0]["sigma"][0] += 1
    try:
        agent.Agent(cfg, seed=b"off-by-one")
    except agent.ConfigError:
        pass
    else:
        raise AssertionError("a budget off by 1/q must be rejected")
