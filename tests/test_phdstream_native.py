"""PHDStream on the C core (agent/c/es_phdstream.c): the payload entry equals
agent/phdstream's byte for byte under the same seed (Simple, Block and tree
counters, deletions, a full pool, a full batch, the replace relation), and a
windowed stream gives the same frames on the cpython, native and qemu runtimes
(one agent over every window)."""
import random
import shutil
import sys
from fractions import Fraction
from pathlib import Path

import msgpack
import numpy as np
import pytest

import edgesynth as es
from edgesynth import agent, ccore
from edgesynth.agent.errors import ConfigError, ReadingError, SealedError
from edgesynth.agent.phdstream import PHDStream
from edgesynth.errors import InputError
from edgesynth.firmware_shims.drbg import seeded_source
from edgesynth.mechanisms.cdf.plan import plan_cdf
from edgesynth.runtimes import native

sys.path.insert(0, str(Path(__file__).resolve().parent))
from phd_helpers import encoded as py_payload  # noqa: E402

pytestmark = pytest.mark.skipif(not native.available(),
                                reason="native core not built (no C compiler at install?)")
COUNTERS = {"simple": {}, "block": {"block": 3}, "tree": {"horizon": 4}}


def spec(**kw):
    s = {"kind": "phdstream", "names": ["x", "y"], "lo": [0, 0], "hi": [64, 64], "depth": 6, "eps": [4, 1],
         "counter": "simple", "max_nodes": 200, "batch_max": 1000, "snap": 3}
    s.update(kw)
    return s


def config(s, relation="add-remove"):
    m = PHDStream(s, 2 if relation == "replace" else 1)
    return {"format": 1, "epsilon": list(m.budget()), "relation": relation, "mechanisms": [s]}


def stream(steps, seed=5, first=120, per=40):
    """Windows of events [x, y, op]: a drifting cluster (some readings outside
    the box), deletions of earlier points."""
    r = random.Random(seed)
    live, out = [], []
    for t in range(steps):
        ev = []
        for _ in range(first if t == 0 else per):
            if live and r.random() < 0.3:
                ev.append(live.pop(r.randrange(len(live))) + [-1])
            else:
                x = [int(r.gauss(10 + 5 * t, 8)), int(r.gauss(50 - 4 * t, 8))]
                live.append(x)
                ev.append(x + [1])
        out.append(ev)
    return out


def lockstep(m, c, steps, **kw):
    """The same windows of stream(steps, **kw) through the Python state m
    and the C agent c, one step each: yields (index, events, C frame)."""
    for w, ev in enumerate(stream(steps, **kw)):
        if w:
            c.agent.next_window()
        for x in ev:
            m.update(x)
        c.update(ev)
        m.step()
        yield w, ev, c.release()


def check_payload(frame, m):
    """The C frame carries m's payload entry, byte for byte and as its only mechanism's entry."""
    want = py_payload(m)
    assert want in frame
    assert msgpack.unpackb(msgpack.unpackb(frame)[2])["mechs"][0] == msgpack.unpackb(want)


class CState:
    """One es_phdstream_t behind an es_agent_t (the native agent)."""

    def __init__(self, s, seed, factor=1):
        cfg = config(s, "replace" if factor == 2 else "add-remove")
        self.mem_bytes = ccore.core_params(cfg)["mem_bytes"]
        self.agent = native.NativeAgent(cfg, seed=seed)
        self.state = self.agent.mechs[0].state

    def update(self, events):
        self.agent.update_rows(np.asarray(events, dtype=np.int64).reshape(-1, 3))

    def release(self):
        return self.agent.release()


@pytest.mark.parametrize("counter", sorted(COUNTERS))
@pytest.mark.parametrize("max_nodes,batch_max,factor", [(200, 1000, 1), (15, 1000, 1), (200, 30, 1), (40, 50, 2)])
def test_c_payload_equals_python(counter, max_nodes, batch_max, factor):
    """Every window's payload entry: the C frame carries agent/phdstream's
    exact bytes; the pool fills (max_nodes 15, 40) and batches overflow
    (batch_max 30, 50) as in Python, and the C memory is its counter_bytes."""
    s = spec(counter=counter, max_nodes=max_nodes, batch_max=batch_max, **COUNTERS[counter])
    m = PHDStream(s, factor)
    m.draw_noise(seeded_source(b"phd-native"))
    c = CState(s, b"phd-native", factor)
    assert c.mem_bytes == (m.counter_bytes() + 3) // 4 * 4
    for _, _, frame in lockstep(m, c, 10):
        check_payload(frame, m)
        assert c.release() == frame  # a repeated release: the same step, the same bytes
        st = c.state
        assert (st.used, st.refused_splits, st.refused_events, st.t) == (m.used, m.refused_splits,
                                                                          m.refused_events, m.t)
    if max_nodes < 100:
        assert m.refused_splits > 0 and m.used == max_nodes - (max_nodes - 1) % 2
    if batch_max < 40:
        assert m.refused_events > 0


def windows(steps=6, first_epoch=100, first_seq=3):
    return [(first_epoch + 2 * w, first_seq + w, ev) for w, ev in enumerate(stream(steps, seed=9, per=60))]


def cpython_frames(cfg, wins, seed, key=None):
    a = None
    out = []
    for e, q, rows in wins:
        if a is None:
            a = agent.Agent(cfg, seed=seed, device_id="dev-1", epoch=e, seq=q, key=key)
        else:
            a.next_window(e)
        for x in rows:
            a.update(x)
        out.append((e, bytes(a.release())))
    return out


@pytest.mark.parametrize("counter", sorted(COUNTERS))
def test_windowed_frames_native_equal_cpython(counter):
    """One agent over windows (epochs with a gap, seq + 1 each), keyed frames."""
    cfg = config(spec(counter=counter, max_nodes=60, **COUNTERS[counter]))
    wins = windows()
    want = cpython_frames(cfg, wins, b"w-seed", key=b"k" * 32)
    got = native.run_native_stream(cfg, [(e, q, np.array(r)) for e, q, r in wins], seed=b"w-seed",
                                   device_id="dev-1", key=b"k" * 32)
    assert got == want
    assert [msgpack.unpackb(msgpack.unpackb(f)[2])["seq"] for _, f in got] == [3, 4, 5, 6, 7, 8]


def test_native_agent_refuses_like_python():
    """Bad ops and non-integers store nothing; updates after a release and a
    next window before one are refused; phdstream runs alone."""
    cfg = config(spec())
    a = native.NativeAgent(cfg, seed=b"x")
    p = agent.Agent(cfg, seed=b"x")
    for bad in ([1, 2, 0], [1, 2, 2], [1, 2, True], [1.5, 2, 1]):
        with pytest.raises(ReadingError):
            a.update(bad)
        with pytest.raises(ReadingError):
            p.update(bad)
    with pytest.raises(ReadingError, match="reading 1: op 0 is not"):
        a.update_rows(np.array([[1, 2, 1], [3, 4, 0]]))
    with pytest.raises(ConfigError, match="release this window"):
        a.next_window()
    a.update([3, 4, 1])
    p.update([3, 4, 1])
    assert a.release() == bytes(p.release())  # the refused events stored nothing
    with pytest.raises(SealedError):
        a.update([3, 4, 1])
    with pytest.raises(ConfigError, match="epoch"):
        a.next_window(0)
    a.next_window(5)
    a.update([3, 4, -1])
    p.next_window(5)
    p.update([3, 4, -1])
    assert a.release() == bytes(p.release())
    cdf = plan_cdf([0], [100], Fraction(1), 16, names=["z"])
    with pytest.raises(ConfigError, match="runs alone"):
        ccore.core_params(dict(cfg, mechanisms=[spec(), cdf["mechanisms"][0]]))
    with pytest.raises(ConfigError, match="next_window serves a phdstream"):
        native.NativeAgent(cdf, seed=b"x").next_window()


def test_c_agent_keeps_a_continual_state_alone():
    """es_agent_init refuses phdstream beside another state; next window is
    for continual agents only, after a release, with a later epoch."""
    from edgesynth.runtimes._es_native import ffi, lib
    phd = native.NativeAgent(config(spec()), seed=b"x")
    cdf = native.NativeAgent(plan_cdf([0], [100], Fraction(1), 16, names=["z"]), seed=b"x")
    a = ffi.new("es_agent_t *")
    rng = ffi.new("es_drbg_t *")
    assert lib.es_drbg_seeded(rng, b"x", 1) == 0
    bases = ffi.new("es_mech_t *[]", [phd.mechs[0].base, cdf.mechs[0].base])
    assert lib.es_agent_init(a, bases, 2, 1, 2, 1, b"dev", 3, 0, 0, ffi.NULL, 0, rng) == native.ES_E_CONFIG
    cdf.release()
    assert lib.es_agent_next_window(cdf._agent, 1) == native.ES_E_CONFIG
    assert lib.es_agent_next_window(phd._agent, 1) == native.ES_E_SEALED  # not released yet
    phd.release()
    assert lib.es_agent_next_window(phd._agent, 0) == native.ES_E_CONFIG  # epoch not above 0
    assert lib.es_agent_next_window(phd._agent, 1) == 0 and (phd._agent.epoch, phd._agent.seq) == (1, 1)


def test_fallback_without_the_core_gives_the_same_frames(monkeypatch):
    """Where the extension is not built, the native runtime is the Python
    agent (with a warning): the same bytes."""
    cfg = config(spec(counter="tree", horizon=4, max_nodes=60))
    wins = windows(steps=3)
    want = cpython_frames(cfg, wins, b"f-seed")
    monkeypatch.setattr(native, "lib", None)
    with pytest.warns(RuntimeWarning, match="not built"):
        got = native.run_native_stream(cfg, [(e, q, np.array(r, dtype=float)) for e, q, r in wins],
                                       seed=b"f-seed", device_id="dev-1")
    assert got == want


@pytest.mark.skipif(not shutil.which("arm-none-eabi-gcc"), reason="arm-none-eabi-gcc not installed")
def test_firmware_build_sizes_a_phdstream_device():
    """edgesynth firmware build --config: RAM = the pool's memory + the state
    structs; the phdstream chain (step below the release) is the deepest."""
    from edgesynth.targets.firmware import build
    cfg = config(spec(counter="block", block=8, max_nodes=1000, batch_max=500))
    r = build("cortex-m0plus", cfg)
    st = r["state"]
    assert r["config"]["kinds"] == ["phdstream"] and not r["config"]["float"]
    assert r["counters_bytes"] == ccore.core_params(cfg)["mem_bytes"] == 1000 * 56 + 500 * 4 + 752
    assert r["ram_bytes"] == r["counters_bytes"] + st["es_phdstream_t"] + st["es_agent_t"]
    assert r["stack_by_kind"]["phdstream"] == max(r["stack"].values()) > r["stack_by_kind"]["privhp"]


@pytest.mark.skipif(not shutil.which("arm-none-eabi-gcc"), reason="arm-none-eabi-gcc not installed")
@pytest.mark.parametrize("cpu", ["cortex-m4", "cortex-m0plus"])
def test_the_planner_charges_what_a_c_phdstream_device_needs(cpu):
    """plan's C charge for phdstream holds the agent, the state (with its
    DRBG), the construction DRBG and the deepest phdstream chain."""
    from edgesynth.ram import RUNTIME_OVERHEAD
    from edgesynth.targets.firmware import build
    r = build(cpu)
    st = r["state"]
    need = st["es_agent_t"] + st["es_phdstream_t"] + st["es_drbg_t"] + r["stack_by_kind"]["phdstream"]
    assert need <= RUNTIME_OVERHEAD["c"]["phdstream"] < need + 512


def test_run_native_stream_input_errors():
    cfg = config(spec())
    with pytest.raises(InputError, match="reading 0: op 3 is not"):
        native.run_native_stream(cfg, [(0, 0, np.array([[1, 2, 3]]))], seed=b"s")
    with pytest.raises(InputError, match="invalid device config"):
        native.run_native_stream(dict(cfg, epsilon=[1, 1]), [(0, 0, np.array([[1, 2, 1]]))], seed=b"s")


START = 1_700_000_000  # a multiple of the 100 s window
QEMU = shutil.which("qemu-system-arm") and shutil.which("arm-none-eabi-gcc")


def table(n=150, seed=4):
    """Columns x, y, op ("insert"/"delete") and t over 5 windows of 100 s, the
    third empty."""
    ev = [x for w in stream(3, seed=seed, first=n // 3, per=n // 3) for x in w]
    t = np.sort(np.random.default_rng(seed).uniform(START, START + 400, len(ev)))
    t[t >= START + 200] += 100
    return {"x": [e[0] for e in ev], "y": [e[1] for e in ev], "op": ["insert" if e[2] > 0 else "delete" for e in ev],
            "t": t}


@pytest.mark.parametrize("runtime", ["native", pytest.param("qemu", marks=pytest.mark.skipif(
    not QEMU, reason="qemu-system-arm or arm-none-eabi-gcc not installed"))])
def test_simulate_windows_runtimes_equal_cpython(runtime):
    """es.simulate_windows: one agent, one frame per window (the empty one
    too), the same bytes on the C core natively and bare metal (Cortex-M4
    under QEMU) as on cpython."""
    cfg = config(spec(counter="block", block=3, max_nodes=60))
    data = table()
    want = es.simulate_windows(cfg, data, "t", 100, START, START + 500, b"sim-seed", op="op")
    got = es.simulate_windows(cfg, data, "t", 100, START, START + 500, b"sim-seed", op="op", runtime=runtime)
    assert len(want) == 5 and got == want
    one = es.simulate(cfg, data, b"sim-seed", op="op", epoch=4, seq=9)  # no windows: one step
    assert es.simulate(cfg, data, b"sim-seed", op="op", epoch=4, seq=9, runtime=runtime) == one


@pytest.mark.parametrize("fold", [0, 1])
def test_c_step_keeps_no_segment_of_the_batch(fold):
    """As in Python: after a step the C queue holds no node's batch segment
    (q_lo/q_hi) and the batch is clear; with folding the C frames still equal
    Python's (the fold pass runs before the Cd pass in both)."""
    s = spec(snap=1000, fold=fold, max_nodes=41)
    m = PHDStream(s)
    m.draw_noise(seeded_source(b"phd-queue"))
    c = CState(s, b"phd-queue")
    for w, ev, frame in lockstep(m, c, 6):
        assert py_payload(m) in frame
        st = c.state
        assert st.nb == 0 and st.err == 0 and st.nv > 1
        assert not any(st.codes[i] or st.signs[i] for i in range(len(ev)))
        if w:  # step 1 carries a snapshot, whose order arrays reuse q_lo/q_hi
            assert not any(st.q_lo[i] or st.q_hi[i] for i in range(st.nv))


def test_c_diagnostics_saturate_like_python():
    """refused_events stops at 2**30 - 1 in C as in Python (MicroPython small ints)."""
    from edgesynth.agent import phdstream
    s = spec(batch_max=1)
    c = CState(s, b"phd-cap")
    c.state.refused_events = phdstream.MAX_COUNT - 1
    c.update([[1, 2, 1]] * 4)
    assert c.state.refused_events == phdstream.MAX_COUNT
