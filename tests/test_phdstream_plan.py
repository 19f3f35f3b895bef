"""``plan --mechanism phdstream``: exact array bytes, the pool that fills the
RAM, the batch and epsilon rules (--max-events), depth, refusals, the CLI,
and a 64 KiB plan running on the MicroPython unix port in its stated heap."""
import json
from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner

import edgesynth as es
from edgesynth import agent
from edgesynth.agent.phdstream import PHDStream
from edgesynth.cli import main
from edgesynth.errors import InputError
from edgesynth.mechanisms.phdstream.plan import (
    BATCH_SHARE,
    DEFAULT_FOLD,
    construction_transient,
    depth_cap,
    parse_counter,
    state_bytes,
)
from edgesynth.ram import heap_need
from edgesynth.runtimes import micropython as mp_runtime

BOUNDS = "0:1000,0:1000"


def plan(**kw):
    args = dict(epsilon=1, ram="64K", mechanism="phdstream")
    args.update(kw)
    return es.plan(kw.pop("bounds", BOUNDS), **{k: v for k, v in args.items() if k != "bounds"})


@pytest.mark.parametrize("counter,extra,nodes,batch", [
    ("simple", {}, 3, 1), ("simple", {}, 533, 1435), ("block", {"block": 8}, 465, 500),
    ("block", {"block": 3}, 64, 7), ("tree", {"horizon": 128}, 101, 40), ("tree", {"horizon": 1}, 9, 9)])
def test_state_bytes_equal_the_devices(counter, extra, nodes, batch):
    spec = {"kind": "phdstream", "lo": [0, 0], "hi": [9, 9], "depth": 4, "eps": [1, 2], "counter": counter,
            "max_nodes": nodes, "batch_max": batch, **extra}
    assert PHDStream(spec).counter_bytes() == state_bytes(nodes, batch, counter, extra.get("horizon", 0))


def test_pool_fills_the_ram_and_the_agent_takes_the_config():
    cfg = plan()
    m, p = cfg["mechanisms"][0], cfg["plan"]
    ram = 64 * 1024
    nodes, batch = m["max_nodes"], m["batch_max"]
    assert p["pool_nodes"] == nodes and nodes % 2 == 1 and nodes > 250
    k = m["fold"]  # the pool cannot hold the depth-18 tree: fold-pruning is on
    assert k == p["fold"] == DEFAULT_FOLD
    assert p["counter_bytes"] == state_bytes(nodes, batch, fold=k)
    need = heap_need(state_bytes(nodes, batch, fold=k), "micropython", "phdstream", channels=2,
                     transient=construction_transient(nodes, batch, fold=k))
    assert p["expected_peak_bytes"] == need <= ram
    assert heap_need(state_bytes(nodes + 2, batch, fold=k), "micropython", "phdstream", channels=2,
                     transient=construction_transient(nodes + 2, batch, fold=k)) > ram  # the largest pool that fits
    # the batch's share: a quarter of the RAM beyond the runtime's overhead
    overhead = heap_need(0, "micropython", "phdstream", channels=2, transient=4)
    assert batch == int((ram - overhead) * BATCH_SHARE) // 5
    # without --max-events the mechanism runs at eps/2: its budget() (2 eps) is the config's epsilon
    assert m["eps"] == [1, 2] and m["rate_bound"] is False and cfg["epsilon"] == [1, 1]
    assert m["names"] == ["x0", "x1"] and m["op"] == "op" and m["depth"] == 18
    a = agent.Agent(cfg, seed=b"plan-test-seed00")
    assert Fraction(*a.mechs[0].budget()) == 1 and a.counter_bytes() == p["counter_bytes"]


def test_max_events_sets_the_batch_and_the_full_epsilon():
    cfg = plan(max_events=500, counter="block:8", epsilon="1/2")
    m, p = cfg["mechanisms"][0], cfg["plan"]
    assert (m["batch_max"], m["rate_bound"], m["eps"], m["counter"], m["block"]) == (500, True, [1, 2], "block", 8)
    assert "at most 500 events" in p["guarantee"] and p["counter"] == "block:8"
    agent.Agent(cfg, seed=b"plan-test-seed00")
    replace = plan(relation="replace")  # a replaced reading may move between two full windows: halved too
    assert replace["mechanisms"][0]["eps"] == [1, 2] and "runs at epsilon/2" in replace["plan"]["guarantee"]
    assert "runs at epsilon/2" in plan()["plan"]["guarantee"]
    agent.Agent(replace, seed=b"plan-test-seed00")
    tree = plan(counter="tree:64", names="lon,lat", op_name="kind", snap=5)["mechanisms"][0]
    assert (tree["horizon"], tree["names"], tree["op"], tree["snap"]) == (64, ["lon", "lat"], "kind", 5)


def test_depth_default_and_cap():
    assert depth_cap([0], [15]) == 3 and depth_cap([0, 0], [1000, 3]) == 10 and depth_cap([0], [1]) == 1
    assert depth_cap([0] * 8, [2 ** 29 - 1] * 8) == 28
    assert plan(bounds="0:15")["mechanisms"][0]["depth"] == 3
    assert plan(bounds="0:100000,0:100000")["mechanisms"][0]["depth"] == 20   # the paper's D
    assert plan(depth=7)["mechanisms"][0]["depth"] == 7
    with pytest.raises(InputError, match=r"--depth must be in \[1, 3\]"):
        plan(bounds="0:15", depth=4)


@pytest.mark.parametrize("kw,msg", [
    (dict(ram="20K"), "below phdstream's measured runtime overhead"),
    (dict(max_events=2 ** 20), "cannot hold a phdstream state with a 1048576-event batch: it needs at least"),
    (dict(bounds="0:1.5"), "not a whole number"),
    (dict(counter="tree:3"), "power of 2"),
    (dict(counter="block:1"), "K in"),
    (dict(counter="fancy"), "simple, block:K or tree"),
    (dict(epsilon="0.000002"), "noise scale"),
    (dict(epsilon="0.000001"), "denominator exceeds 10"),
    (dict(op_name="x0"), "also a channel"),
    (dict(transport="mqtt"), "not planned for phdstream"),
    (dict(ram=None), "needs --bounds and --ram"),
    (dict(integer="x0"), "implied"),
    (dict(bounds="%d:%d" % (2 ** 31 - 100, 2 ** 31)),
     r"within \[-\(2\*\*31 - 1\), 2\*\*31 - 2\] \(int32\), got 2147483648"),
    (dict(bounds="%d:%d" % (-2 ** 40, -2 ** 40 + 100)), "int32"),
])
def test_refusals(kw, msg):
    with pytest.raises(InputError, match=msg):
        plan(**kw)


def test_parse_counter():
    assert parse_counter("simple") == ("simple", 0, 0)
    assert parse_counter("block") == ("block", 8, 0)
    assert parse_counter(" tree ") == ("tree", 0, 128)
    assert parse_counter("tree:16") == ("tree", 0, 16)


def test_cli_plan(tmp_path):
    out = tmp_path / "cfg.json"
    r = CliRunner().invoke(main, ["plan", "--mechanism", "phdstream", "--bounds", BOUNDS, "--epsilon", "1",
                                  "--ram", "64K", "--max-events", "800", "--counter", "tree", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "phdstream depth 18, tree:128 counter, pool of" in r.output and "batch of 800 events" in r.output
    assert "guarantee: epsilon 1 per event" in r.output
    assert json.loads(out.read_text()) == plan(max_events=800, counter="tree")
    r = CliRunner().invoke(main, ["plan", "--mechanism", "phdstream", "--bounds", BOUNDS, "--epsilon", "1",
                                  "--ram", "16K", "-o", str(out)])
    assert r.exit_code == 2 and r.output.startswith("error: a 16384-byte budget is below")


def test_combine_refuses_a_phdstream_config():
    other = es.plan({"x0": (0, 1024)}, epsilon=1, mechanism="cdf", bins=16)
    with pytest.raises(InputError, match="phdstream mechanism runs alone"):
        es.combine([plan(max_events=800), other])


def test_a_64k_plan_runs_on_micropython_in_its_heap():
    """The planned 64 KiB device runs a windowed stream with deletions on the
    unix port with -X heapsize=64wK, and its frames equal CPython's."""
    try:
        mp_runtime.find_micropython()
    except InputError as e:
        pytest.skip(str(e))
    cfg = plan()
    batch = cfg["mechanisms"][0]["batch_max"]
    rng = np.random.default_rng(7)
    n = 3000
    t = np.sort(rng.uniform(0, 800, n))
    data = {"x0": rng.integers(0, 1001, n), "x1": rng.integers(0, 1001, n),
            "op": np.where(rng.random(n) < 0.3, -1, 1), "t": t}
    assert np.bincount((t // 100).astype(int)).max() <= batch  # every window fits: no event refused
    kw = dict(op="op")
    cp = es.simulate_windows(cfg, data, "t", 100, 0, 800, b"plan-test-seed00", **kw)
    mp = es.simulate_windows(cfg, data, "t", 100, 0, 800, b"plan-test-seed00", runtime="micropython", heap="64K",
                             **kw)
    assert mp == cp and len(cp) == 8
    assert Fraction(cfg["plan"]["expected_peak_bytes"]) <= 64 * 1024
