"""Host-side limits of PHDStream (issue 14 review): int32 bounds in the
planner and the decoder, step numbers below 2**32, readings that every
runtime refuses alike (one helper, ccore.core_events), a hostile generator
file, steps of several devices lined up by window (epoch), a population
asked of another kind, and the integer step column."""
import msgpack
import numpy as np
import pytest
from click.testing import CliRunner

import edgesynth as es
from edgesynth import agent
from edgesynth.ccore import core_events
from edgesynth.cli import main
from edgesynth.errors import EvaluationInputError, InputError, SchemaError
from edgesynth.frames import parse_frame
from edgesynth.mechanisms.phdstream.tree import point_counts
from edgesynth.runtimes import micropython as mp_runtime
from edgesynth.synthesis import Generator
from tests.test_phdstream_assemble import _reframe, config, run, stream

SEED = b"phd-host-fixes-01"


@pytest.fixture(scope="module")
def frames():
    return run(config(), stream(1, windows=6))


# ------------------------------------------------------------ 2, 11: decoder
@pytest.mark.parametrize("change, match", [
    # a crafted box beyond int32 (the span check alone passes it)
    (lambda p: p["mechs"][0]["p"].update(lo=[2 ** 64 - 256, 0], hi=[2 ** 64 - 1, 127]), "int32|2\\*\\*31"),
    (lambda p: p["mechs"][0]["p"].update(lo=[2 ** 31 - 1, 0], hi=[2 ** 31 + 100, 127]), "2\\*\\*31 - 2"),
    (lambda p: p["mechs"][0].update(t=1 << 32), "t must be an integer in \\[1, 4294967295\\]"),
])
def test_the_decoder_refuses_bounds_beyond_int32_and_huge_steps(frames, change, match):
    with pytest.raises(SchemaError, match=match) as e:
        parse_frame(_reframe(frames[0], change))
    assert "\n" not in str(e.value) and "internal" not in str(e.value)


def test_cli_assemble_of_a_crafted_box_is_one_error_line(frames, tmp_path):
    bad = _reframe(frames[0], lambda p: p["mechs"][0]["p"].update(lo=[2 ** 64 - 256, 0], hi=[2 ** 64 - 1, 127]))
    (tmp_path / "f.bin").write_bytes(bad)
    r = CliRunner().invoke(main, ["assemble", str(tmp_path / "f.bin"), "-o", str(tmp_path / "g.gen")])
    assert r.exit_code == 2 and "internal error" not in r.output and "Traceback" not in r.output


# ------------------------------------------------------ 3, 9: readings
def test_core_events_is_the_one_check():
    assert core_events(np.array([[1.0, 2.0, -1.0]])).tolist() == [[1, 2, -1]]
    assert core_events(np.array([[1, 2, 1]], dtype=object)).dtype == np.int32
    for rows, msg in (([[1e20, 0, 1]], "reading 5: phdstream channel 0 must be an integer in"),
                      ([[0, 2 ** 31, 1]], "reading 5: phdstream channel 1"),
                      ([[0.5, 0, 1]], "channel 0"), ([[np.inf, 0, 1]], "channel 0"),
                      ([[0, 0, 0]], "reading 5: op 0 is not"),
                      (np.array([[0, 0, True]], dtype=object), "op True is not"),
                      (np.array([[2 ** 70, 0, 1]], dtype=object), "channel 0")):
        with pytest.raises(ValueError, match=msg):
            core_events(rows, names=[5])


def _runtimes():
    out = ["cpython", "numpy", "native", "qemu"]
    try:
        mp_runtime.find_micropython()
        out.append("micropython")
    except InputError:
        pass
    return out


@pytest.mark.parametrize("runtime", _runtimes())
@pytest.mark.parametrize("cell", [1e20, 2.0 ** 53, -2.0 ** 31 - 1])
def test_a_reading_outside_int32_gets_one_message_on_every_runtime(runtime, cell):
    """An integral float beyond int32 (a CSV cell 1e20) is refused before any
    runtime starts, naming the row, the same message everywhere."""
    data = {"x": [1, 2, cell, 4], "y": [0, 0, 0, 0], "op": [1, 1, 1, -1]}
    with pytest.raises(InputError, match=r"^reading 2: phdstream channel 0 must be an integer in \[-2\*\*31, "):
        es.simulate(config(), data, SEED, op="op", runtime=runtime)


def test_cli_simulate_of_1e20_is_one_line(tmp_path):
    es.write_config(str(tmp_path / "cfg.json"), config())
    (tmp_path / "in.csv").write_text("x,y,op\n1,2,1\n1e20,3,1\n")
    r = CliRunner().invoke(main, ["simulate", "--config", str(tmp_path / "cfg.json"), "--input",
                                  str(tmp_path / "in.csv"), "--op-column", "op", "--runtime", "micropython",
                                  "--seed", SEED.hex(), "-o", str(tmp_path / "f.bin")])
    assert r.exit_code == 2 and "internal error" not in r.output
    assert "reading 1: phdstream channel 0 must be an integer" in r.output


def test_the_runtimes_take_the_same_integers():
    data = {"x": [1.0, 2.0, 300.0], "y": [0.0, 5.0, 9.0], "op": [1.0, 1.0, -1.0]}
    want = es.simulate(config(), data, SEED, op="op")
    for runtime in ("numpy", "native"):
        assert es.simulate(config(), data, SEED, op="op", runtime=runtime) == want


# ------------------------------------------------------------ 4: a hostile file
def _rewrite(gen, change):
    m = msgpack.unpackb(gen.to_bytes(), raw=False)
    change(m)
    return msgpack.packb(m)


@pytest.mark.parametrize("change", [
    lambda m: m["streams"][0].update(mass=np.full(len(m["streams"][0]["mass"]) // 8, 2.0 ** 60).tobytes()),
    lambda m: m["streams"][0].update(mass=np.full(len(m["streams"][0]["mass"]) // 8, -2.0 ** 54).tobytes()),
    lambda m: m.update(lo=[-2 ** 40, 0], hi=[2 ** 40, 127]),
    lambda m: m.update(lo=[2 ** 64 - 256, 0], hi=[2 ** 64 - 1, 127]),
    lambda m: m["streams"][0].update(epochs=b""),
])
def test_a_hostile_generator_file_is_one_error(frames, change):
    gen = es.assemble(frames)
    with pytest.raises(InputError, match="inconsistent|malformed") as e:
        Generator.from_bytes(_rewrite(gen, change))
    assert "\n" not in str(e.value)


def test_point_counts_refuse_masses_past_int64():
    assert point_counts([2.0 ** 53]).tolist() == [2 ** 53]
    with pytest.raises(EvaluationInputError, match="below 2\\*\\*62"):
        point_counts([1.0, 2.0 ** 62])


# ---------------------------------------------------------- 5: steps by window
def _late(windows=6, start=3, skip=None):
    """A second device whose stream starts at epoch ``start`` (or skips epoch ``skip``)."""
    a = agent.Agent(config(), seed=b"phd-host-fixes-02", device_id="cam-2", epoch=start, seq=0)
    out = []
    for i, ev in enumerate(stream(2, windows=windows)):
        if i:
            a.next_window(a_epoch(out) + (2 if skip == i else 1))
        for x in ev:
            a.update(x)
        out.append(a.release())
    return out


def a_epoch(frames):
    return parse_frame(frames[-1])[0].epoch


def test_steps_of_devices_that_line_up_are_united(frames):
    gen = es.assemble(frames + run(config(), stream(2, windows=6), device="cam-2", seed=b"phd-host-fixes-02"))
    assert gen.model.misaligned == set() and gen.summary()["misaligned_steps"] == []
    assert len(gen.sample(step=4, seed=1)) == gen.population(4)


@pytest.mark.parametrize("late", [dict(start=3), dict(start=0, skip=2)])
def test_a_step_reached_in_different_windows_is_refused(frames, late, tmp_path):
    """Device 2 starts at epoch 3 (or skips epoch 2): its step K is not device
    1's step K, so those steps are refused, not mixed; steps that line up
    (device 2's steps before its skip) still sample."""
    gen = es.assemble(frames + _late(**late))
    bad = sorted(gen.model.misaligned)
    assert bad and (late.get("skip") is None or bad[0] == 3)
    with pytest.raises(InputError, match="step %d: the devices' streams reached it in different windows "
                                         "\\('cam-1' at epoch \\d+, 'cam-2' at epoch \\d+\\)" % bad[0]):
        gen.sample(step=bad[0])
    with pytest.raises(InputError, match="different windows"):
        gen.population(bad[0])
    with pytest.raises(InputError, match="different windows"):
        gen.sample_steps()
    assert bad[0] not in gen.populations()
    assert gen.summary()["misaligned_steps"][0][0] == bad[0]
    if late.get("skip"):
        assert len(gen.sample(step=1, seed=1)) == gen.population(1)
    gen.save(tmp_path / "g.gen")
    assert es.load(tmp_path / "g.gen").model.misaligned == gen.model.misaligned
    r = CliRunner().invoke(main, ["sample", str(tmp_path / "g.gen"), "--step", str(bad[0]), "-o", "-"])
    assert r.exit_code == 2 and "different windows" in r.output


# ------------------------------------------------------------ 6, 11
def test_population_of_another_kind_is_an_input_error():
    cfg = es.plan({"t": (0, 50)}, epsilon=1, ram="32K", n_max=10 ** 4)
    gen = es.assemble(es.simulate(cfg, np.linspace(0, 50, 300).reshape(-1, 1), seed=1, runtime="numpy"))
    for step in (None, 1):
        with pytest.raises(InputError, match="stream generator"):
            gen.population(step)


def test_the_step_column_is_integer(frames, tmp_path):
    gen = es.assemble(frames)
    blocks = list(gen.step_blocks(seed=1))
    assert all(b.dtype == np.int64 for b in blocks)
    df = gen.sample_steps(seed=1)
    assert str(df["step"].dtype) == "int64" and sorted(set(df["step"])) == gen.steps
    assert gen.write_steps(str(tmp_path / "s.csv"), seed=1) == len(df)
    lines = (tmp_path / "s.csv").read_text().splitlines()
    assert lines[0] == "step,x,y" and all("." not in ln for ln in lines[1:])
