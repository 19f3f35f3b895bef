"""A frame states which channels are integer: their bounds travel as msgpack
ints, every other channel's as float64, alike on every runtime, so that a
generator knows its integer channels from the frames alone (issue 17, item 1)."""
import shutil

import msgpack
import numpy as np
import pytest
from click.testing import CliRunner

import edgesynth as es
from edgesynth.cli import main
from edgesynth.errors import SchemaError
from edgesynth.runtimes import native
from tests.test_frames import envelope, payload_of

# temp is real-valued; count (negative fixint lo, uint8 hi) and adc (int32 lo,
# uint32 hi) are declared integer: the msgpack int formats the C core's
# es_enc_bounds must choose as the Python encoder does
BOUNDS = {"temp": (-20, 45), "count": (-5, 200), "adc": (-100000, 100000)}
INTEGER = ["count", "adc"]
PLANS = {
    "privhp": dict(ram="64K", hash_seed="int-frames"),
    "cdf": dict(mechanism="cdf", ram="32K"),
}


def _data(n=3000, seed=7):
    rng = np.random.default_rng(seed)
    return np.c_[rng.uniform(-25, 50, n), rng.integers(-10, 210, n), rng.integers(-120000, 120000, n)]


def _runtime_or_skip(runtime):
    if runtime == "native" and not native.available():
        pytest.skip("native core not built")
    if runtime == "micropython" and shutil.which("micropython") is None:
        pytest.skip("no `micropython` on PATH")


@pytest.fixture(scope="module")
def cpython_frames():
    """The reference frame of each mechanism, from the agent's own code."""
    out = {}
    for kind, opts in PLANS.items():
        cfg = es.plan(BOUNDS, epsilon=1, integer=INTEGER, **opts)
        out[kind] = cfg, es.simulate(cfg, _data(), seed=3, runtime="cpython")
    return out


@pytest.mark.parametrize("runtime", ["cpython", "numpy", "native", "micropython"])
@pytest.mark.parametrize("kind", sorted(PLANS))
def test_a_frame_states_its_integer_channels_on_every_runtime(cpython_frames, kind, runtime):
    _runtime_or_skip(runtime)
    cfg, reference = cpython_frames[kind]
    frame = es.simulate(cfg, _data(), seed=3, runtime=runtime)
    assert frame == reference  # byte-identical on every runtime
    m = payload_of(frame)["mechs"][0]
    assert m["lo"] == [-20.0, -5, -100000] and m["hi"] == [45.0, 200, 100000]
    assert [type(v) for v in m["lo"] + m["hi"]] == [float, int, int] * 2
    gen = es.assemble(frame)  # no declaration at assemble: the frame carries it
    assert gen.integer == [False, True, True] and gen.summary()["integer"] == INTEGER
    df = gen.sample(20000, seed=2)
    assert [str(t) for t in df.dtypes] == ["float64", "int64", "int64"]
    assert df["count"].between(-5, 200).all() and df["adc"].between(-100000, 100000).all()
    assert df["count"].nunique() > 50 and (df["temp"] != np.round(df["temp"])).mean() > 0.99


def test_all_integer_channels_take_the_c_cores_int32_path_with_the_same_bytes():
    if not native.available():
        pytest.skip("native core not built")
    cfg = es.plan({"count": (-5, 200), "adc": (-100000, 100000)}, epsilon=1, ram="64K", integer="count,adc",
                  hash_seed="int32")
    x = _data()[:, 1:].astype(np.int64)  # integer readings on integer bounds: es_privhp_update_i32
    frame = es.simulate(cfg, x, seed=5, runtime="native")
    assert frame == es.simulate(cfg, x, seed=5, runtime="cpython")
    assert es.assemble(frame).integer == [True, True]


def test_real_valued_channels_keep_float64_bounds_however_written():
    cfg = es.plan({"a": (0, 1), "b": (0.0, 1.0)}, epsilon=1, ram="32K")
    m = payload_of(es.simulate(cfg, _data()[:, :2] / 50, seed=1, runtime="numpy"))["mechs"][0]
    assert m["lo"] == [0.0, 0.0] and all(type(v) is float for v in m["lo"] + m["hi"])


def _rewritten(frame, device=None, **fields):
    """``frame`` with its first mechanism's map fields replaced (no tag): how
    an older agent, or a hostile sender, would have written it."""
    p = payload_of(frame)
    p["mechs"][0].update(fields)
    p["device"] = device or p["device"]
    return envelope(msgpack.packb(p), device=p["device"].encode())


def test_frames_of_older_agents_decode_as_real_valued_and_merge_with_new_ones(cpython_frames):
    cfg, frame = cpython_frames["privhp"]
    m = payload_of(frame)["mechs"][0]
    old = _rewritten(frame, device="old-agent", lo=[float(v) for v in m["lo"]], hi=[float(v) for v in m["hi"]])
    assert es.assemble(old).integer == [False, False, False]
    # the same config bins alike either way: the frames merge, integer only where all say so
    gen = es.assemble([frame, old])
    assert gen.integer == [False, False, False] and gen.summary()["frames"] == 2


def test_frames_of_several_devices_of_one_integer_config_merge(cpython_frames):
    for kind in sorted(PLANS):
        cfg, frame = cpython_frames[kind]
        other = es.simulate(cfg, _data(seed=8), seed=4, runtime="numpy", device_id="dev-2")
        gen = es.assemble([frame, other])
        assert gen.integer == [False, True, True] and gen.summary()["frames"] == 2, kind
        y = gen.sample_array(5000, seed=1)
        assert np.all(y[:, 1:] == np.round(y[:, 1:])), kind


@pytest.mark.parametrize("lo,hi,why", [
    ([-20.0, 0, -100000], [45.0, 200.0, 100000], "two integers .an integer channel. or two finite float64"),
    ([-20.0, -5, -100000], [45.0, 200, 1 << 29], "span of at most"),
    ([-20.0, -5, -(1 << 53)], [45.0, 200, -(1 << 53) + 10], "below 2..53"),
    ([-20.0, 5, -100000], [45.0, 5, 100000], "lo < hi"),
    ([-20.0, True, -100000], [45.0, 200, 100000], "two integers"),
])
def test_hostile_integer_bounds_are_schema_errors(cpython_frames, lo, hi, why):
    _, frame = cpython_frames["privhp"]
    with pytest.raises(SchemaError, match="privhp channel [12]: .*" + why):
        es.assemble(_rewritten(frame, lo=lo, hi=hi))


def test_assemble_has_no_integer_option_any_more(tmp_path, cpython_frames):
    _, frame = cpython_frames["cdf"]
    path = tmp_path / "f.bin"
    path.write_bytes(frame)
    r = CliRunner().invoke(main, ["assemble", str(path), "--integer", "count"])
    assert r.exit_code == 2 and "No such option '--integer'" in r.stderr
    with pytest.raises(TypeError):
        es.assemble(frame, integer=["count"])
    r = CliRunner().invoke(main, ["assemble", str(path), "--json"])
    assert r.exit_code == 0 and '"count"' in r.stdout
    assert es.assemble(frame).integer == [False, True, True]
