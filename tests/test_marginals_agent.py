"""The marginals mechanism end to end through the agent: plan_marginals's
config -> Agent -> frame -> frames.parse_frame -> Measurements; the "other"
cell; public choices (schema, partitions, budget) identical whatever the
window's data; a golden frame; MicroPython's frame byte-identical to
CPython's; a reboot through the ledger; a config combined with a CDF."""
import hashlib
import json
import math
from fractions import Fraction

import numpy as np
import pytest

from edgesynth.agent import Agent
from edgesynth.agent.ledger import Device, provision
from edgesynth.config import combine
from edgesynth.frames import parse_frame
from edgesynth.mechanisms.cdf.plan import plan_cdf
from edgesynth.mechanisms.marginals.plan import plan_marginals
from edgesynth.mechanisms.marginals.schema import Schema
from edgesynth.mechanisms.marginals.wire import MarginalsState
from edgesynth.runtimes.cpython import run_cpython
from tests.helpers import micropython_exe

SCHEMA = Schema.from_json({"columns": [{"name": "site", "values": ["A", "B", "C"]},
                                       {"name": "hour", "values": [0, 6, 12, 18]},
                                       {"name": "temp", "bounds": [-10, 30], "bins": 4}]})
# (0, 2): 4 x 5 cells in 4 groups, a public partition (e.g. from an earlier window's model)
PART = {(0, 2): [0, 0, 1, 1, 3, 0, 0, 1, 1, 3, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3]}
SEED = b"marginals-agent-seed"
HEAP = 64 * 1024  # 32-bit-equivalent MicroPython heap the device run is stated in


def config(partitions=PART, eps=Fraction(1)):
    return plan_marginals(SCHEMA, eps, partitions=partitions)


def raw_table(n, seed):
    """n raw records (site, hour, temp) with unknown and missing values."""
    rng = np.random.default_rng(seed)
    site = rng.choice(["A", "B", "C", "Z", None], size=n, p=[0.4, 0.3, 0.2, 0.05, 0.05]).tolist()
    hour = rng.choice([0, 6, 12, 18, 7], size=n).tolist()
    temp = rng.normal(10, 12, size=n)
    temp[rng.random(n) < 0.03] = np.nan
    return {"site": site, "hour": hour, "temp": temp}


def cells(table):
    """Per record, its cell indices (the host glue's Schema.encode_column)."""
    cols = [SCHEMA.encode_column(i, table[name]) for i, name in enumerate(SCHEMA.names)]
    return [tuple(int(v) for v in r) for r in zip(*cols)]


def frame(cfg, rows, seed=SEED):
    a = Agent(cfg, seed=seed, device_id="gw-1")
    for r in rows:
        a.update(r)
    return bytes(a.release())


def state(data):
    rel, end = parse_frame(data)
    assert end == len(data) and len(rel.mechs) == 1
    return rel.mechs[0]


def true_totals(cfg, rows):
    """Per marginal, the exact group counts of ``rows`` (numpy, not the device)."""
    spec = cfg["mechanisms"][0]
    x = np.array(rows, dtype=np.int64).reshape(-1, len(SCHEMA.sizes))
    out = []
    for w, c in enumerate(spec["cols"]):
        idx = np.ravel_multi_index(tuple(x[:, i] for i in c), tuple(SCHEMA.sizes[i] for i in c))
        g = spec["groups"][w]
        lab = np.arange(math.prod(SCHEMA.sizes[i] for i in c)) if g is None else np.array(g)
        out.append(np.bincount(lab[idx], minlength=lab.max() + 1))
    return out


def test_frame_totals_minus_the_seeded_noise_are_the_true_counts():
    cfg = config()
    rows = cells(raw_table(3000, 1))
    got = state(frame(cfg, rows))
    noise = state(frame(cfg, []))  # the same seed draws the same noise: the empty window's totals
    assert isinstance(got, MarginalsState) and got.names == SCHEMA.names and got.sizes == SCHEMA.sizes
    want = true_totals(cfg, rows)
    ms, ns = got.measurements(), noise.measurements()
    assert len(ms) == len(cfg["mechanisms"][0]["cols"]) == 6
    for m, z, t in zip(ms, ns, want):
        assert np.array_equal(m.y - z.y, t)
        assert m.group_sums(np.ones(len(m.groups))).sum() == len(m.groups)
    assert got.budget == (sum(cfg["mechanisms"][0]["sigma"]), cfg["mechanisms"][0]["q"])
    assert Fraction(*got.budget) == Fraction(1)


def test_unknown_missing_and_out_of_range_values_count_in_the_other_cell():
    cfg = config(partitions=None)
    table = {"site": ["Z", None, float("nan"), "A"], "hour": [7, None, "x", 0],
             "temp": [np.nan, 31.0, -10.5, 30.0]}
    rows = cells(table)
    assert rows == [(3, 4, 4), (3, 4, 4), (3, 4, 4), (0, 0, 3)]
    got, noise = state(frame(cfg, rows)), state(frame(cfg, []))
    one_way = {m.cols: m.y - z.y for m, z in zip(got.measurements(), noise.measurements()) if len(m.cols) == 1}
    assert one_way[(0,)].tolist() == [1, 0, 0, 3]
    assert one_way[(1,)].tolist() == [1, 0, 0, 0, 3]
    assert one_way[(2,)].tolist() == [0, 0, 0, 1, 3]  # 30 = hi is in the last bin; NaN and outside are "other"
    # the device itself sends an index outside the column (or NaN) to "other" too
    raw = [(5, -1, float("nan")), (2.0, 3.5, 0)]
    direct = state(frame(cfg, raw))
    assert [m.y - z.y for m, z in zip(direct.measurements(), noise.measurements())][0].tolist() == [0, 0, 1, 1]


def test_public_choices_are_the_same_whatever_the_data():
    """Two windows of different data under one config: every field but the
    totals is identical (schema, marginals, partitions, budget), so nothing
    public in the frame depends on the window's own records."""
    cfg = config()
    a = state(frame(cfg, cells(raw_table(2000, 2))))
    b = state(frame(cfg, cells(raw_table(500, 3)), seed=b"another-seed"))
    assert a.schema.to_json() == b.schema.to_json() == SCHEMA.to_json()
    assert a.cols == b.cols and a.sigma == b.sigma and a.q == b.q and a.budget == b.budget
    assert all(np.array_equal(x, y) for x, y in zip(a.groups, b.groups))
    assert a.same_config(b)
    assert not all(np.array_equal(x, y) for x, y in zip(a.totals, b.totals))


# sha256 of the frame of GOLDEN_ROWS under config() at eps = 1, seed SEED,
# device "gw-1": the frame is a wire format; a change to its bytes (draw order,
# keys, the schema's encoding) must be deliberate
GOLDEN = "f9be7b39cb0fb5d90b6f41212a0d8b99334dff021e7065969cb28e3e696d0232"
GOLDEN_ROWS = [(0, 0, 0), (1, 2, 3), (2, 3, 4), (3, 4, 1), (0, 1, 2)] * 7


def test_golden_frame():
    assert hashlib.sha256(frame(config(), GOLDEN_ROWS)).hexdigest() == GOLDEN


def test_micropython_frame_equals_cpython_frame():
    """The same config, seed and records through host_tools/runtimes: the
    MicroPython unix port (a 64 KiB 32-bit-equivalent heap) writes the
    CPython agent's bytes, NaN and float cell indices included."""
    micropython_exe()
    from edgesynth.runtimes.micropython import run_micropython
    cfg = config()
    rows = cells(raw_table(400, 4)) + [(1, float("nan"), 2.5), (7, -1, 0)]
    cp = run_cpython(cfg, rows, seed=SEED, device_id="gw-1")
    mp = run_micropython(cfg, rows, HEAP, seed=SEED, device_id="gw-1")
    assert len(cp) > 300 and mp == cp
    assert state(mp).frames == 1


def test_reboot_restores_the_noisy_counters(tmp_path):
    """A marginals device with a ledger: records, a checkpoint, a reboot
    (a new Device over the same state file), more records: its frame is the
    frame of one uninterrupted window."""
    cfg = config()
    cfg["device"] = {"lifetime_epsilon": [4, 1]}
    key = bytes(range(32))
    path = str(tmp_path / "state.bin")
    provision(cfg, path, "gw-1", key)
    rows = cells(raw_table(300, 5))
    d = Device(cfg, path, "gw-1", key, seed=b"boot")
    for r in rows[:200]:
        d.update(r)
    d.checkpoint()
    d = None
    d = Device(cfg, path, "gw-1", key, seed=b"boot")  # reboot
    for r in rows[200:]:
        d.update(r)
    out = bytes(d.release())
    one = Agent(cfg, seed=b"boot-0", device_id="gw-1", key=key)
    for r in rows:
        one.update(r)
    assert out == bytes(one.release())


def test_combined_with_a_cdf_in_one_config():
    """Decision 3: marginals next to a cdf; the reading holds the schema's
    cell columns and the cdf's raw channel, each mechanism reads its own."""
    half = Fraction(1, 2)
    m = plan_marginals(SCHEMA, half, partitions=None)
    c = plan_cdf([0.0], [100.0], half, 16, names=["load"])
    cfg = combine([m, c])
    rows = cells(raw_table(200, 6))
    load = [float(7 * i % 100) for i in range(200)]
    a = Agent(cfg, seed=SEED)
    assert a.inputs == ["site", "hour", "temp", "load"]
    for r, x in zip(rows, load):
        a.update(r + (x,))
    rel, _ = parse_frame(bytes(a.release()))
    kinds = [s.kind for s in rel.mechs]
    assert kinds == ["marginals", "cdf"] and Fraction(*rel.eps) == 1
    alone = state(frame(m, rows, seed=SEED))
    assert rel.mechs[0].cols == alone.cols
    noise = state(frame(m, [], seed=SEED))
    # the combined agent draws the marginals' noise first from the same seed
    assert all(np.array_equal(x.y - z.y, t) for x, z, t in
               zip(rel.mechs[0].measurements(), noise.measurements(), true_totals(m, rows)))
    assert json.loads(json.dumps(cfg)) == cfg  # JSON-ready


def test_micropython_plan_runs_in_its_ram_and_is_refused_below_it():
    """plan --device-runtime micropython charges the measured base, shape and
    schema terms (host_tools/ram.py): a 40 KiB plan runs in a 40 KiB heap; a
    budget below the charge is refused in one line."""
    micropython_exe()
    from edgesynth.errors import InputError
    from edgesynth.runtimes.micropython import run_micropython
    cfg = plan_marginals(SCHEMA, Fraction(1), ram=40 * 1024, runtime="micropython", partitions=PART)
    assert cfg["plan"]["device_runtime"] == "micropython" and cfg["plan"]["expected_peak_bytes"] <= 40 * 1024
    rows = cells(raw_table(300, 7))
    assert run_micropython(cfg, rows, 40 * 1024, seed=SEED) == run_cpython(cfg, rows, seed=SEED)
    with pytest.raises(InputError, match="for the micropython runtime\\); --ram gives 20480"):
        plan_marginals(SCHEMA, Fraction(1), ram=20 * 1024, runtime="micropython")
    with pytest.raises(InputError, match="not 'qemu'"):
        plan_marginals(SCHEMA, Fraction(1), runtime="qemu")


@pytest.mark.parametrize("kind, n", [("int", 50), ("int", 300), ("int", 4000), ("float", 100), ("float", 300),
                                     ("float", 2000), ("str", 100)])
def test_micropython_numeric_values_run_in_their_planned_heap(kind, n):
    """A schema's int and float values are charged what the device's check
    of them costs (host_tools/ram.py MARGINALS_VALUE_BYTES): a plan with one
    column of n such values runs in its expected_peak_bytes on the unix port
    (it did not while every number's text was built to compare them)."""
    micropython_exe()
    from edgesynth.runtimes.micropython import run_micropython
    vals = {"int": list(range(100000, 100000 + n)), "float": [i + 0.5 for i in range(n)],
            "str": ["s%011d" % i for i in range(n)]}[kind]
    s = Schema.from_json({"columns": [{"name": "a", "values": vals}, {"name": "b", "values": [0, 1]}]})
    cfg = plan_marginals(s, Fraction(1), marginals=[(0,), (1,)], runtime="micropython")
    rows = [(i % n, i % 3) for i in range(50)]
    need = cfg["plan"]["expected_peak_bytes"]
    assert run_micropython(cfg, rows, need, seed=SEED) == run_cpython(cfg, rows, seed=SEED)
