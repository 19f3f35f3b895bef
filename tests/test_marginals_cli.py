"""The marginals mechanism through the command line (issue 18): plan ->
simulate -> assemble -> sample -> evaluate on a table with text categories,
an integer category and a binned number; values round trip, "other" is a
missing value, samples are reproducible, bad input is one line and exit 2."""
import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import edgesynth as es
from edgesynth.cli import main
from edgesynth.evaluation.table_metrics import tv
from edgesynth.mechanisms.marginals.schema import Schema
from edgesynth.mechanisms.marginals.table import read_cells

SCHEMA = {"columns": [{"name": "site", "values": ["north", "south", "east"]},
                      {"name": "status", "values": ["ok", "warn", "fail"]},
                      {"name": "hour", "values": [0, 1, 2, 3]},
                      {"name": "temp", "bounds": [-10, 30], "bins": 8}]}


def run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("marg")
    rng = np.random.default_rng(0)
    n = 4000
    site = rng.choice(["north", "south", "east", "west"], n, p=[.5, .3, .15, .05])  # west: not in the schema
    status = np.where(site == "north", rng.choice(["ok", "warn", "fail"], n, p=[.8, .15, .05]),
                      rng.choice(["ok", "warn", "fail"], n, p=[.4, .4, .2])).astype(object)
    status[::53] = ""  # missing: the "other" cell, never a skipped row
    temp = np.where(status == "fail", rng.normal(25, 3, n), rng.normal(10, 5, n)).round(2)
    pd.DataFrame({"site": site, "status": status, "hour": rng.integers(0, 4, n), "temp": temp}).to_csv(
        d / "real.csv", index=False)
    (d / "schema.json").write_text(json.dumps(SCHEMA))
    cfg, frames, gen = d / "cfg.json", d / "f.bin", d / "g.bin"
    code, out, err = run("plan", "--mechanism", "marginals", "--schema", d / "schema.json", "--epsilon", "2",
                         "--ram", "16K", "-o", cfg)
    assert code == 0 and "marginals over 4 columns, 10 marginals" in out, err
    code, out, err = run("simulate", "--config", cfg, "--input", d / "real.csv", "--seed", "0a", "-o", frames)
    assert code == 0 and "4000 readings" in out, err
    code, out, err = run("assemble", frames, "-o", gen)
    assert code == 0 and "marginals model from 1 frame(s)" in out, err
    return d


def test_sample_writes_the_schema_values_and_is_reproducible(files):
    d = files
    code, out, err = run("sample", d / "g.bin", "--seed", "5", "-o", d / "s1.csv")
    assert code == 0, err
    n = int(out.split()[2])
    assert abs(n - 4000) < 200  # round(n_hat): the noisy totals' estimate of the record count
    run("sample", d / "g.bin", "--seed", "5", "-o", d / "s2.csv")
    run("sample", d / "g.bin", "--seed", "6", "-n", "3000", "-o", d / "s3.parquet")
    a, b = (d / "s1.csv").read_bytes(), (d / "s2.csv").read_bytes()
    assert a == b
    s = pd.read_csv(d / "s1.csv", keep_default_na=False, dtype=str)
    assert list(s.columns) == ["site", "status", "hour", "temp"] and len(s) == n
    assert set(s["site"]) <= {"north", "south", "east", ""} and set(s["hour"]) <= {"0", "1", "2", "3", ""}
    assert (s["site"] == "").sum() > 0  # west came back as "other": a missing value
    t = pd.to_numeric(s["temp"][s["temp"] != ""])
    assert t.min() >= -10 and t.max() <= 30
    p = pq.read_table(d / "s3.parquet")
    assert p.num_rows == 3000 and str(p.schema.field("hour").type) == "int64"
    assert str(p.schema.field("site").type) == "string" and str(p.schema.field("temp").type) == "double"
    schema = Schema.from_json(SCHEMA)
    assert np.array_equal(read_cells(d / "s3.parquet", schema),
                          es.load(d / "g.bin").model.sample(3000, np.random.default_rng(6)))


def test_evaluate_prints_the_tv_of_tv_directly(files):
    d = files
    run("sample", d / "g.bin", "--seed", "5", "-o", d / "s1.csv")
    code, out, err = run("evaluate", "--real", d / "real.csv", "--synthetic", d / "s1.csv", "--schema",
                         d / "schema.json", "--json")
    assert code == 0, err
    report = json.loads(out)
    schema = Schema.from_json(SCHEMA)
    real, synth = read_cells(d / "real.csv", schema), read_cells(d / "s1.csv", schema)
    for k in (2, 3):
        avg, top = tv(real, synth, schema.sizes, k)
        assert report["tv_%dway" % k]["average"] == avg and report["tv_%dway" % k]["max"] == top
    assert report["tv_2way"]["average"] < 0.05  # n = 4000 at epsilon 2
    code, out, _ = run("evaluate", "--real", d / "real.csv", "--synthetic", d / "s1.csv", "--schema", d / "cfg.json")
    assert code == 0 and "2-way" in out and "%.4f" % report["tv_2way"]["average"] in out


def test_plan_from_generator_and_given_marginals(files):
    d = files
    code, out, err = run("plan", "--mechanism", "marginals", "--from-generator", d / "g.bin", "--epsilon", "1",
                         "--ram", "64K", "-o", d / "next.json")
    assert code == 0, err
    cfg = json.loads((d / "next.json").read_text())
    assert cfg["mechanisms"][0]["schema"] == json.loads(json.dumps(Schema.from_json(SCHEMA).to_json()))
    assert cfg == es.plan(mechanism="marginals", epsilon=1, ram="64K", from_generator=str(d / "g.bin"))
    code, out, err = run("plan", "--mechanism", "marginals", "--schema", d / "schema.json", "--marginals",
                         "site,status;temp", "--epsilon", "1", "-o", d / "two.json")
    assert code == 0 and json.loads((d / "two.json").read_text())["mechanisms"][0]["cols"] == [[0, 1], [3]]


@pytest.mark.parametrize("args, message", [
    (("plan", "--mechanism", "marginals", "--epsilon", "1", "-o", "x.json"), "needs --schema"),
    (("plan", "--mechanism", "marginals", "--schema", "{d}/schema.json", "--marginals", "site,nope", "--epsilon", "1",
      "-o", "x.json"), "not in the schema"),
    (("plan", "--mechanism", "cdf", "--schema", "{d}/schema.json", "--bounds", "0:1", "--bins", "4", "--epsilon", "1",
      "-o", "x.json"), "apply to --mechanism marginals"),
    (("plan", "--mechanism", "marginals", "--from-generator", "{d}/real.csv", "--epsilon", "1", "-o", "x.json"),
     "generator"),
    (("sample", "{d}/bad.bin", "-o", "x.csv"), "bad.bin"),
    (("evaluate", "--real", "{d}/real.csv", "--synthetic", "{d}/real.csv", "--schema", "{d}/real.csv"),
     "not a JSON schema"),
    (("simulate", "--config", "{d}/cfg.json", "--input", "{d}/g.bin", "-o", "x.bin"), "is a generator, not a CSV"),
    (("simulate", "--config", "{d}/cfg.json", "--input", "{d}/short.csv", "-o", "x.bin"), "Expected 4 columns"),
    (("simulate", "--config", "{d}/cfg.json", "--input", "{d}/noise.csv", "-o", "x.bin"), "not UTF-8"),
    (("evaluate", "--real", "{d}/real.csv", "--synthetic", "{d}/other.csv", "--schema", "{d}/schema.json"),
     "no column 'site' (columns: a, b)"),
    (("simulate", "--config", "{d}/cfg.json", "--input", "{d}/real.csv", "--window", "60", "--time-column", "t",
      "--start", "0", "--end", "60", "-o", "x.bin"), "no column 't'"),
    (("simulate", "--config", "{d}/cfg.json", "--input", "{d}/timed.csv", "--window", "60", "--time-column", "t",
      "--start", "0", "--end", "60", "-o", "x.bin"), "outside"),
])
def test_bad_input_is_one_line_and_exit_2(files, args, message, monkeypatch, tmp_path):
    d = files
    gen = (d / "g.bin").read_bytes()
    (d / "bad.bin").write_bytes(gen[:40] + b"\x00" * 8 + gen[48:])  # a damaged generator file
    (d / "short.csv").write_text("site,status,hour,temp\nnorth,ok,1\n")
    (d / "noise.csv").write_bytes(bytes(np.random.default_rng(0).integers(128, 256, 3000, dtype=np.uint8)))
    (d / "other.csv").write_text("a,b\n1,2\n")
    (d / "timed.csv").write_text("site,status,hour,temp,t\nnorth,ok,1,3.5,10\neast,ok,2,3.5,70\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = run(*[a.format(d=d) for a in args])
    assert code == 2 and message in err and err.startswith("error: ") and err.count("\n") == 1, err


def test_inspect_describes_marginals_frames_and_generators(files):
    d = files
    code, out, err = run("inspect", d / "f.bin")
    assert code == 0, err
    m = json.loads(out)["frames"][0]["mechanisms"][0]
    assert m["kind"] == "marginals" and m["columns"] == ["site", "status", "hour", "temp"] and m["epsilon"] == 2
    assert len(m["marginals"]) == 10 and m["group_totals"] == 4 + 4 + 5 + 9 + 16 + 20 + 36 + 20 + 36 + 45
    code, out, err = run("inspect", d / "g.bin")
    g = json.loads(out)
    assert code == 0 and g["kind"] == "edgesynth-marginals-generator" and g["config_id"] == m["config_id"]


def test_simulate_releases_one_frame_per_window_with_a_marginals_config(files, tmp_path):
    d = files
    rows = pd.read_csv(d / "real.csv", keep_default_na=False, dtype=str)[:300]
    rows["t"] = ["2020-01-01T00:%02d:00Z" % (i % 3 * 20) for i in range(300)]  # three 20-minute windows
    rows.to_csv(tmp_path / "timed.csv", index=False)
    code, out, err = run("simulate", "--config", d / "cfg.json", "--input", tmp_path / "timed.csv", "--time-column",
                         "t", "--window", "1200", "--start", "2020-01-01T00:00Z", "--end", "2020-01-01T01:00Z",
                         "--seed", "0b", "-o", tmp_path / "w.bin")
    assert code == 0 and "3 frames" in out, err
    frames = (tmp_path / "w.bin").read_bytes()
    times = [es.parse_time(t) for t in rows["t"]]
    assert frames == b"".join(f for _, f in es.simulate_windows(
        d / "cfg.json", rows.drop(columns="t"), times, 1200, "2020-01-01T00:00Z", "2020-01-01T01:00Z", seed="0b"))
    code, out, err = run("assemble", tmp_path / "w.bin", "-o", tmp_path / "wg.bin")
    assert code == 0 and "from 3 frame(s)" in out, err
