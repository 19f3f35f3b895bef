"""'-' is stdin/stdout for every command that reads or writes data (issue 17
item 4), through real pipes: each command's stdout holds only its data (the
bytes it writes to a file) and its summary goes to stderr; two readers of one
stdin, binary output to a terminal, secrets and stores are refused; a reader
that goes away (`| head -1`) ends the writer quietly by SIGPIPE; `inspect`
names integer channels (item 3)."""
import io
import json
import os
import pathlib
import pty
import signal
import subprocess
import sys

import numpy as np
import pytest

import edgesynth as es

CLI = [sys.executable, "-m", "edgesynth"]
SIMULATE = ["simulate", "--input", "data.csv", "--runtime", "numpy", "--seed", "00"]
PLAN = ["plan", "--bounds", "0:100,0.0:1.0", "--names", "count,t", "--integer", "count", "--epsilon", "1",
        "--ram", "64K", "--hash-seed", "0123456789abcdef"]


def cli(*args, input=b"", cwd=None):
    """(status, stdout bytes, stderr text) of one command fed ``input`` through a pipe."""
    p = subprocess.run(CLI + [str(a) for a in args], input=input, capture_output=True, cwd=cwd, timeout=120)
    return p.returncode, p.stdout, p.stderr.decode()


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("pipes")
    rng = np.random.default_rng(7)
    x = np.c_[rng.integers(0, 101, 3000), rng.random(3000)]
    np.savetxt(d / "data.csv", x, delimiter=",", header="count,t", comments="", fmt=["%d", "%.6f"])
    for args in (PLAN + ["-o", "plan.json"], SIMULATE + ["--config", "plan.json", "-o", "f.frames"],
                 ["assemble", "f.frames", "-o", "g.msgpack"], ["keys", "new", "dev", "--keyring", "ring.json"]):
        assert cli(*args, cwd=d)[0] == 0, args
    return d


def test_each_stage_writes_to_stdout_exactly_what_it_writes_to_a_file(work):
    """The files were written by the fixture, with -o FILE."""
    code, cfg, err = cli(*PLAN, "-o", "-")
    assert code == 0 and err.startswith("wrote stdout: privhp"), err
    assert cfg == (work / "plan.json").read_bytes()

    code, frame, err = cli(*SIMULATE, "--config", "-", "-o", "-", input=cfg, cwd=work)
    assert code == 0 and "\nwrote stdout: 3000 readings" in err, err
    assert err.startswith("note: --seed makes the noise reproducible")  # notes: on stderr as ever
    assert frame == (work / "f.frames").read_bytes()

    code, gen, err = cli("assemble", "-", "-o", "-", input=frame)
    assert code == 0 and err.startswith("generator from 1 frame(s)") and "wrote stdout" in err, err
    assert gen == (work / "g.msgpack").read_bytes()

    code, rows, err = cli("sample", "-", "-n", 10, "--seed", 3, "-o", "-", input=gen)
    assert code == 0 and err == "wrote stdout: 10 rows of count,t\n", err
    assert cli("sample", work / "g.msgpack", "-n", 10, "--seed", 3, "-o", work / "s.csv")[0] == 0
    assert rows == (work / "s.csv").read_bytes()


def test_the_whole_path_in_one_pipeline(work):
    stages = [PLAN + ["-o", "-"],
              ["simulate", "--config", "-", "--input", "data.csv", "--runtime", "numpy", "-o", "-"],
              ["assemble", "-", "-o", "-"],
              ["sample", "-", "-n", "10", "-o", "-"]]
    procs, stdin = [], subprocess.DEVNULL
    for args in stages:
        p = subprocess.Popen(CLI + args, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=work)
        if stdin is not subprocess.DEVNULL:
            stdin.close()  # the next stage holds the only read end
        procs.append(p)
        stdin = p.stdout
    out = procs[-1].stdout.read()
    errs = [p.stderr.read().decode() for p in procs]
    assert [p.wait(120) for p in procs] == [0, 0, 0, 0], errs
    lines = out.decode().splitlines()
    assert lines[0] == "count,t" and len(lines) == 11
    counts = [v.split(",")[0] for v in lines[1:]]  # the integer channel: whole numbers
    assert all(c.isdigit() and 0 <= int(c) <= 100 for c in counts), counts
    assert all(e.startswith(("wrote stdout", "generator from")) for e in errs), errs


def test_combine_and_inspect_read_stdin(work):
    cdf = cli("plan", "--mechanism", "cdf", "--bounds", "0:100", "--names", "count", "--epsilon", "1",
              "--ram", "64K", "-o", work / "cdf.json")
    assert cdf[0] == 0, cdf
    code, combined, err = cli("combine", "-", work / "cdf.json", "-o", "-", input=(work / "plan.json").read_bytes())
    assert code == 0 and err.startswith("wrote stdout: privhp(count,t) + cdf(count)"), err
    assert [m["kind"] for m in json.loads(combined)["mechanisms"]] == ["privhp", "cdf"]
    code, out, err = cli("inspect", "-", input=combined)
    assert code == 0 and json.loads(out)["type"] == "device-config" and json.loads(out)["file"] == "<stdin>"


def test_inspect_names_integer_channels_of_frames_and_generators(work):
    for path in ("f.frames", "g.msgpack"):
        code, out, err = cli("inspect", "-", input=(work / path).read_bytes())
        assert code == 0, err
        doc = json.loads(out)
        got = doc["frames"][0]["mechanisms"][0]["integer"] if doc["type"] == "frames" else doc["integer"]
        assert got == ["count"], (path, doc)


def test_ingest_reads_frames_from_stdin(work):
    tagged = cli(*SIMULATE, "--config", "plan.json", "--keyring", "ring.json", "--device-id", "dev", "-o", "-",
                 cwd=work)[1]
    code, out, err = cli("ingest", "-", "--store", "in.db", "--keyring", "ring.json", input=tagged, cwd=work)
    assert code == 0 and out == b"ack - frame 0 dev 0 0 stored\n", (out, err)


def test_one_stdin_is_read_once(work):
    cfg = (work / "plan.json").read_bytes()
    code, out, err = cli("simulate", "--config", "-", "--input", "-", "-o", work / "x.frames", input=cfg)
    assert code == 2 and out == b"" and err == "error: --config and --input cannot both be - (stdin): stdin can be " \
                                               "read once\n", err
    code, _, err = cli("assemble", "-", "-", "-o", work / "x.msgpack", input=(work / "f.frames").read_bytes())
    assert code == 2 and "'-' (stdin) is given 2 times" in err, err
    assert not (work / "x.frames").exists() and not (work / "x.msgpack").exists()


def test_a_wrong_kind_on_stdin_is_named(work):
    code, _, err = cli("assemble", "-", "-o", work / "y.msgpack", input=(work / "g.msgpack").read_bytes())
    assert code == 2 and err.startswith("error: <stdin> is a generator, not a frame file; "
                                        "`edgesynth sample - -n N` takes it"), err
    code, _, err = cli("sample", "-", "-n", 1, "-o", "-", input=b"")
    assert code == 2 and err.startswith("error: <stdin>"), err


def test_frames_and_files_mix(work):
    other = cli("simulate", "--config", "plan.json", "--input", "data.csv", "--runtime", "numpy", "--device-id",
                "b", "-o", "-", cwd=work)[1]
    code, out, err = cli("assemble", work / "f.frames", "-", "-o", work / "two.msgpack", input=other)
    assert code == 0 and err == "", err
    assert out.decode().startswith("generator from 2 frame(s)")  # a file output: the summary stays on stdout


@pytest.mark.parametrize("args", [["keys", "new", "dev", "--keyring", "-"],
                                  ["keys", "list", "--keyring", "-"],
                                  ["assemble", "f.frames", "--keyring", "-"]])
def test_keyrings_never_come_through_a_pipe(work, args):
    code, out, err = cli(*args, cwd=work)
    assert code == 2 and out == b"" and err == "error: a keyring cannot be '-': keys never go through stdin or " \
                                               "stdout; give the file's path\n", err
    assert not os.path.exists(work / "-") and not os.path.exists(work / "-.lock")


def test_credentials_never_go_to_stdout(work):
    code, out, err = cli("keys", "credentials", "dev", "--keyring", "ring.json", "-o", "-", cwd=work)
    assert code == 2 and out == b"" and "a credentials file cannot be '-'" in err, err


@pytest.mark.parametrize("args", [["store", "stats", "--store", "-"],
                                  ["assemble", "--store", "-"],
                                  ["ingest", "f.frames", "--store", "-", "--keyring", "ring.json"]])
def test_the_store_is_no_pipe(work, args):
    code, out, err = cli(*args, cwd=work)
    assert code == 2 and out == b"" and "a store cannot be '-': it is a SQLite file" in err, err
    assert not os.path.exists(work / "-")


def _on_a_terminal(args, cwd):
    """(status, what reached the terminal, stderr) of a command whose stdout is a pty."""
    master, slave = pty.openpty()
    p = subprocess.Popen(CLI + args, stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE, cwd=cwd)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # EIO: every writer closed the pty
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    return p.wait(120), seen, p.stderr.read().decode()


@pytest.mark.parametrize("args,what", [
    (["simulate", "--config", "plan.json", "--input", "data.csv", "-o", "-"], "frames"),
    (["assemble", "f.frames", "-o", "-"], "a generator")])
def test_binary_is_never_written_to_a_terminal(work, args, what):
    code, seen, err = _on_a_terminal(args, work)
    assert code == 2 and seen == b"", seen
    assert err.startswith("error: stdout is a terminal: not writing %s there; pass -o FILE or pipe it" % what), err


def test_text_goes_to_a_terminal(work):
    code, seen, err = _on_a_terminal(["sample", "g.msgpack", "-n", "2", "-o", "-"], work)
    assert code == 0 and seen.splitlines()[0] == b"count,t" and len(seen.splitlines()) == 3, (seen, err)


def test_a_reader_that_goes_away_ends_the_writer_quietly(work):
    """`sample ... -o - | head -1`: killed by SIGPIPE as cat or yes are (a
    shell says 141), nothing on stderr (no traceback, no "Exception ignored")."""
    p = subprocess.Popen(CLI + ["sample", "g.msgpack", "-n", "1000000", "-o", "-"], cwd=work,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline() == b"count,t\n"
    p.stdout.close()
    assert p.wait(120) == -signal.SIGPIPE
    assert p.stderr.read() == b""
    shell = subprocess.run(["bash", "-c", "set -o pipefail; %s sample g.msgpack -n 1000000 -o - | head -1"
                            % " ".join(CLI)], cwd=work, capture_output=True, timeout=120)
    assert (shell.returncode, shell.stdout, shell.stderr) == (141, b"count,t\n", b"")


def test_json_output_into_a_closed_pipe(work):
    """Text printed by click.echo (here `inspect`'s JSON) ends the same way."""
    p = subprocess.Popen(CLI + ["inspect", "g.msgpack"], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()
    assert p.wait(120) == -signal.SIGPIPE and p.stderr.read() == b""


def test_library_paths_take_dash(work, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((work / "plan.json").read_bytes())))
    assert es.load_config("-") == es.load_config(work / "plan.json")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((work / "g.msgpack").read_bytes())))
    assert es.load("-").to_bytes() == (work / "g.msgpack").read_bytes()
    out = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(out))
    es.load(work / "g.msgpack").save("-")
    assert out.getvalue() == (work / "g.msgpack").read_bytes()
    monkeypatch.chdir(tmp_path)
    es.load(work / "g.msgpack").save("./-")  # a file called -
    assert (tmp_path / "-").read_bytes() == (work / "g.msgpack").read_bytes()


def test_pathlib_collapses_a_dot_slash_dash_into_stdio(work, tmp_path, monkeypatch):
    """Path("./-") == Path("-"): it is stdin or stdout, as the docs say; the str "./-" is the file."""
    out = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(out))
    monkeypatch.chdir(tmp_path)
    es.load(work / "g.msgpack").save(pathlib.Path("./-"))
    assert out.getvalue() == (work / "g.msgpack").read_bytes() and not (tmp_path / "-").exists()


def test_closed_or_textual_std_streams_are_one_error(work, monkeypatch):
    for args, stream in ((["plan", *PLAN[1:], "-o", "-"], "stdout"), (["sample", "g.msgpack", "-n", "3", "-o", "-"],
                         "stdout"), (["inspect", "-"], "stdin"), (["assemble", "-", "-o", "x.msgpack"], "stdin")):
        fd = 1 if stream == "stdout" else 0
        r = subprocess.run(CLI + args, cwd=work, capture_output=False, stderr=subprocess.PIPE, timeout=120,
                           **{"stdout" if fd else "stdin": subprocess.DEVNULL},
                           preexec_fn=lambda fd=fd: os.close(fd))
        assert r.returncode == 2 and r.stderr.decode() == "error: %s is closed\n" % stream, (args, r.stderr)
    # a notebook's streams are text with no bytes beneath: text still goes there, bytes are one error
    shown = io.StringIO()
    monkeypatch.setattr(sys, "stdout", shown)
    es.write_config("-", es.load_config(work / "plan.json"))
    assert json.loads(shown.getvalue()) == es.load_config(work / "plan.json")
    with pytest.raises(es.InputError, match="stdout carries no bytes here"):
        es.load(work / "g.msgpack").save("-")
    monkeypatch.setattr(sys, "stdin", io.StringIO("{}"))
    with pytest.raises(es.InputError, match="stdin carries no bytes here"):
        es.inspect("-")


def test_ingest_refuses_a_terminal_stdin(work, tmp_path):
    es.new_key(tmp_path / "k.json", "dev")
    master, slave = pty.openpty()
    r = subprocess.run(CLI + ["ingest", "-", "--store", str(tmp_path / "s.db"), "--keyring", str(tmp_path / "k.json")],
                       stdin=slave, capture_output=True, timeout=60)
    os.close(slave)
    os.close(master)
    assert r.returncode == 2 and "stdin is a terminal" in r.stderr.decode(), r.stderr
