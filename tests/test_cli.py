"""The command line end to end, and its handling of bad input (exit 2, one line)."""
import json

import numpy as np
import pytest
from click.testing import CliRunner

from edgesynth.cli import main
from edgesynth.ram import heap_need


def run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture
def data_csv(tmp_path):
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.normal(50, 8, 3000), rng.normal(20, 3, 3000)])
    x[:5, 0] = [-10, 200, 0, 100, 50]  # out-of-range readings are clamped, not errors
    p = tmp_path / "data.csv"
    with open(p, "w") as fh:
        fh.write("time,temp,hum\n")
        for i, (a, b) in enumerate(x):
            fh.write("%d,%.3f,%.3f\n" % (i, a, b))
    return p


def test_round_trip(tmp_path, data_csv):
    cfg, rel, gen, syn = (tmp_path / n for n in ("device.json", "rel.msgpack", "gen.msgpack", "syn.csv"))
    code, out, _ = run("plan", "--bounds", "0:100,0:40", "--epsilon", "1", "--ram", "32K", "--names", "temp,hum",
                       "-o", cfg)
    assert code == 0 and "wrote" in out
    code, out, err = run("simulate", "--config", cfg, "--input", data_csv, "--columns", "temp,hum",
                         "--seed", "00ff", "--device-id", "s1", "-o", rel)
    assert code == 0 and "clamped" in err
    code, out, _ = run("assemble", rel, "-o", gen, "--json")
    summary = json.loads(out)
    assert code == 0 and summary["channels"] == ["temp", "hum"] and summary["devices"] == ["s1"]
    code, out, _ = run("sample", gen, "-n", 5000, "--seed", 1, "-o", syn)
    assert code == 0
    header = open(syn).readline().strip()
    assert header == "temp,hum"
    code, out, _ = run("evaluate", "--real", data_csv, "--synthetic", syn, "--columns", "temp,hum",
                       "--bounds", "0:100,0:40", "--json")
    rep = json.loads(out)
    assert code == 0
    assert rep["synthetic"]["w1_joint"] < rep["baseline"]["w1_joint"] / 3
    for path, kind in ((rel, "frames"), (gen, "generator"), (cfg, "device-config")):
        code, out, _ = run("inspect", path)
        assert code == 0 and json.loads(out)["type"] == kind


def test_seeded_simulation_is_reproducible(tmp_path, data_csv):
    cfg = tmp_path / "c.json"
    run("plan", "--bounds", "0:100,0:40", "--epsilon", "0.5", "--ram", "64K", "--hash-seed", "ab", "-o", cfg)
    outs = []
    for i in range(2):
        p = tmp_path / ("r%d" % i)
        run("simulate", "--config", cfg, "--input", data_csv, "--columns", "temp,hum", "--seed", "01", "-o", p)
        outs.append(p.read_bytes())
    assert outs[0] == outs[1]


@pytest.mark.parametrize("content,needle", [
    ("temp,hum\n1,2\n3\n", "line 3 has 1 fields"),
    ("temp,hum\n1,abc\n", "line 2, column 'hum': 'abc' is not a plain decimal number"),
    ("temp,hum\n1,inf\n", "line 2, column 'hum': 'inf' is not a plain decimal number"),
    ("temp,hum\n1,nan\n", "no data rows (1 skipped for a missing value)"),   # nan is a missing value
    ("temp,other\n1,2\n", "no column 'hum'"),
    ("", "empty"),
    ("temp,hum\n", "no data rows"),
    ("temp,hum\n1,\"2\n", "line"),
])
def test_malformed_csv_is_one_clear_line(tmp_path, content, needle):
    cfg = tmp_path / "c.json"
    run("plan", "--bounds", "0:100,0:40", "--epsilon", "1", "--ram", "32K", "-o", cfg)
    bad = tmp_path / "bad.csv"
    bad.write_text(content)
    code, out, err = run("simulate", "--config", cfg, "--input", bad, "--columns", "temp,hum", "-o", tmp_path / "r")
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("args,needle", [
    (["plan", "--bounds", "5:1", "--epsilon", "1", "--ram", "32K", "-o", "x"], "below"),
    (["plan", "--bounds", "0:1", "--epsilon", "-1", "--ram", "32K", "-o", "x"], "epsilon"),
    (["plan", "--bounds", "0:1", "--epsilon", "1", "--ram", "16K", "-o", "x"], "runtime overhead"),
    (["plan", "--bounds", "0.0:1.0", "--epsilon", "1", "--ram", str(heap_need(0, "micropython", "cms", 1) + 28),
      "-o", "x"], "needs at least"),                          # above the overhead, too small for a tree
    (["plan", "--bounds", "0:1,a:b", "--epsilon", "1", "--ram", "32K", "-o", "x"], "not a number"),
    (["assemble", "missing.msgpack", "-o", "g"], "cannot read"),
    (["sample", "missing.gen", "-n", "5", "-o", "s.csv"], "cannot read"),
    (["inspect", "missing"], "cannot read"),
])
def test_bad_arguments_exit_2(tmp_path, monkeypatch, args, needle):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(*args)
    assert code == 2 and needle in err


def test_corrupt_frame_file_names_file_and_frame(tmp_path, data_csv):
    cfg, rel = tmp_path / "c.json", tmp_path / "r.msgpack"
    run("plan", "--bounds", "0:100,0:40", "--epsilon", "1", "--ram", "32K", "-o", cfg)
    run("simulate", "--config", cfg, "--input", data_csv, "--columns", "temp,hum", "-o", rel)
    good = rel.read_bytes()
    rel.write_bytes(good + good[: len(good) // 2])
    code, out, err = run("assemble", rel, "-o", tmp_path / "g")
    assert code == 2 and "frame 1" in err and "truncated" in err


def test_not_a_generator(tmp_path):
    p = tmp_path / "x.gen"
    p.write_bytes(b"\x81\xa1a\x01")
    code, out, err = run("sample", p, "-n", 3, "-o", tmp_path / "s.csv")
    assert code == 2 and "not an edgesynth generator" in err


def test_help_everywhere():
    for cmd in ("plan", "simulate", "assemble", "sample", "evaluate", "inspect", "demo"):
        code, out, _ = run(cmd, "--help")
        assert code == 0 and "Usage" in out
