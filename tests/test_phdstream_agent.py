"""PHDStream in the agent and in simulate: the continual agent (one state over
every window, one step per release), windowed simulation with an op column,
and the MicroPython runtime's frames against CPython's."""
import sys
from pathlib import Path

import msgpack
import numpy as np
import pytest

import edgesynth as es
from edgesynth import agent
from edgesynth.agent.errors import ConfigError, SealedError
from edgesynth.agent.phdstream import PHDStream
from edgesynth.errors import InputError
from edgesynth.frames import split_envelope
from edgesynth.runtimes import micropython as mp_runtime

sys.path.insert(0, str(Path(__file__).resolve().parent))
from phd_helpers import agent_frames  # noqa: E402

SEED = b"phd-agent-seed-0"


def spec(**kw):
    s = {"kind": "phdstream", "names": ["x", "y"], "lo": [0, 0], "hi": [63, 63], "depth": 6, "eps": [1, 2],
         "max_nodes": 63, "batch_max": 64, "snap": 4}
    s.update(kw)
    return s


def config(**kw):
    s = spec(**kw)
    eps = [1, 1] if not s.get("rate_bound") else s["eps"]  # budget(): 2 eps unless rate_bound
    return {"format": 1, "epsilon": eps, "relation": "add-remove", "mechanisms": [s]}


def payloads(buf):
    """Every frame's (device, payload map) in ``buf``, back to back."""
    out, pos = [], 0
    while pos < len(buf):
        device, a, b, _, pos = split_envelope(buf, pos)
        out.append((device, msgpack.unpackb(bytes(buf[a:b]), raw=False)))
    return out


def events(rng, n):
    """n events (x, y, op) in the box, about one in four a deletion."""
    xy = rng.integers(0, 64, size=(n, 2))
    op = np.where(rng.random(n) < 0.25, -1, 1)
    return [(int(a), int(b), int(c)) for (a, b), c in zip(xy, op)]


# --------------------------------------------------------------- the agent
def test_release_steps_once_and_repeats_its_bytes():
    a = agent.Agent(config(), seed=SEED, device_id="cam-1", epoch=7, seq=3)
    for x in events(np.random.default_rng(1), 40):
        a.update(x)
    first = a.release()
    assert a.release() == first                 # a resend: no second step
    (dev, p), = payloads(first)
    assert dev == "cam-1" and p["epoch"] == 7 and p["seq"] == 3 and p["eps"] == [1, 1]
    entry, = p["mechs"]
    assert entry["kind"] == "phdstream" and entry["t"] == 1
    with pytest.raises(SealedError):
        a.update((1, 2, 1))


def test_next_window_continues_the_same_state():
    """Three windows through the agent give the payload entries of one
    PHDStream fed the same events under the same DRBG (state and noise carry
    over: a window is a step, not a fresh agent)."""
    from edgesynth.agent.msgpack_out import Encoder
    from edgesynth.agent.shims import shim
    rng = np.random.default_rng(2)
    windows = [events(rng, n) for n in (30, 0, 45)]
    frames = agent_frames(agent.Agent(config(), seed=SEED, epoch=10, seq=0), windows)
    got = [p for f in frames for _, p in payloads(f)]
    assert [(p["epoch"], p["seq"], p["mechs"][0]["t"]) for p in got] == [(10, 0, 1), (11, 1, 2), (12, 2, 3)]

    m = PHDStream(spec())
    m.draw_noise(shim("drbg").seeded_source(SEED))
    m.prepare_release()
    for ev, p in zip(windows, got):
        for x in ev:
            m.update(x)
        m.step()
        enc = Encoder()
        enc.reset(None)
        m.encode(enc)
        size = enc.n
        out = bytearray()
        enc.reset(lambda buf, n: out.extend(bytes(buf[:n])))
        m.encode(enc)
        assert len(out) == size
        assert msgpack.unpackb(bytes(out), raw=False) == p["mechs"][0]
    assert got[1]["mechs"][0]["t"] == 2 and got[0]["mechs"][0]["snap"] is not None


def test_next_window_rules():
    a = agent.Agent(config(), seed=SEED, epoch=5)
    with pytest.raises(ConfigError, match="release this window"):
        a.next_window()
    a.release()
    for bad in (5, 4, 1 << 32, True, "6"):
        with pytest.raises(ConfigError, match="epoch"):
            a.next_window(bad)
    a.next_window(9)
    assert (a.epoch, a.seq, a.sealed) == (9, 1, False)
    a.update((1, 1, -1))                      # updates are taken again
    b = agent.Agent(es.plan("0:1", epsilon=1, mechanism="cdf", bins=4), seed=SEED)
    b.release()
    with pytest.raises(ConfigError, match="new Agent"):
        b.next_window()


def test_phdstream_runs_alone_and_its_budget_is_the_config_epsilon():
    cfg = config()
    cfg["mechanisms"].append(dict(cfg["mechanisms"][0]))
    with pytest.raises(ConfigError, match="runs alone"):
        agent.Agent(cfg, seed=SEED)
    wrong = config()
    wrong["epsilon"] = [1, 2]                 # eps, but without rate_bound a full batch costs 2 eps
    with pytest.raises(ConfigError, match="add up to 2/2, not epsilon 1/2"):
        agent.Agent(wrong, seed=SEED)
    agent.Agent(config(rate_bound=True), seed=SEED)   # rate_bound: the budget is eps


def test_ledger_refuses_phdstream(tmp_path):
    from edgesynth.agent import ledger
    cfg = config()
    cfg["device"] = {"lifetime_epsilon": [10, 1]}
    with pytest.raises(ConfigError, match="phdstream"):
        ledger.provision(cfg, str(tmp_path / "state.bin"), "dev-1", bytes(32))
    with pytest.raises(ConfigError, match="phdstream"):
        ledger.Device(cfg, str(tmp_path / "state.bin"), "dev-1", bytes(32))
    assert not list(tmp_path.iterdir())        # nothing written


def test_main_loop_keeps_one_agent(tmp_path, monkeypatch):
    """The device main loop runs a phdstream config as one state: one step
    per release period, epochs and seqs counting up."""
    import json

    from edgesynth.agent import main_loop
    from edgesynth.agent.shims import shim
    cfg = config()
    cfg["device"] = {"sample_ms": 1000, "release_ms": 5000, "out": str(tmp_path / "frames.bin"), "first_epoch": 3}
    (tmp_path / "device.json").write_text(json.dumps(cfg))
    ev = events(np.random.default_rng(4), 23)
    (tmp_path / "rec.csv").write_text("".join("%d,%d,%d\n" % e for e in ev))
    sensors = shim("sensors")
    n = main_loop.run(str(tmp_path / "device.json"), sensors.RecordedSensor(str(tmp_path / "rec.csv")),
                      sensors.StepClock())
    got = [p for _, p in payloads((tmp_path / "frames.bin").read_bytes())]
    assert n == 5 and [(p["epoch"], p["seq"], p["mechs"][0]["t"]) for p in got] == [
        (3 + i, i, 1 + i) for i in range(5)]


# --------------------------------------------------------------- simulate
START = 1_700_000_000  # a multiple of the 100 s window


def table(n=120, seed=3):
    rng = np.random.default_rng(seed)
    ev = events(rng, n)
    t = np.sort(rng.uniform(START, START + 500, n))
    t[t >= START + 300] += 100                 # window 3 (300..400 s) stays empty
    return {"x": [e[0] for e in ev], "y": [e[1] for e in ev], "op": [e[2] for e in ev], "t": t}


def windowed(data, seed=SEED, **kw):
    return es.simulate_windows(config(), data, "t", 100, START, START + 600, seed, op="op", **kw)


def test_windowed_frames_one_per_window_reproducible():
    data = table()
    frames = windowed(data)
    assert frames == windowed(data)
    assert [e for e, _ in frames] == [START // 100 + i for i in range(6)]   # the empty window too
    got = [payloads(f)[0][1] for _, f in frames]
    assert [p["seq"] for p in got] == list(range(6))
    assert [p["mechs"][0]["t"] for p in got] == list(range(1, 7))    # one agent: steps 1..6
    assert windowed(data, seed=b"another-seed-000") != frames
    # the library's one-call form gives the same bytes
    assert es.simulate(config(), data, SEED, window=100, start=START, end=START + 600, times="t",
                       op="op") == b"".join(f for _, f in frames)


def test_op_spellings_and_default():
    data = table(40)
    words = {1: ["+1", "insert", "INSERT", " 1"], -1: ["-1", "delete", "Delete"]}
    spelled = dict(data, op=[words[v][i % len(words[v])] for i, v in enumerate(data["op"])])
    assert windowed(spelled) == windowed(data)
    inserts = dict(data, op=[1] * 40)
    assert es.simulate_windows(config(), data, "t", 100, START, START + 600, SEED) == windowed(inserts)
    # the op as values rather than a column name
    assert es.simulate_windows(config(), data, "t", 100, START, START + 600, SEED, op=data["op"]) == windowed(data)


def _without(data, row):
    return {k: [v for i, v in enumerate(c) if i != row] for k, c in data.items()}


@pytest.mark.parametrize("absent", [None, np.nan])
@pytest.mark.parametrize("as_float", [False, True])
def test_a_missing_op_is_a_missing_value(absent, as_float):
    """A missing op cell is skipped like a missing channel value (the CLI's
    rule too), or refused naming the row with missing="error"."""
    data = table(20)
    data["op"] = list(data["op"])
    data["op"][13] = absent
    if as_float:  # as a parsed CSV column arrives
        data["op"] = np.array(data["op"], dtype=float)
    assert windowed(data) == windowed(_without(table(20), 13))
    with pytest.raises(InputError, match="row 13, column 'op': missing value"):
        windowed(data, missing="error")


@pytest.mark.parametrize("bad", ["2", "ins", 0, 2, True, "+-1"])
def test_op_errors_name_the_row(bad):
    data = table(20)
    data["op"] = list(data["op"])
    data["op"][13] = bad
    with pytest.raises(InputError, match="reading 13: op .* is not"):
        windowed(data)


@pytest.mark.parametrize("bad", [0.0, 2.0, 0.5])
def test_numeric_op_errors_name_the_row(bad):
    data = table(20)
    data["op"] = np.array(data["op"], dtype=float)   # as a parsed CSV column arrives
    assert windowed(data) == windowed(table(20))
    data["op"][13] = bad
    with pytest.raises(InputError, match="reading 13: op .* is not"):
        windowed(data)


def test_op_column_misuse():
    data = table(20)
    with pytest.raises(InputError, match="also in --columns"):
        es.simulate_windows(config(), data, "t", 100, START, START + 600, SEED, op="x")
    with pytest.raises(InputError, match="same column"):
        es.simulate_windows(config(), data, "t", 100, START, START + 600, SEED, op="t")
    cdf = es.plan("0:1", epsilon=1, mechanism="cdf", bins=4, names="x")
    with pytest.raises(InputError, match="phdstream"):
        es.simulate(cdf, {"x": [0.5]}, SEED, op=[1])
    with pytest.raises(InputError, match="reading 2: phdstream channel 0 must be an integer"):
        es.simulate(config(), {"x": [1, 2, 2.5], "y": [0, 0, 0]}, SEED)


def test_no_window_is_one_step():
    data = table(30)
    one = es.simulate(config(), data, SEED, op="op", epoch=4, seq=9)
    (_, p), = payloads(one)
    assert (p["epoch"], p["seq"], p["mechs"][0]["t"]) == (4, 9, 1)
    assert one == es.simulate(config(), data, SEED, op="op", epoch=4, seq=9, runtime="numpy")


def test_cli_simulate_op_column(tmp_path):
    from click.testing import CliRunner

    from edgesynth.cli import main
    data = table(30)
    csv = tmp_path / "in.csv"
    words = {1: "insert", -1: "delete"}
    csv.write_text("x,y,kind,t\n" + "".join("%d,%d,%s,%.3f\n" % (a, b, words[c], t) for a, b, c, t in
                                           zip(data["x"], data["y"], data["op"], data["t"])))
    es.write_config(str(tmp_path / "cfg.json"), config())
    args = ["simulate", "--config", str(tmp_path / "cfg.json"), "--input", str(csv), "--time-column", "t",
            "--window", "100", "--start", str(START), "--end", str(START + 600), "--seed", SEED.hex(),
            "--op-column", "kind", "-o", str(tmp_path / "f.bin")]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert "6 frames" in r.output
    times = [float("%.3f" % t) for t in data["t"]]
    want = es.simulate_windows(config(), dict(data, t=times), "t", 100, START, START + 600, SEED, op="op")
    assert (tmp_path / "f.bin").read_bytes() == b"".join(f for _, f in want)
    csv.write_text("x,y,kind,t\n1,2,insert,%d\n3,4,remove,%d\n" % (START + 1, START + 2))
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2 and "line 3" in r.output and "'remove' is not +1/-1 or insert/delete" in r.output


# --------------------------------------------------------------- micropython
def test_micropython_frames_equal_cpython():
    try:
        mp_runtime.find_micropython()
    except InputError as e:
        pytest.skip(str(e))
    data = table(80, seed=5)
    kw = dict(key=bytes(range(32)), device_id="phd-1")
    cp = windowed(data, **kw)
    assert windowed(data, runtime="micropython", heap="64K", **kw) == cp
    assert sum(p["mechs"][0]["t"] for _, f in cp for _, p in payloads(f)) == 21
