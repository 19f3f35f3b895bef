"""`edgesynth synthesize` and es.synthesize: private synthetic rows from a table in one step,
planned from public parameters only (bounds, epsilon, n, n_max, the host budget), never from
the data, not even their number of rows."""
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import edgesynth as es
from edgesynth.cli import main
from edgesynth.pipeline import HOST_RAM, fit, runtime
from edgesynth.ram import parse_size
from edgesynth.runtimes import native

BOUNDS = "0:110,0:100"


def clear_2d(n, seed=0):
    """Two correlated columns in a small part of the box: easy to tell from uniform."""
    rng = np.random.default_rng(seed)
    a = rng.normal(30, 5, n)
    return pd.DataFrame({"a": a.round(2), "b": (0.8 * a + rng.normal(20, 3, n)).round(2),
                         "other": rng.integers(0, 9, n)})


@pytest.fixture
def csv(tmp_path):
    p = tmp_path / "data.csv"
    clear_2d(3000).to_csv(p, index=False)
    return p


def run(*args):
    return CliRunner().invoke(main, ["synthesize", *map(str, args)])


def test_library_returns_n_rows_named_by_columns_inside_the_bounds():
    data = clear_2d(2000)
    data.loc[:9, "a"] = 500.0  # outside: clamped onto the edge, never beyond it
    out = es.synthesize(data, bounds={"a": (0, 110), "b": (0, 100)}, epsilon=1, n=4321, seed=1)
    assert isinstance(out, pd.DataFrame) and list(out.columns) == ["a", "b"] and len(out) == 4321
    assert out["a"].between(0, 110).all() and out["b"].between(0, 100).all()
    same = es.synthesize(data, bounds=BOUNDS, epsilon=1, n=4321, seed=1, columns="a,b")
    pd.testing.assert_frame_equal(out, same)


def test_utility_beats_the_uniform_baseline_clearly():
    data = clear_2d(5000)
    out = es.synthesize(data, bounds=BOUNDS, epsilon=1, n=5000, columns=["a", "b"], seed=2)
    report = es.evaluate(data[["a", "b"]].iloc[:1000], out.iloc[:1000], bounds=BOUNDS)
    syn, base = report["synthetic"], report["baseline"]
    assert syn["w1_joint"] < base["w1_joint"] / 5
    assert all(s["w1"] < b["w1"] / 5 for s, b in zip(syn["channels"], base["channels"]))


def test_a_seed_reproduces_and_no_seed_draws_fresh_noise():
    data = clear_2d(1000)
    kw = dict(bounds=BOUNDS, epsilon=1, n=300, columns=["a", "b"])
    a, b = es.synthesize(data, seed=7, **kw), es.synthesize(data, seed=7, **kw)
    pd.testing.assert_frame_equal(a, b)
    assert not es.synthesize(data, seed=8, **kw).equals(a)
    assert not es.synthesize(data, **kw).equals(es.synthesize(data, **kw))


def test_array_columns_by_position_and_long_byte_seeds():
    x = clear_2d(500)[["a", "b"]].to_numpy()
    rows = es.synthesize(x, bounds={0: (0, 110), 1: (0, 100)}, epsilon=1, n=50, seed=1)
    assert list(rows.columns) == ["0", "1"] and len(rows) == 50
    long_seed = bytes(range(40))  # any length the agent takes; the plan's hash seed is derived from it
    a = es.synthesize(x, bounds=BOUNDS, epsilon=1, n=50, seed=long_seed)
    pd.testing.assert_frame_equal(a, es.synthesize(x, bounds=BOUNDS, epsilon=1, n=50, seed=long_seed))


def test_the_plan_does_not_depend_on_the_data():
    """Public parameters only: 500 or 5000 rows, other values, the same config."""
    _, small = fit(clear_2d(500, seed=1), bounds=BOUNDS, epsilon=1, columns="a,b", seed=3)
    _, large = fit(clear_2d(5000, seed=2), bounds=BOUNDS, epsilon=1, columns="a,b", seed=3)
    assert small == large
    assert small["plan"]["device_runtime"] == "c" and small["plan"]["ram_bytes"] == parse_size(HOST_RAM, "")


def test_the_fastest_runtime_is_used():
    assert runtime() == ("native" if native.available() else "numpy")


def test_n_is_required_and_never_read_off_the_data(csv):
    with pytest.raises(TypeError):
        es.synthesize(clear_2d(100), bounds=BOUNDS, epsilon=1)
    for bad in (None, -1, 2.5, True):
        with pytest.raises(es.InputError, match="number of synthetic rows"):
            es.synthesize(clear_2d(100), bounds=BOUNDS, epsilon=1, n=bad, columns="a,b")
    r = run(csv, "--columns", "a,b", "--bounds", BOUNDS, "--epsilon", 1, "-o", csv.parent / "out.csv")
    assert r.exit_code == 2 and "'-n'" in r.output
    assert not (csv.parent / "out.csv").exists()


@pytest.mark.parametrize("bounds, message", [
    ("5:1,0:100", "bound"),
    ("0:110", "--bounds has 1 ranges for 2 columns"),
    ("0:110,0:100,0:1", "--bounds has 3 ranges for 2 columns"),
    ("0:inf,0:100", "'inf'"),
    ("a:b,0:1", "bound 1"),
])
def test_bad_bounds_are_refused_in_one_line(csv, bounds, message):
    r = run(csv, "--columns", "a,b", "--bounds", bounds, "--epsilon", 1, "-n", 10, "-o", csv.parent / "o.csv")
    assert r.exit_code == 2, r.output
    assert r.output.startswith("error: ") and r.output.count("\n") == 1 and message in r.output, r.output
    assert not (csv.parent / "o.csv").exists()
    with pytest.raises(es.InputError):
        es.synthesize(clear_2d(100), bounds=bounds, epsilon=1, n=10, columns="a,b")


def test_library_refuses_missing_bounds_and_columns():
    with pytest.raises(es.InputError, match="--bounds is required"):
        es.synthesize(clear_2d(100), bounds=None, epsilon=1, n=10)
    with pytest.raises(es.InputError, match="no range for column 'c'"):
        es.synthesize(clear_2d(100), bounds={"a": (0, 110)}, epsilon=1, n=10, columns=["a", "c"])
    with pytest.raises(es.InputError, match="no column 'zz'"):
        es.synthesize(clear_2d(100), bounds=BOUNDS, epsilon=1, n=10, columns="a,zz")


def test_progress_counts_rows_fed_then_rows_sampled():
    calls = []
    es.synthesize(clear_2d(1000), bounds=BOUNDS, epsilon=1, n=2500, columns="a,b", seed=1,
                  progress=lambda done, total: calls.append((done, total)))
    done = [d for d, _ in calls]
    assert done == sorted(done) and calls[-1] == (3500, 3500) and {t for _, t in calls} == {3500}
    assert 1000 in done


def test_cli_writes_the_library_rows_and_says_the_seed_is_not_private(csv, tmp_path):
    out = tmp_path / "out.csv"
    r = run(csv, "--columns", "a,b", "--bounds", BOUNDS, "--epsilon", 1, "-n", 777, "--seed", 5, "-o", out)
    assert r.exit_code == 0, r.output
    assert "wrote %s: 777 synthetic rows of a,b" % out in r.stdout
    assert "NOT private" in r.stderr
    rows = pd.read_csv(out)
    lib = es.synthesize(pd.read_csv(csv), bounds=BOUNDS, epsilon=1, n=777, columns="a,b", seed=5)
    assert list(rows.columns) == ["a", "b"] and len(rows) == 777
    np.testing.assert_allclose(rows.to_numpy(), lib.to_numpy(), rtol=1e-9)
    again = tmp_path / "again.csv"
    assert run(csv, "--columns", "a,b", "--bounds", BOUNDS, "--epsilon", 1, "-n", 777, "--seed", 5,
               "-o", again).exit_code == 0
    assert again.read_bytes() == out.read_bytes()


def test_without_seed_no_not_private_note(csv, tmp_path):
    r = run(csv, "--columns", "a,b", "--bounds", BOUNDS, "--epsilon", 1, "-n", 50, "-o", tmp_path / "o.csv")
    assert r.exit_code == 0, r.output
    assert "NOT private" not in r.output


def test_evaluate_flag_prints_utility_and_warns_it_is_not_private(csv, tmp_path):
    r = run(csv, "--columns", "a,b", "--bounds", BOUNDS, "--epsilon", 1, "-n", 800, "--evaluate",
            "-o", tmp_path / "o.csv")
    assert r.exit_code == 0, r.output
    assert "uniform baseline" in r.stdout and "joint W1" in r.stdout
    assert "NOT private" in r.stderr and "do not publish" in r.stderr


def test_stdout_output_keeps_the_summary_on_stderr(csv, tmp_path):
    r = run(csv, "--columns", "a,b", "--bounds", BOUNDS, "--epsilon", 1, "-n", 20, "--seed", 1, "--evaluate",
            "-o", "-")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == "a,b" and len(lines) == 21 and all(len(x.split(",")) == 2 for x in lines[1:])
    assert "wrote stdout: 20 synthetic rows" in r.stderr and "uniform baseline" in r.stderr


def test_parquet_output(csv, tmp_path):
    out = tmp_path / "s.parquet"
    assert run(csv, "--columns", "a,b", "--bounds", BOUNDS, "--epsilon", 1, "-n", 99, "-o", out).exit_code == 0
    rows = pd.read_parquet(out)
    assert list(rows.columns) == ["a", "b"] and len(rows) == 99


def test_integer_columns_give_whole_numbers(tmp_path):
    data = clear_2d(1500)
    out = es.synthesize(data, bounds={"a": (0, 110), "other": (0, 9)}, epsilon=1, n=500, integer=["other"], seed=1)
    assert out["other"].dtype == np.int64 and out["other"].between(0, 9).all()
    assert out["a"].dtype == np.float64 and (out["a"] != out["a"].round()).any()
    data.to_csv(tmp_path / "d.csv", index=False)
    r = run(tmp_path / "d.csv", "--columns", "a,other", "--bounds", "0:110,0:9", "--integer", "other",
            "--epsilon", 1, "-n", 50, "-o", tmp_path / "o.csv")
    assert r.exit_code == 0, r.output
    assert (pd.read_csv(tmp_path / "o.csv")["other"].dtype == np.int64)


def test_missing_values_are_skipped_and_counted_or_refused(tmp_path):
    text = "a;b\n1.5;2\nNA;3\n4;\n" + "".join("%d;%d\n" % (i % 90, i % 80) for i in range(200))
    (tmp_path / "m.csv").write_text(text)
    r = run(tmp_path / "m.csv", "--columns", "a,b", "--bounds", BOUNDS, "--epsilon", 1, "-n", 10,
            "-o", tmp_path / "o.csv")
    assert r.exit_code == 0, r.output
    assert "from 201 rows (2 of 203 rows skipped: missing value)" in r.stdout
    r = run(tmp_path / "m.csv", "--columns", "a,b", "--bounds", BOUNDS, "--epsilon", 1, "-n", 10, "--missing",
            "error", "-o", tmp_path / "e.csv")
    assert r.exit_code == 2 and "line 3" in r.output and not (tmp_path / "e.csv").exists()


def test_reads_stdin(csv):
    r = CliRunner().invoke(main, ["synthesize", "-", "--columns", "a,b", "--bounds", BOUNDS, "--epsilon", "1",
                                  "-n", "5", "-o", "-"], input=csv.read_text())
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[0] == "a,b" and len(r.stdout.splitlines()) == 6
    assert "from 3000 rows" in r.stderr
