"""How bounds are written does not change a plan; integer channels are
declared (plan --integer / es.plan(integer=...)) and give whole-number
synthetic values (issue 17, item 1)."""
import json

import msgpack
import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats

import edgesynth as es
from edgesynth.cli import main
from edgesynth.evaluation.metrics import w1_joint
from edgesynth.mechanisms.cdf.generator import CDFGenerator
from edgesynth.mechanisms.integers import cell_integers
from edgesynth.mechanisms.privhp.generator import Generator as PrivHPGenerator
from edgesynth.mechanisms.privhp.growth import Leaves
from edgesynth.mechanisms.privhp.plan import channel_bits, choose_depth


def run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def _clusters(n, seed=3):
    """Readings in [0, 1]^2: three blobs, the kind of structure a 2x2 grid loses."""
    rng = np.random.default_rng(seed)
    c = np.array([[0.2, 0.3], [0.7, 0.8], [0.6, 0.2]])[rng.integers(0, 3, n)]
    return np.clip(c + rng.normal(0, 0.06, (n, 2)), 0, 1)


def test_written_as_integers_or_floats_plans_the_same(tmp_path):
    a = es.plan("0:1,0:1", epsilon=1, ram="64K", hash_seed="s")
    b = es.plan("0.0:1.0,0.0:1.0", epsilon=1, ram="64K", hash_seed="s")
    c = es.plan([(0, 1), (np.int64(0), 1.0)], epsilon=1, ram="64K", hash_seed="s")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) == json.dumps(c, sort_keys=True)
    assert a["mechanisms"][0]["lo"] == [0.0, 0.0] and all(isinstance(v, float) for v in a["mechanisms"][0]["hi"])
    for mech in ("cdf",):
        assert es.plan("0:1", epsilon=1, ram="32K", mechanism=mech) == \
            es.plan("0.0:1.0", epsilon=1, ram="32K", mechanism=mech)
    p, q = tmp_path / "p.json", tmp_path / "q.json"
    assert run("plan", "--bounds", "0:1,0:1", "--epsilon", "1", "--ram", "64K", "--hash-seed", "s", "-o", p)[0] == 0
    assert run("plan", "--bounds", "0.0:1.0,0.0:1.0", "--epsilon", "1", "--ram", "64K", "--hash-seed", "s",
               "-o", q)[0] == 0
    assert p.read_bytes() == q.read_bytes()


def test_the_reported_case_plans_a_fine_grid_and_its_data_are_close():
    """--bounds 0:1,0:1 on data in [0, 1], 64 KiB: r was 2 (a 2x2 grid, joint W1 10x worse)."""
    x = _clusters(30000)

    def joint_w1(cfg):
        gen = es.assemble(es.simulate(cfg, x, seed=1, runtime="numpy"))
        return w1_joint(x, gen.sample_array(30000, seed=2), 4, m=1000, reps=1)

    fine = es.plan("0:1,0:1", epsilon=1, ram="64K", hash_seed="r")
    assert fine["mechanisms"][0]["r"] > 2
    w1 = joint_w1(fine)
    # declaring both channels integer gives the old plan of these bounds: the 2x2 grid
    coarse = es.plan("0:1,0:1", epsilon=1, ram="64K", hash_seed="r", integer=["x0", "x1"])
    assert coarse["mechanisms"][0]["r"] == 2
    w1_coarse = joint_w1(coarse)
    # the fine plan is as good as the estimator can tell (near its subsampling floor); the grid is not
    assert w1["w1"] < 1.5 * w1["floor"] + 0.005 and w1_coarse["w1"] > 3 * w1["w1"]


def test_declared_integer_channels_keep_int_bounds_in_the_config(tmp_path):
    cfg = es.plan({"temp": (0, 110), "count": (0.0, 1023.0)}, epsilon=1, ram="64K", integer=["count"])
    m = cfg["mechanisms"][0]
    assert m["lo"] == [0.0, 0] and m["hi"] == [110.0, 1023]
    assert [type(v) for v in m["lo"]] == [float, int] and [type(v) for v in m["hi"]] == [float, int]
    by_position = es.plan({"temp": (0, 110), "count": (0.0, 1023.0)}, epsilon=1, ram="64K", integer=[1],
                          hash_seed=m["hash_seed"])
    assert by_position == cfg
    out = tmp_path / "c.json"
    code, line, _ = run("plan", "--bounds", "0:110,0.0:1023.0", "--names", "temp,count", "--integer", "count",
                        "--epsilon", "1", "--ram", "64K", "-o", out)
    assert code == 0 and '"hi": [\n    110.0,\n    1023\n   ]' in out.read_text()
    cdf = es.plan("0:10,0:10", epsilon=1, mechanism="cdf", ram="32K", integer="x1")["mechanisms"][0]
    assert cdf["lo"] == [0.0, 0] and cdf["bins"] > 10  # K is shared: a real-valued channel is not capped
    cdf = es.plan("0:10,0:1000", epsilon=1, mechanism="cdf", ram="32K", integer="x0,x1")["mechanisms"][0]
    assert cdf["bins"] == 1000  # all integer: one bin per value of the widest channel


def test_plan_line_and_json_state_the_resolution_per_channel(tmp_path):
    out = tmp_path / "c.json"
    code, line, _ = run("plan", "--bounds", "0:110,0:100,0:1023", "--names", "temp,humid,count", "--integer",
                        "count", "--epsilon", "1", "--ram", "64K", "-o", out)
    assert code == 0
    m = json.loads(out.read_text())["mechanisms"][0]
    bits = channel_bits(3, m["r"])
    want = [(h - lo) / 2 ** b for lo, h, b in zip(m["lo"], m["hi"], bits)]
    want[2] = max(want[2], 1)  # an integer channel's resolution is at least one unit
    assert "; resolution temp %.3g, humid %.3g (integer: count %.3g)" % tuple(want) in line
    code, text, _ = run("plan", "--bounds", "0:110,0:100,0:1023", "--names", "temp,humid,count", "--integer",
                        "count", "--epsilon", "1", "--ram", "64K", "--json", "-o", out)
    assert json.loads(text)["resolution"] == dict(zip(["temp", "humid", "count"], want))
    code, line, _ = run("plan", "--mechanism", "cdf", "--bounds", "-40:85", "--bins", "500", "--epsilon", "1",
                        "-o", out)
    assert code == 0 and line.rstrip().endswith("; resolution x0 0.25")


def test_a_narrow_integer_channel_does_not_coarsen_the_others():
    free = es.plan("0:1,0:10", epsilon=1, ram="64K", hash_seed="n")["mechanisms"][0]
    flag = es.plan("0:1,0:10", epsilon=1, ram="64K", hash_seed="n", integer=["x0"])
    assert flag["mechanisms"][0]["r"] == free["r"] > 2
    assert flag["plan"]["resolution"]["x0"] == 1 and flag["plan"]["resolution"]["x1"] < 0.1
    # integer channels alone: the depth rule goes deep enough for the widest to reach one unit, no deeper,
    # and the planner's depth search stays within that cap
    assert channel_bits(2, choose_depth(2, 1, 2 ** 29, [0, 0], [2, 1000])) == [10, 10]
    both = es.plan("0:2,0:1000", epsilon=1, ram="1M", hash_seed="n", integer=["x0", "x1"], n_max=2 ** 29)
    assert both["mechanisms"][0]["r"] == 20 and both["plan"]["resolution"] == {"x0": 1, "x1": 1}
    small = es.plan("0:2,0:1000", epsilon=1, ram="64K", hash_seed="n", integer=["x0", "x1"], n_max=2 ** 29)
    assert small["mechanisms"][0]["r"] <= 20   # the search never goes past the cap


def test_bits_per_channel_follow_the_split_order():
    # level l splits channel (l-1) mod d: r = 7 over 3 channels gives 3, 2, 2 levels
    assert channel_bits(3, 7) == [3, 2, 2] and channel_bits(2, 20) == [10, 10] and channel_bits(3, 2) == [1, 1, 0]


@pytest.mark.parametrize("call, needle", [
    (lambda: es.plan("0:1,0:1", epsilon=1, ram="64K", integer="temp"),
     "--integer names no channel 'temp'; the channels are x0, x1"),
    (lambda: es.plan({"a": (0, 5), "b": (0.5, 9)}, epsilon=1, ram="64K", integer=["b", "zz", 7]),
     "--integer names no channel 'zz', '7'; the channels are a, b"),
    (lambda: es.plan({"a": (0, 5), "b": (0.5, 9)}, epsilon=1, ram="64K", integer=["b"]),
     "bound 2 (b): 0.5 is not a whole number; an integer channel needs integer bounds"),
    (lambda: es.plan("0:1e12", epsilon=1, ram="64K", integer="x0"), "integer span exceeds 2**29 - 1"),
    (lambda: es.plan(None, epsilon=1, mechanism="profile", domain=(0, 10), cap=3, integer="id"),
     "a profile's ids are integers already"),
])
def test_refusals_name_the_channel(call, needle):
    with pytest.raises(es.InputError) as e:
        call()
    assert needle in str(e.value)


def test_cli_unknown_integer_channel_is_one_line(tmp_path):
    code, _, err = run("plan", "--bounds", "0:1,0:1", "--names", "temp,humid", "--integer", "temp,count",
                       "--epsilon", "1", "--ram", "64K", "-o", tmp_path / "c.json")
    assert code == 2 and err.strip() == "error: --integer names no channel 'count'; the channels are temp, humid"
    code, _, err = run("plan", "--bounds", "0:1.5", "--integer", "x0", "--epsilon", "1", "--ram", "64K",
                       "-o", tmp_path / "c.json")
    assert code == 2 and "not a whole number" in err and len(err.strip().splitlines()) == 1


def test_integer_channels_give_whole_numbers_within_bounds(tmp_path):
    rng = np.random.default_rng(5)
    x = np.c_[rng.uniform(-20, 45, 40000), rng.integers(3, 40, 40000)]
    cfg = es.plan({"temp": (-20, 45), "count": (3, 40)}, epsilon=1, ram="64K", integer=["count"], hash_seed="i")
    frames = es.simulate(cfg, x, seed=4, runtime="numpy")
    gen = es.assemble(frames)  # the frames state the integer channel
    assert gen.integer == [False, True] and gen.summary()["integer"] == ["count"]
    df = gen.sample(50000, seed=6)
    assert str(df["count"].dtype) == "int64" and str(df["temp"].dtype) == "float64"
    assert df["count"].between(3, 40).all() and df["count"].nunique() > 20
    assert (df["temp"] != np.round(df["temp"])).mean() > 0.99
    gen.save(tmp_path / "g.es")
    again = es.load(tmp_path / "g.es")
    assert again.integer == [False, True] and again.sample(1000, seed=6).equals(gen.sample(1000, seed=6))
    cdf = es.plan({"count": (3, 40)}, epsilon=1, mechanism="cdf", ram="32K", integer="count")
    g = es.assemble(es.simulate(cdf, x[:, 1:], seed=4, runtime="numpy"))
    y = g.sample_array(20000, seed=1)[:, 0]
    assert np.all(y == np.round(y)) and y.min() >= 3 and y.max() <= 40 and g.integer == [True]


def _chi2_ok(values, support, seed_note):
    """Counts of ``values`` over ``support`` fit the uniform: chi-square below
    its 1 - 1e-6 quantile (a false alarm once in a million fixed seeds)."""
    counts = np.array([(values == v).sum() for v in support])
    assert counts.sum() == values.size, seed_note
    expected = values.size / len(support)
    stat = ((counts - expected) ** 2 / expected).sum()
    assert stat < stats.chi2.ppf(1 - 1e-6, len(support) - 1), (seed_note, counts)


def test_uniform_over_the_integers_of_a_privhp_cell():
    # [0, 9] halved: [0, 4.5) holds 0..4, the last cell [4.5, 9] holds 5..9 (hi included)
    for path, support in ((0, range(0, 5)), (1, range(5, 10))):
        mass = np.where(np.arange(2) == path, 100.0, 0.0)
        gen = PrivHPGenerator(["c"], [0], [9], Leaves([1, 1], [0, 1], mass), {}, [True])
        y = gen.sample(40000, np.random.default_rng(11))[:, 0]
        _chi2_ok(y, support, "path %d" % path)


def test_uniform_over_the_integers_of_a_cdf_bin():
    # K = 3 over [0, 10]: bins hold 0..3, 4..6, 7..10 as the device bins them (floor(x * 3 / 10))
    F = np.array([[0.0, 1.0, 1.0]])
    y = CDFGenerator(["c"], [0], [10], F, {}, [True]).sample(30000, np.random.default_rng(12))[:, 0]
    _chi2_ok(y, range(4, 7), "cdf middle bin")
    F = np.array([[0.0, 0.0, 1.0]])
    y = CDFGenerator(["c"], [0], [10], F, {}, [True]).sample(30000, np.random.default_rng(13))[:, 0]
    _chi2_ok(y, range(7, 11), "cdf top bin")


def test_cells_match_the_device_binning_exactly():
    for lo, hi, parts in ((0, 10, 3), (-7, 1000, 64), (0, (1 << 29) - 1, 1 << 29), (5, 8, 16)):
        q = np.arange(parts) if parts <= 4096 else np.array([0, 1, 2, parts // 3, parts - 2, parts - 1])
        first, count = cell_integers(q, parts, lo, hi)
        span = hi - lo
        for qi, f, c in zip(q, first, count):
            members = [x for x in range(max(lo, f - 2), min(hi, f + c + 2) + 1)
                       if min((x - lo) * parts // span, parts - 1) == qi]
            if members:
                assert (f, c) == (members[0], len(members)) and members == list(range(f, f + c))
            else:  # no integer in the cell: its rounded centre, within the bounds
                centre = lo + (2 * qi + 1) * span / (2 * parts)
                assert c == 1 and abs(f - centre) <= 0.5 and lo <= f <= hi


def test_generator_files_without_the_flag_load_as_real_valued():
    x = _clusters(5000)
    cfg = es.plan({"a": (0, 10), "b": (0, 10)}, epsilon=1, ram="32K", integer="a,b")
    gen = es.assemble(es.simulate(cfg, x * 10, seed=1, runtime="numpy"))
    m = msgpack.unpackb(gen.to_bytes(), raw=False)
    assert m["integer"] == [True, True]
    del m["integer"]  # a file written before the flag existed
    old = es.Generator.from_bytes(msgpack.packb(m))
    assert old.integer == [False, False]
    y = old.sample_array(2000, seed=1)
    assert np.mean(y != np.round(y)) > 0.99
    m["integer"] = [True, "yes"]
    with pytest.raises(es.InputError, match="integer flags must list 2 booleans"):
        es.Generator.from_bytes(msgpack.packb(m))


def test_cli_plan_integer_then_assemble_and_sample(tmp_path):
    rng = np.random.default_rng(8)
    csv, cfg, fr, gen = (tmp_path / n for n in ("d.csv", "c.json", "f.bin", "g.es"))
    np.savetxt(csv, np.c_[rng.uniform(0, 1, 5000), rng.integers(0, 100, 5000)], delimiter=",", fmt="%.6g",
               header="level,count", comments="")
    assert run("plan", "--bounds", "0:1,0:100", "--names", "level,count", "--integer", "count", "--epsilon", "1",
               "--ram", "32K", "-o", cfg)[0] == 0
    assert run("simulate", "--config", cfg, "--input", csv, "--columns", "level,count", "--seed", "01",
               "--runtime", "numpy", "-o", fr)[0] == 0
    assert run("assemble", fr, "-o", gen)[0] == 0  # declared once, at plan
    g = es.load(gen)
    assert g.integer == [False, True]
    y = g.sample_array(3000, seed=2)
    assert np.all(y[:, 1] == np.round(y[:, 1])) and y[:, 1].min() >= 0 and y[:, 1].max() <= 100
