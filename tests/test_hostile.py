"""Hostile input on the host: memory and time bounded by the input's size.

Decoding (decode.scan_msgpack before msgpack), the host algorithms' memory
(checked from public parameters before allocating, one limit shared with
`plan`) and streamed frame files (never a silent prefix).
"""
import hashlib
import os
import struct
import subprocess
import sys
import tracemalloc
from fractions import Fraction

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import edgesynth.decode as decode
import edgesynth.frames as frames
import edgesynth.ram as ram
from edgesynth import agent
from edgesynth.describe import describe
from edgesynth.errors import BadPayload, FrameError, InputError, SchemaError, TruncatedFrame
from edgesynth.frames import MAX_OBJECTS, iter_frames, parse_frame, read_frames
from edgesynth.ram import HOST_MEMORY
from edgesynth.runtimes.simulate import simulate
from tests.conftest import privhp_config
from tests.helpers import release
from tests.test_frames import envelope, payload_of

KEY = b"h" * 32
MiB = 1 << 20
FRAME_SLACK = 8 * MiB      # parse_frame: at most 4 bytes per frame byte plus this
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ------------------------------------------------------------ item 5: decoding
def _nested_empty_arrays(size):
    """array32 of array16s of 1024 empty arrays: 1 byte per decoded list."""
    block = b"\xdc\x04\x00" + b"\x90" * 1024
    n = size // len(block)
    return b"\xdd" + struct.pack(">I", n) + block * n


def _deep(size):
    return b"\x91" * size + b"\xc0"


def _huge_map(size):
    n = size // 7
    return b"\xdf" + struct.pack(">I", n) + b"".join(b"\xa5%05x\xc0" % (i & 0xFFFFF) for i in range(n))


def _floats(size):
    n = size // 9
    return b"\xdd" + struct.pack(">I", n) + msgpack.packb(0.5) * n


def _long_strings(size):
    """900 strings (an astral character each: 4 bytes per character decoded)."""
    s = "\U0001F600" + "a" * (min(size // 900, 1024) - 4)
    return b"\xdc" + struct.pack(">H", 900) + msgpack.packb(s) * 900


def _big_bin(size):
    return msgpack.packb({"bin": b"\x00" * size})


HOSTILE = {"nested empty arrays": _nested_empty_arrays, "deep nesting": _deep, "huge map": _huge_map,
           "floats": _floats, "long strings": _long_strings, "big bin": _big_bin}
SCANNED_OUT = ("nested empty arrays", "deep nesting", "huge map", "floats")  # never reach msgpack


def _peak(fn):
    """(result or exception, peak traced bytes) of fn()."""
    tracemalloc.start()
    try:
        try:
            out = fn()
        except Exception as e:  # noqa: BLE001 - the caller checks the type
            out = e
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("size", [MiB, 8 * MiB])
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_payloads_cost_at_most_4x_their_bytes(name, size, tmp_path):
    """Tagged (the attacker holds a device key) and untagged through the two
    file readers (`assemble FILE`, `inspect`): a typed refusal, and peak
    traced memory at most 4 bytes per frame byte plus FRAME_SLACK."""
    frame = envelope(HOSTILE[name](size), key=KEY)
    path = tmp_path / "hostile.frames"
    path.write_bytes(frame)
    bound = 4 * len(frame) + FRAME_SLACK
    for how, fn in (("tagged", lambda: parse_frame(frame, key_for=lambda d: KEY)),
                    ("assemble FILE", lambda: read_frames(str(path))),
                    ("inspect", lambda: describe(str(path)))):
        err, peak = _peak(fn)
        assert isinstance(err, FrameError), (how, err)
        assert peak <= bound, (how, peak, bound)


class _Counting:
    """Stands in for scan_msgpack's table and counts the objects it examines."""

    def __init__(self, table):
        self.table, self.n = table, 0

    def __getitem__(self, b):
        self.n += 1
        return self.table[b]


@pytest.mark.parametrize("name", SCANNED_OUT)
def test_scan_refuses_before_decoding_after_a_bounded_number_of_objects(name, monkeypatch):
    """The work done on a hostile payload does not grow with its size: at most
    MAX_OBJECTS objects are examined and msgpack never runs."""
    calls = []
    real = frames.msgpack.unpackb
    monkeypatch.setattr(frames.msgpack, "unpackb", lambda *a, **k: calls.append(1) or real(*a, **k))
    examined = []
    for size in (MiB, 8 * MiB):
        counter = _Counting(decode._SCAN)
        monkeypatch.setattr(decode, "_SCAN", counter)
        with pytest.raises(BadPayload):
            parse_frame(envelope(HOSTILE[name](size), key=KEY), key_for=lambda d: KEY)
        examined.append(counter.n)
    # refused by the object limit or, first, by the decode budget of the payload's bytes
    assert calls == [] and max(examined) <= MAX_OBJECTS, examined


def _privhp_frame(key=None, d=2, tree_value=0, **params):
    """A schema-valid PrivHP frame over d channels with other shape parameters
    and constant counters of the right sizes (q = 1, every sigma 1: noise
    scale 1 or j), built from a small real frame: a device would take long
    to draw them."""
    small = release(privhp_config(d=2, r=8, k=8, w=16, j=2), np.random.default_rng(0).random((50, 2)))
    p = payload_of(small)
    m = p["mechs"][0]
    m.update(params, names=["x%d" % i for i in range(d)], lo=[0.0] * d, hi=[1.0] * d)
    L = min(m["k"].bit_length() - 1, m["r"])
    m.update(q=1, sigma=[1] * (m["r"] + 1), clamp_p=0, clamp=None, budget=[m["r"] + 1, 1],
             tree=np.full((1 << (L + 1)) - 1, tree_value, "<i4").tobytes(),
             sketches=bytes(4 * (m["r"] - L) * m["j"] * m["w"]), hash=bytes(2 * 4 * (m["r"] - L) * m["j"]))
    p["eps"] = [m["r"] + 1, 1]
    return envelope(msgpack.packb(p), device=p["device"].encode(), key=key)


def test_legal_frames_pass_the_scan_and_stay_within_4x():
    """The limits are those of the largest legal frame: a 2 MiB frame's peak
    stays within the same bound, and the widest and deepest legal payload
    (8 mechanisms, 16 channels, depth 29, a hashed-id profile sample) decodes."""
    big = _privhp_frame(r=20, k=4096, w=4096, j=16)
    assert len(big) > 2 * MiB
    rel, peak = _peak(lambda: parse_frame(big))
    assert rel[1] == len(big) and peak <= 4 * len(big) + FRAME_SLACK, (peak, len(big))
    from edgesynth.mechanisms.profile.plan import plan_profile
    cfg = plan_profile(0, 64, 4, Fraction(1), sample_bits=8, sample_seed="s")
    wide = privhp_config(d=16, r=29, k=1, w=4, j=1)["mechanisms"][0]
    cfg["mechanisms"] = cfg["mechanisms"] * 4 + [wide] * 4
    cfg["epsilon"] = [8, 1]
    rels = list(iter_frames(agent.Agent(cfg, seed=b"wide-seed-000000").release()))
    assert len(rels[0].mechs) == 8


def test_hostile_generator_files_cost_at_most_4x_plus_the_decode_slack(tmp_path, monkeypatch):
    """A file that is not a frame file goes to the generator loader: the same
    walk bounds it by decode.decode_budget before msgpack runs. (DECODE_SLACK
    is lowered to keep the walk short under tracemalloc; the bound moves with
    it. The real constant is checked in a child process below.)"""
    monkeypatch.setattr(decode, "DECODE_SLACK", 4 * MiB)
    for name in sorted(HOSTILE):
        path = tmp_path / "hostile.gen"
        data = HOSTILE[name](2 * MiB)
        path.write_bytes(data)
        err, peak = _peak(lambda: describe(str(path)))
        assert isinstance(err, InputError) and peak <= 4 * len(data) + 2 * decode.DECODE_SLACK, (name, err, peak)


def test_cli_on_hostile_files_within_an_address_space_limit(tmp_path):
    """`assemble FILE`, `inspect FILE` and `sample FILE` on 8 MiB of nested
    empty arrays (a frame file's payload, and a would-be generator file) in a
    child whose address space is capped at 4x the file plus 96 MiB above its
    start (modules loaded): exit 2 with a one-line error, no MemoryError."""
    frame, gen = tmp_path / "nested.frames", tmp_path / "nested.gen"
    frame.write_bytes(envelope(_nested_empty_arrays(8 * MiB)))
    gen.write_bytes(_nested_empty_arrays(8 * MiB))
    code = r'''
import resource, sys
from edgesynth.cli import main
import edgesynth.merge, edgesynth.mechanisms.cdf.generator, edgesynth.describe, edgesynth.mechanisms.profile.generator
vm = [int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmSize")][0]
cap = vm + 4 * int(sys.argv[1]) + (96 << 20)
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
main(sys.argv[2:])
'''
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=ROOT)
    for cmd, path, says in (("assemble", frame, "objects"), ("inspect", frame, "objects"),
                            ("inspect", gen, "not a frame file"), ("sample", gen, "not a generator file")):
        args = [cmd, str(path)] + (["-n", "1", "-o", str(tmp_path / "out.csv")] if cmd == "sample" else [])
        r = subprocess.run([sys.executable, "-c", code, str(path.stat().st_size)] + args,
                           capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
        assert r.returncode == 2 and r.stderr.startswith("error: ") and says in r.stderr, (cmd, r.stderr)


# ------------------------------------------------------------ item 6: extremes
def _profile_cfg(eps, lo=0, hi=1000, cap=30):
    """A profile config as a device takes it (plan_profile would refuse tiny eps)."""
    return {"format": 1, "epsilon": [eps.numerator, eps.denominator], "relation": "add-remove",
            "mechanisms": [{"kind": "profile", "names": ["id"], "lo": lo, "hi": hi, "cap": cap,
                            "q": eps.denominator, "p": eps.numerator}]}


def _cdf_cfg(K, branching):
    from edgesynth.mechanisms.cdf.plan import level_budgets
    q, sigma = level_budgets(Fraction(1), K, branching)
    return {"format": 1, "epsilon": [1, 1], "relation": "add-remove",
            "mechanisms": [{"kind": "cdf", "names": ["x0"], "lo": [0], "hi": [1000], "bins": K,
                            "branching": list(branching), "q": q, "sigma": sigma}]}


def _device_frame(cfg, n=200):
    rng = np.random.default_rng(4)
    lo, hi = cfg["mechanisms"][0]["lo"], cfg["mechanisms"][0]["hi"]
    lo, hi = (lo[0], hi[0]) if isinstance(lo, list) else (lo, hi)
    return simulate(cfg, rng.integers(lo, hi, (n, 1)).astype(float), cfg["mechanisms"][0]["names"],
                    seed=b"extreme-seed-000", key=KEY)


def _retagged(frame, fn):
    p = payload_of(frame)
    fn(p)
    return envelope(msgpack.packb(p), device=p["device"].encode(), key=KEY)


def test_frames_beyond_the_device_noise_cap_are_refused_when_decoded():
    """epsilon = 2**-24 (noise scale 2**24: `assemble --store` tried to
    allocate 267 GiB) and its CDF and PrivHP analogues, correctly tagged:
    a SchemaError naming the scale, with little memory."""
    prof = _device_frame(_profile_cfg(Fraction(1)))
    tiny = 1 << 24

    def profile(p):
        p["mechs"][0].update(p=1, q=tiny, budget=[1, tiny])
        p["eps"] = [1, tiny]

    def cdf(p):
        m = p["mechs"][0]
        m.update(q=tiny, sigma=[1] * len(m["sigma"]), budget=[len(m["sigma"]), tiny])
        p["eps"] = m["budget"]

    def privhp(p):
        m = p["mechs"][0]
        m.update(q=tiny, sigma=[1] * len(m["sigma"]), budget=[len(m["sigma"]) + m["clamp_p"], tiny])
        p["eps"] = m["budget"]
    cases = [(_retagged(prof, profile), "profile: noise scale 16777216/1"),
             (_retagged(_device_frame(_cdf_cfg(100, (10, 10))), cdf), "cdf level 1: noise scale"),
             (_retagged(release(privhp_config(d=2, r=8, k=8, w=16, j=2), np.zeros((0, 2)), device_id="dev-1"),
                        privhp), "privhp level 0: noise scale")]
    for frame, says in cases:
        err, peak = _peak(lambda: parse_frame(frame, key_for=lambda d: KEY))
        assert isinstance(err, SchemaError) and says in str(err) and "2**22" in str(err), err
        assert peak < 4 * MiB, peak
    ok = _retagged(prof, lambda p: (p["mechs"][0].update(p=1, q=1 << 22, budget=[1, 1 << 22]),
                                    p.update(eps=[1, 1 << 22])))
    assert parse_frame(ok, key_for=lambda d: KEY)[0].mechs[0].q == 1 << 22  # the cap itself is legal


def _refused(fn):
    """The InputError of fn() and its peak traced memory."""
    err, peak = _peak(fn)
    assert isinstance(err, InputError), err
    return str(err), peak


def test_absurd_host_work_is_refused_before_allocating_by_assemble_and_plan():
    """Frames a device makes (noise within its cap) whose assembly would need
    more than ram.HOST_MEMORY: assemble refuses from the public parameters,
    naming them and the need, before allocating; plan refuses the same config
    with the same message (one function, ram.require_host_memory)."""
    from edgesynth.mechanisms import assemble
    from edgesynth.mechanisms.cdf.plan import plan_cdf
    from edgesynth.mechanisms.profile.plan import plan_profile
    # profile, epsilon 1e-6: the landed code took 2.9 GB
    eps = Fraction(1, 10 ** 6)
    rels = list(iter_frames(_device_frame(_profile_cfg(eps)), key_for=lambda d: KEY))
    said, peak = _refused(lambda: assemble(rels))
    assert said.startswith("assembling a profile of 1000 ids with cap 30 and epsilon 1/1000000 (noise radius tau")
    assert "GiB of host memory, above the host limit of 2 GiB" in said and peak < 4 * MiB, (said, peak)
    assert _refused(lambda: plan_profile(0, 1000, 30, eps))[0] == said
    # cdf: 2 bins on a 2**28 x 2 tree (3 counters on the device, 2**29 padded leaves on the host)
    rels = list(iter_frames(_device_frame(_cdf_cfg(2, (1 << 28, 2)))))
    said, peak = _refused(lambda: assemble(rels))
    assert "268435456x2 (536870912 padded leaves)" in said and peak < 4 * MiB, (said, peak)
    assert _refused(lambda: plan_cdf([0], [1000], Fraction(1), 2, branching=[1 << 28, 2]))[0] == said
    # privhp: 2**19 tree counters (2 MiB) that grow 3 million leaves over 16 channels
    rels = list(iter_frames(_privhp_frame(d=16, tree_value=1, r=29, k=1 << 18, w=4, j=1)))
    said, peak = _refused(lambda: assemble(rels))
    assert "r = 29, k = 262144 (3145728 leaves) over 16 channel(s)" in said and peak < 4 * MiB, (said, peak)


def test_the_privhp_planner_only_chooses_what_the_host_can_assemble(monkeypatch):
    """With 64 MiB of device RAM on one channel the best predicted W1 would
    need ~8 GiB of host memory to assemble (k = 2**22 over depth 29, within
    the device's 2**24 counters); the planner picks the best state within
    ram.HOST_MEMORY instead."""
    import edgesynth.mechanisms.privhp.plan as plan
    from edgesynth.mechanisms.privhp.growth import privhp_host_need

    def need_of_plan():
        m = plan.plan_privhp([0.0], [1.0], Fraction(10), 64 << 20, n_max=10 ** 9, runtime="c")["mechanisms"][0]
        return privhp_host_need(min(m["k"].bit_length() - 1, m["r"]), m["r"], m["k"], m["j"], 1)
    # sketches as crowded as k = 2**22 candidates in 4096 cells are beyond the error model's fitted
    # MAX_LOAD; lift that cap so the only limit left is the host's memory
    monkeypatch.setattr(plan, "MAX_LOAD", 1 << 30)
    assert need_of_plan() <= HOST_MEMORY
    monkeypatch.setattr(ram, "HOST_MEMORY", 1 << 60)
    assert need_of_plan() > 2 * HOST_MEMORY


def test_host_needs_bound_the_measured_peaks():
    """The need functions are upper bounds of what assembling really takes
    (tracemalloc; the profile's inversion_need also covers the FFT's untraced
    scratch, seen in the RSS)."""
    # the inversion and the CDF's isotonic fit import scipy on first use: a
    # module's import is not assembly memory, so load them before measuring
    import scipy.fft  # noqa: F401
    import scipy.optimize  # noqa: F401

    from edgesynth.mechanisms.cdf.estimate import gls_need
    from edgesynth.mechanisms.cdf.generator import assemble_cdf
    from edgesynth.mechanisms.privhp.generator import assemble_privhp
    from edgesynth.mechanisms.privhp.growth import privhp_host_need
    from edgesynth.mechanisms.profile.generator import assemble_profile
    from edgesynth.mechanisms.profile.invert import inversion_need
    for eps, hi, cap in ((Fraction(1), 20000, 30), (Fraction(1, 1000), 1000, 30), (Fraction(1), 1000, 20000)):
        rels = list(iter_frames(_device_frame(_profile_cfg(eps, hi=hi, cap=cap))))
        _, peak = _peak(lambda: assemble_profile(rels).to_bytes())
        assert peak <= inversion_need(hi, rels[0].mechs[0].alpha, cap), (eps, hi, cap, peak)
    for K, br in ((1000, (10, 10, 10)), (100, (1000, 1000))):
        rels = list(iter_frames(_device_frame(_cdf_cfg(K, br))))
        _, peak = _peak(lambda: assemble_cdf(rels).to_bytes())
        assert peak <= gls_need(K, br, 1), (K, br, peak)
    # the last case: recover's least squares over 4 rows of the widest sketch
    for d, r, k, j, w in ((2, 16, 1 << 12, 2, 64), (16, 18, 1 << 13, 1, 64), (2, 18, 1 << 14, 4, 4096)):
        rels = list(iter_frames(_privhp_frame(d=d, tree_value=1, r=r, k=k, w=w, j=j)))
        gen, peak = _peak(lambda: assemble_privhp(rels))
        s = rels[0].mechs[0]
        assert gen.leaves.level.size > k and peak <= privhp_host_need(s.L, s.r, s.k, s.j, d), (d, r, k, peak)


def test_generator_files_are_checked_before_their_boxes_are_built(monkeypatch):
    """A generator file names its channels and leaves; more than 16 channels,
    or boxes beyond the host limit, are refused before leaf_boxes runs."""
    from edgesynth.mechanisms import load_generator
    gen = {"fmt": 1, "kind": "edgesynth-generator", "names": ["x%d" % i for i in range(17)],
           "lo": [0.0] * 17, "hi": [1.0] * 17, "level": bytes(1), "path": bytes(4),
           "mass": msgpack.packb(1.0)[1:], "meta": {}}
    with pytest.raises(InputError, match="inconsistent"):
        load_generator(msgpack.packb(gen))
    n = 100000
    gen.update(names=gen["names"][:16], lo=[0.0] * 16, hi=[1.0] * 16, level=np.full(n, 17, "<u1").tobytes(),
               path=np.arange(n, dtype="<u4").tobytes(), mass=np.ones(n, "<f8").tobytes())
    assert load_generator(msgpack.packb(gen)).leaves.level.size == n
    monkeypatch.setattr(ram, "HOST_MEMORY", 64 << 20)
    with pytest.raises(InputError, match="loading a generator of 100000 leaves over 16 channel"):
        load_generator(msgpack.packb(gen))


# ------------------------------------------------------------ item 7: whole files
def _frames_file(tmp_path, n=6):
    """A file of n different real frames back to back, and the frames."""
    cfg = privhp_config(d=2, r=8, k=8, w=16, j=2)
    rng = np.random.default_rng(3)
    frs = [bytes(release(cfg, rng.random((40, 2)), seed=b"file-seed-%06d" % i)) for i in range(n)]
    path = tmp_path / "many.frames"
    path.write_bytes(b"".join(frs))
    return path, frs


@pytest.mark.parametrize("chunk", [1, 7, 100, 1 << 20])
def test_files_are_read_to_the_end_whatever_the_chunk(tmp_path, monkeypatch, chunk):
    """A file far larger than the read chunk (here: chunks from 1 byte to
    beyond the file) yields every frame, in order, through both readers."""
    monkeypatch.setattr(frames, "READ_CHUNK", chunk)
    path, frs = _frames_file(tmp_path)
    assert [r.raw for r in read_frames(str(path))] == frs
    assert [f["sha256"] for f in describe(str(path))["frames"]] == [hashlib.sha256(f).hexdigest() for f in frs]


def test_a_file_beyond_four_payload_limits_is_read_whole(tmp_path, monkeypatch):
    """The landed reader read 4 * MAX_PAYLOAD + 1 bytes (272 MB) and called
    the frame across that point truncated; the same at a 2 KiB limit."""
    monkeypatch.setattr(frames, "MAX_PAYLOAD", 2048)
    path, frs = _frames_file(tmp_path, n=12)
    assert path.stat().st_size > 4 * 2048 + 1
    assert [r.raw for r in read_frames(str(path))] == frs


def test_a_cut_off_last_frame_is_an_error_not_a_shorter_file(tmp_path, monkeypatch):
    monkeypatch.setattr(frames, "READ_CHUNK", 64)
    path, frs = _frames_file(tmp_path)
    path.write_bytes(b"".join(frs) + frs[0][:-1])
    for read in (read_frames, describe):
        with pytest.raises(TruncatedFrame, match="frame %d: frame truncated" % len(frs)):
            read(str(path))


def test_streaming_holds_one_frame_at_a_time(tmp_path):
    """Reading 40 frames of a file by iter_file_frames and dropping each
    takes about one frame's memory, not the file's."""
    path, frs = _frames_file(tmp_path, n=40)

    def walk():
        with open(path, "rb") as fh:
            return sum(1 for _ in frames.iter_file_frames(fh))
    n, peak = _peak(walk)
    assert n == 40 and peak < 8 * len(frs[0]) + 2 * frames.READ_CHUNK, peak


def _containers(kids):
    return st.lists(kids, max_size=40) | st.dictionaries(st.text(max_size=8), kids, max_size=12)


_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2 ** 63, 2 ** 64 - 1) | st.floats() | st.text(max_size=40)
    | st.binary(max_size=64), _containers, max_leaves=400)


@settings(max_examples=100, deadline=None)
@given(v=_values)
def test_the_scan_accepts_what_msgpack_decodes_and_bounds_what_it_takes(v):
    """scan_msgpack agrees with msgpack on valid data, refuses every strict
    prefix, and its worst-case size bounds the decoder's traced peak."""
    data = msgpack.packb(v)
    cost = decode.scan_msgpack(data, 1000, len(data), 1 << 40)
    tracemalloc.start()
    msgpack.unpackb(data, raw=False, strict_map_key=False, object_pairs_hook=dict)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak <= cost + 1024, (peak, cost)
    for cut in range(0, len(data), max(1, len(data) // 40)):
        with pytest.raises(BadPayload):
            decode.scan_msgpack(data[:cut], 1000, len(data), 1 << 40)


def test_the_host_memory_limit_follows_the_environment(monkeypatch):
    from edgesynth.ram import require_host_memory
    need = 3 << 30
    with pytest.raises(InputError, match="above the host limit of 2 GiB"):
        require_host_memory(need, "this")
    monkeypatch.setenv("EDGESYNTH_HOST_MEMORY", "4G")
    require_host_memory(need, "this")
    monkeypatch.setenv("EDGESYNTH_HOST_MEMORY", "lots")
    with pytest.raises(InputError, match="EDGESYNTH_HOST_MEMORY must be a size"):
        require_host_memory(need, "this")
