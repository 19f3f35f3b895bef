"""The C core (agent/c) through cffi: unit tests of each C piece against the
Python implementation it mirrors, and golden vectors: the same config, seed and
readings give byte-identical frames on the cpython, native and micropython
runtimes (the qemu runtime: tests/test_firmware.py)."""
import hashlib
import hmac
import shutil
from fractions import Fraction

import numpy as np
import pytest

from edgesynth import agent, ccore
from edgesynth.agent.dlap import discrete_laplace
from edgesynth.agent.errors import ConfigError, SealedError
from edgesynth.agent.hashing import derive_params
from edgesynth.config import with_names
from edgesynth.firmware_shims.drbg import seeded_source
from edgesynth.mechanisms.cdf.plan import plan_cdf
from edgesynth.mechanisms.profile.plan import plan_profile
from edgesynth.runtimes import native
from edgesynth.runtimes.cpython import run_cpython
from edgesynth.runtimes.simulate import as_readings
from edgesynth.runtimes.vectorized import run_numpy
from tests.conftest import privhp_config
from tests.native_cases import cases

pytestmark = pytest.mark.skipif(not native.available(),
                                reason="native core not built (no C compiler at install?)")
CASES = cases()
IDS = [c[0] for c in CASES]


@pytest.fixture(scope="module")
def ffi_lib():
    from edgesynth.runtimes._es_native import ffi, lib
    return ffi, lib


@pytest.mark.parametrize("n", [0, 1, 55, 56, 63, 64, 65, 127, 128, 1000])
def test_sha256_matches_hashlib(ffi_lib, n):
    ffi, lib = ffi_lib
    data = bytes((i * 7 + n) & 0xFF for i in range(n))
    c = ffi.new("es_sha256_t *")
    out = ffi.new("uint8_t[32]")
    lib.es_sha256_init(c)
    lib.es_sha256_update(c, data[:n // 3], n // 3)      # two updates: the buffering path
    lib.es_sha256_update(c, data[n // 3:], n - n // 3)
    lib.es_sha256_final(c, out)
    assert bytes(out) == hashlib.sha256(data).digest()


@pytest.mark.parametrize("klen", [0, 1, 32, 64, 65, 200])
def test_hmac_matches_stdlib(ffi_lib, klen):
    ffi, lib = ffi_lib
    key = bytes((3 * i + 1) & 0xFF for i in range(klen))
    msg = b"frame bytes " * 11
    h = ffi.new("es_hmac_t *")
    out = ffi.new("uint8_t[32]")
    lib.es_hmac_key(h, key, klen)
    lib.es_hmac_start(h)
    lib.es_hmac_update(h, msg, len(msg))
    lib.es_hmac_finish(h, out)
    assert bytes(out) == hmac.new(key, msg, hashlib.sha256).digest()


@pytest.mark.parametrize("seed", [b"", b"short", b"exactly-16-bytes", b"a much longer seed of many bytes"])
def test_below_stream_matches_byte_source(ffi_lib, seed):
    """es_below draws the same numbers from the same DRBG bytes, for m across
    every byte width up to 2**64 - 1 (the rejection thresholds differ per m)."""
    ffi, lib = ffi_lib
    d = ffi.new("es_drbg_t *")
    lib.es_drbg_seeded(d, seed, len(seed))
    src = seeded_source(seed)
    ms = [1, 2, 3, 255, 256, 257, 1000, 65535, 65537, 10 ** 9, 2 ** 40 + 3, 2 ** 56 + 1,
          2 ** 63 + 5, 2 ** 64 - 1] * 20
    assert [lib.es_below(d, m) for m in ms] == [src.below(m) for m in ms]
    assert d.err == 0


@pytest.mark.parametrize("num,den", [(1, 1), (3, 2), (100, 7), (1 << 20, 3), (2 ** 53, 2 ** 31 + 1)])
def test_dlap_matches_python_sampler(ffi_lib, num, den):
    ffi, lib = ffi_lib
    d = ffi.new("es_drbg_t *")
    lib.es_drbg_seeded(d, b"dlap-test", 9)
    src = seeded_source(b"dlap-test")
    got = [lib.es_dlap(d, num, den) for _ in range(500)]
    assert got == [discrete_laplace(src, num, den) for _ in range(500)]
    assert d.err == 0
    assert len(set(got)) > 5  # a real spread, not a constant


def test_hash_params_match_derive_params(ffi_lib):
    cfg = privhp_config(d=2, r=16, k=64, w=256, j=3, sketch="cs", hash_seed="hash-seed-é")
    a = native.NativeAgent(cfg, seed=b"x")
    st = a.mechs[0].state
    n = (16 - 6) * 3 * 8
    assert list(st.hash[0:n]) == derive_params("hash-seed-é".encode(), n)


def _frames(cfg, data, seed, key):
    cfg = with_names(cfg, ["c%d" % i for i in range(data.shape[1])])
    rows = as_readings(data, cfg)
    kw = dict(seed=seed, device_id="dev-native", epoch=5, key=key)
    py = bytes(run_cpython(cfg, rows, **kw))
    assert bytes(run_numpy(cfg, data, **kw)) == py
    batch = native.run_native(cfg, data, block=777, **kw)   # several batch calls
    one = native.NativeAgent(cfg, **kw)
    for x in rows:
        one.update(x)
    return cfg, rows, py, batch, one.release()


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_native_frames_identical_to_cpython(case):
    name, cfg, data, seed, key = case
    _, _, py, batch, single = _frames(cfg, data, seed, key)
    assert batch == py
    assert single == py
    assert (py[-34:-32] == b"\xc4\x20") == (key is not None)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_micropython_frames_identical_to_native(case):
    if shutil.which("micropython") is None:
        pytest.skip("no `micropython` on PATH (pip install 'edgesynth[test]')")
    from edgesynth.runtimes.micropython import run_micropython
    name, cfg, data, seed, key = case
    cfg, rows, py, batch, _ = _frames(cfg, data, seed, key)
    mp = run_micropython(cfg, rows, 256 * 1024, seed=seed, device_id="dev-native", epoch=5, key=key)
    assert bytes(mp) == batch == py


def test_seed_changes_noise_and_release_repeats():
    cfg = privhp_config(d=2, r=10, k=8, w=32, j=2, lo=[0, 0], hi=[100, 100])
    a = native.NativeAgent(cfg, seed=b"one")
    b = native.NativeAgent(cfg, seed=b"two")
    fa, fb = a.release(), b.release()
    assert fa != fb and len(fa) == len(fb)
    assert a.release() == fa               # a resend is byte-identical
    with pytest.raises(SealedError):
        a.update((1, 2))
    with pytest.raises(SealedError):
        a.update_rows(np.zeros((3, 2)))


def test_platform_entropy_gives_fresh_noise():
    cfg = privhp_config(d=1, r=6, k=4, w=16, j=1, lo=[0], hi=[10])
    assert native.NativeAgent(cfg).release() != native.NativeAgent(cfg).release()


def _health_blocks():
    """Blocks on both sides of every start-up health test: the cases the tests
    name, then 4000 drawn near their edges (few values, periods, steps), fixed seed."""
    import random
    r = random.Random(20261125)
    good = bytes(r.randrange(256) for _ in range(48))
    out = [b"", bytes(7), bytes(16), bytes(48), good, good[:8], good[:7], bytes(range(16)),
           bytes(range(5, 250, 7)), b"\x01\x02" * 8, bytes([9, 1, 200, 3]) * 4, good[:8] * 6, good[:8] * 2 + good[:3]]
    for _ in range(4000):
        n = r.randrange(0, 25)
        kind = r.randrange(4)
        if kind == 0:  # a small alphabet
            alpha = [r.randrange(256) for _ in range(r.randrange(1, 7))]
            b = [r.choice(alpha) for _ in range(n)]
        elif kind == 1:  # periodic, period 1..9, maybe broken at one place
            pat = [r.randrange(256) for _ in range(r.randrange(1, 10))]
            b = [pat[i % len(pat)] for i in range(n)]
            if b and r.random() < 0.3:
                b[r.randrange(n)] ^= 1
        elif kind == 2:  # steps from a small set (a counter, two interleaved, ...)
            steps = [r.randrange(256) for _ in range(r.randrange(1, 6))]
            b = [r.randrange(256)]
            for _ in range(n - 1):
                b.append((b[-1] + r.choice(steps)) & 255)
            b = b[:n]
        else:
            b = [r.randrange(256) for _ in range(n)]
        out.append(bytes(b))
    return out


def test_c_health_tests_refuse_exactly_what_python_refuses(ffi_lib):
    """es_entropy_health against firmware_shims/entropy.py health_check, block by
    block, alone and after a previous block (the same one, or another)."""
    from edgesynth.firmware_shims.drbg import EntropyError
    from edgesynth.firmware_shims.entropy import health_check
    ffi, lib = ffi_lib

    def python(block, previous):
        try:
            health_check(block, previous)
            return 0
        except EntropyError:
            return native.ES_E_ENTROPY
    blocks = _health_blocks()
    refused = 0
    for i, b in enumerate(blocks):
        for prev in (None, b, blocks[i - 1] if len(blocks[i - 1]) == len(b) else None):
            c = lib.es_entropy_health(b, len(b), ffi.NULL if prev is None else prev)
            assert c == python(b, prev), (b.hex(), prev)
            refused += c != 0
    assert 2000 < refused < 10000  # both sides of the tests are exercised


def test_c_drbg_refuses_what_the_python_agent_refuses(ffi_lib):
    """es_drbg_init runs the health tests: 16 zero bytes (and a counter) no longer
    seed noise, and the refused DRBG draws nothing; a seed is not tested."""
    ffi, lib = ffi_lib
    d = ffi.new("es_drbg_t *")
    for bad in (bytes(16), bytes(range(48))):
        assert lib.es_drbg_init(d, bad, len(bad), ffi.NULL, 0) == native.ES_E_ENTROPY
        assert lib.es_below(d, 1000) == 0 and d.err == native.ES_E_ENTROPY
    assert lib.es_drbg_seeded(d, bytes(16), 16) == native.ES_OK  # tests and simulation only


def _core_init(ffi, lib, device_id, rng=None):
    """es_agent_init straight from C (no host check before it) on a fresh
    PrivHP state, for ``device_id`` (bytes) and ``rng`` (default: seeded):
    (status, the es_agent_t, the state, the cffi objects to keep alive)."""
    p = native.core_params(privhp_config(d=1, r=6, k=4, w=16, j=1, lo=[0], hi=[10]))
    keep = []

    def new(ctype, init):
        keep.append(ffi.new(ctype, init))
        return keep[-1]
    m = native._Mech(p["mechs"][0], p["factor"], new)
    if rng is None:
        rng = new("es_drbg_t *", None)
        lib.es_drbg_seeded(rng, b"id", 2)
    a = new("es_agent_t *", None)
    st = lib.es_agent_init(a, new("es_mech_t *[]", [m.base]), 1, p["factor"], 1, 1, device_id,
                           len(device_id), 0, 0, ffi.NULL, 0, rng)
    return st, a, m, keep


def _device_ids():
    """Edge cases of the device-id rule (1..64 of A-Z a-z 0-9 . _ - :), then every single byte."""
    ids = [b"", b"a" * 64, b"a" * 65, b"a b", b" ", b"dev\n", b"\n", b"a\rb", b"a/b", b"a\\b", b"a\x00b",
           "caf\u00e9".encode(), "\u00e9".encode(), b"\xff", b"a,b", b"a;b", b"a@b", b"a%b", b"a=b", b"a+b",
           b"Az09", b"dev-01:a.b_c"]
    ids += [c + b"x" + c for c in (b".", b"_", b"-", b":")]
    return ids + [bytes([c]) for c in range(256)]


def test_c_core_refuses_exactly_the_device_ids_python_refuses(ffi_lib):
    """es_agent_init applies agent/device.py device_id_bytes's rule: an id the
    host would refuse in a frame's envelope gets ES_E_CONFIG and a sealed state,
    so C firmware cannot emit frames the host refuses; accepted ones noise the state."""
    ffi, lib = ffi_lib
    from edgesynth.agent.wire import device_id_bytes
    refused = 0
    for dev in _device_ids():
        try:
            device_id_bytes(dev)
            want = native.ES_OK
        except ConfigError:
            want = native.ES_E_CONFIG
        st, _, m, _ = _core_init(ffi, lib, dev)
        assert st == want, dev
        assert bool(m.base.sealed) == (want != native.ES_OK), dev
        refused += st != native.ES_OK
    assert refused == 19 + 256 - 66  # the 19 bad edge cases, and 190 single bytes


def test_every_runtime_refuses_a_bad_device_id_alike():
    """The host checks the id first (agent.wire.device_id_bytes), with one message on the
    cpython, native and qemu runtimes; the qemu run is refused before any build."""
    from edgesynth.errors import InputError
    from edgesynth.runtimes.qemu import run_qemu
    cfg = with_names(privhp_config(d=1, r=6, k=4, w=16, j=1, lo=[0], hi=[10]), ["x0"])
    data = np.zeros((3, 1), dtype=np.int64)
    for dev in ("", "a" * 65, "dev\nack x stored", "a/b", "caf\u00e9"):
        msgs = set()
        for run in (run_cpython, native.run_native, run_qemu):
            with pytest.raises(InputError, match="invalid device config: device id") as e:
                run(cfg, as_readings(data, cfg) if run is run_cpython else data, seed=b"x", device_id=dev)
            msgs.add(str(e.value))
        assert len(msgs) == 1, msgs


def test_an_unseeded_drbg_draws_no_noise(ffi_lib):
    """A zeroed es_drbg_t (firmware that never called es_drbg_platform) would
    give fixed, public noise: no draw comes from it, and es_agent_init refuses
    it (ES_E_ENTROPY), sealing the state, which releases nothing. A DRBG that
    es_agent_init already consumed (retired) is refused the same way."""
    ffi, lib = ffi_lib
    zero = ffi.new("es_drbg_t *")
    assert lib.es_below(zero, 1000) == 0 and zero.err == native.ES_E_ENTROPY
    used = ffi.new("es_drbg_t *")
    lib.es_drbg_seeded(used, b"used", 4)
    assert _core_init(ffi, lib, b"dev", used)[0] == native.ES_OK
    for rng in (ffi.new("es_drbg_t *"), used):
        st, a, m, _ = _core_init(ffi, lib, b"dev", rng)
        assert st == native.ES_E_ENTROPY and m.base.sealed and a.sealed
        out = ffi.new("uint8_t[]", 4096)
        assert lib.es_agent_release_buf(a, out, 4096) == -9 and bytes(out) == bytes(4096)  # ES_E_NOISE
        with pytest.raises(SealedError):
            m.count(*m.reading((3,)), 1)


def test_a_full_state_refuses_release():
    """A reading refused for ES_E_FULL (2**31 - 2**29 readings) makes the state
    unreleasable: a frame of the first readings only is not private."""
    cfg = privhp_config(d=1, r=6, k=4, w=16, j=1, lo=[0], hi=[10])
    a = native.NativeAgent(cfg, seed=b"x")
    a.mechs[0].state.items = (1 << 31) - 1 - (1 << 29) - 1  # ES_MAX_ITEMS - 1: skips 1.6e9 readings
    a.update((3,))
    with pytest.raises(OverflowError):
        a.update((3,))
    with pytest.raises(OverflowError, match="cannot be released"):
        a.release()


def test_bad_configs_raise_config_error():
    cfg = privhp_config(d=1, r=6, k=4, w=16, j=1, lo=[0], hi=[10])
    bad = privhp_config(d=1, r=6, k=4, w=16, j=1, lo=[0], hi=[10])
    bad["mechanisms"][0]["w"] = 24
    with pytest.raises(ConfigError, match="power of two"):
        native.NativeAgent(bad, seed=b"x")
    bad = privhp_config(d=1, r=6, k=4, w=16, j=1, lo=[2 ** 60], hi=[2 ** 60 + 10])
    with pytest.raises(ConfigError, match="2\\*\\*53"):
        native.NativeAgent(bad, seed=b"x")
    bad = dict(cfg, epsilon=[2, 1])
    with pytest.raises(ConfigError, match="add up"):
        native.NativeAgent(bad, seed=b"x")
    two = dict(cfg, mechanisms=cfg["mechanisms"] * 2)   # budgets now add up to 2 epsilon
    with pytest.raises(ConfigError, match="add up"):
        native.NativeAgent(two, seed=b"x")
    bad = dict(cfg, mechanisms=[dict(cfg["mechanisms"][0], kind="histogram")])
    with pytest.raises(ConfigError, match="kind 'histogram'"):
        native.NativeAgent(bad, seed=b"x")
    bad = plan_cdf([0], [100], Fraction(1), 64)
    bad["mechanisms"][0]["branching"] = [4, 4]
    with pytest.raises(ConfigError, match="fewer than 64 bins"):
        native.NativeAgent(bad, seed=b"x")
    bad = plan_profile(0, 100, 5, Fraction(1))
    bad["mechanisms"][0]["sample"] = {"bits": 5, "seed": "s"}
    with pytest.raises(ConfigError, match="even"):
        native.NativeAgent(bad, seed=b"x")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_device_memory_is_exactly_the_counters(case):
    """The C core's counter memory (es_<kind>_mem_size, checked against the
    host's count when each state is built) is the Python agent's counter bytes,
    plus PrivHP's hash parameters padded to 4 bytes; the rest is the fixed
    state structs (tests/test_firmware.py measures them)."""
    name, cfg, data, seed, key = case
    cfg = with_names(cfg, ["c%d" % i for i in range(data.shape[1])])
    p = native.core_params(cfg)
    a = agent.Agent(cfg, seed=b"x")
    for m, mp in zip(a.mechs, p["mechs"]):
        pad = (2 * len(m.hash) + 3) // 4 * 4 - 2 * len(m.hash) if m.kind == "privhp" else 0
        assert mp["mem_bytes"] == m.counter_bytes() + pad
    assert native.NativeAgent(cfg, seed=b"x")  # the C core agrees on every size (ConfigError if not)


def test_sketch_scale_cap_refused_like_python():
    """A CDF level or profile share whose noise scale exceeds 2**22 is refused
    by the C core as by the Python agent (agent/spec.py check_scale)."""
    cdf = plan_cdf([0], [100], Fraction(1), 16)
    m = cdf["mechanisms"][0]
    m["q"] <<= 23
    m["sigma"] = [1] + [s << 23 for s in m["sigma"][1:]]
    e = Fraction(sum(m["sigma"]), m["q"])
    cdf["epsilon"] = [e.numerator, e.denominator]
    prof = plan_profile(0, 10, 5, Fraction(1))  # the planner refuses such an epsilon: set by hand
    prof["mechanisms"][0]["q"] = 1 << 23
    prof["epsilon"] = [1, 1 << 23]
    for cfg in (cdf, prof):
        with pytest.raises(ConfigError, match="2\\*\\*22"):
            agent.Agent(cfg, seed=b"x")
        with pytest.raises(ConfigError, match="2\\*\\*22"):
            native.NativeAgent(cfg, seed=b"x")


def test_profile_ids_must_be_integers():
    cfg = plan_profile(0, 10, 5, Fraction(1))
    a = native.NativeAgent(cfg, seed=b"x")
    with pytest.raises(ValueError, match="integers"):
        a.update((2.5,))
    with pytest.raises(ValueError, match="integers"):
        a.update_rows(np.array([[1.0], [2.5]]))
    a.update((2 ** 40,))          # an int outside int32 (and the domain): ignored, as in Python
    empty = native.NativeAgent(cfg, seed=b"x").release()
    assert a.release() == empty
    b, py = native.NativeAgent(cfg, seed=b"x"), agent.Agent(cfg, seed=b"x")
    for v in (np.int64(3), 3, np.int32(9)):  # numpy integers are ids, as for the Python agent
        b.update((v,))
        py.update((v,))
    assert b.release() == bytes(py.release())


def test_names_with_nul_are_refused():
    """The C core's names end at NUL: a name holding one would give another frame."""
    cfg = privhp_config(d=1, r=6, k=4, w=16, j=1, lo=[0], hi=[10])
    cfg["mechanisms"][0]["names"] = ["a\x00b"]
    for make in (agent.Agent, native.NativeAgent):
        with pytest.raises(ConfigError, match="NUL"):
            make(cfg, seed=b"x")


def test_integers_beyond_2_53_compare_exactly():
    """A reading of 2**53 + 1 on a box ending at 2**53 is outside it (clamped)
    for the Python agent; rounding it to a double would put it on the bound."""
    for lo, hi, big in ((0.0, 2.0 ** 53, [2 ** 53, 2 ** 53 + 1, 10 ** 400, -(10 ** 400), 5]),
                        (-1e30, 1e30, [2 ** 53 + 1, 2 ** 62 + 3, -(2 ** 60) - 1, 10 ** 40])):  # inside the box
        cfg = privhp_config(d=1, r=12, k=4, w=16, j=1, lo=[lo], hi=[hi])
        py, c = agent.Agent(cfg, seed=b"x"), native.NativeAgent(cfg, seed=b"x")
        for v in big:
            py.update((v,))
            c.update((v,))
        rows = native.NativeAgent(cfg, seed=b"x")
        rows.update_rows(np.array([[v] for v in big if abs(v) < 2 ** 63], dtype=np.int64))
        for v in big:
            if abs(v) >= 2 ** 63:
                rows.update((v,))
        assert c.release() == bytes(py.release()) == rows.release()


def test_a_refused_block_counts_nowhere():
    """A block one mechanism cannot take (non-integral ids) is refused before
    any mechanism counts it, so the state stays what it was."""
    name, cfg, data, seed, key = next(c for c in CASES if c[0] == "combo-int")
    cfg = with_names(cfg, ["c0", "c1"])
    a, b = native.NativeAgent(cfg, seed=seed), native.NativeAgent(cfg, seed=seed)
    bad = data[:50].copy()
    bad[7, 1] = 2.5   # the profile's id column
    with pytest.raises(ValueError, match="integers"):
        a.update_rows(bad)
    with pytest.raises(ValueError, match="integers"):
        a.update(tuple(bad[7]))
    a.update_rows(data[:50])
    b.update_rows(data[:50])
    assert a.release() == b.release()


def test_several_mechanisms_seal_together():
    name, cfg, data, seed, key = next(c for c in CASES if c[0] == "combo-int")
    cfg = with_names(cfg, ["c0", "c1"])
    a = native.NativeAgent(cfg, seed=seed)
    a.update_rows(data[:100])
    frame = a.release()
    with pytest.raises(SealedError):
        a.update((1, 2))
    with pytest.raises(SealedError):
        a.update_rows(data[:5].astype(np.int32))
    assert a.release() == frame


def test_noise_scale_cap_refused_like_python():
    """A level whose scale q/p exceeds 2**22 is refused by both agents."""
    cfg = privhp_config(d=1, r=4, k=2, w=16, j=1, lo=[0], hi=[10])
    m = cfg["mechanisms"][0]
    m["sigma"] = [x * (1 << 23) for x in m["sigma"]]
    m["sigma"][0] = 1
    m["clamp_p"] *= 1 << 23
    m["q"] *= 1 << 23
    total = sum(m["sigma"]) + m["clamp_p"]
    from math import gcd
    g = gcd(total, m["q"])
    cfg["epsilon"] = [total // g, m["q"] // g]
    with pytest.raises(ConfigError):
        agent.Agent(cfg, seed=b"x")
    with pytest.raises(ConfigError, match="2\\*\\*22"):
        native.NativeAgent(cfg, seed=b"x")


def test_includedir_ships_the_core():
    import os
    inc = ccore.includedir()
    for f in ("es_core.h", "es_privhp.c", "es_dlap.c", "es_drbg.c", "es_sha256.c", "es_msgpack.c"):
        assert os.path.isfile(os.path.join(inc, f))


def test_fallback_warns_and_gives_the_same_frame(monkeypatch):
    name, cfg, data, seed, key = CASES[1]
    cfg = with_names(cfg, ["c0"])
    want = native.run_native(cfg, data, seed=seed, key=key)
    monkeypatch.setattr(native, "lib", None)
    with pytest.warns(RuntimeWarning, match="not built"):
        got = native.run_native(cfg, data, seed=seed, key=key)
    assert got == want


def test_cli_simulate_native_matches_cpython(tmp_path):
    import json

    from click.testing import CliRunner

    from edgesynth.cli import main
    name, cfg, data, seed, key = CASES[3]
    (tmp_path / "dev.json").write_text(json.dumps(cfg))
    np.savetxt(tmp_path / "r.csv", data, delimiter=",", header="a,b", comments="", fmt="%d")
    out = {}
    for rt in ("cpython", "native"):
        res = CliRunner().invoke(main, ["simulate", "--config", str(tmp_path / "dev.json"), "--input",
                                        str(tmp_path / "r.csv"), "--columns", "a,b", "--runtime", rt,
                                        "--seed", seed.hex(), "-o", str(tmp_path / (rt + ".bin"))])
        assert res.exit_code == 0, res.output
        out[rt] = (tmp_path / (rt + ".bin")).read_bytes()
    assert out["native"] == out["cpython"]
