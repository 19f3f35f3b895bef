"""Every command writes its outputs to a temporary file and renames it: a failed
write (disk full) leaves the previous output byte for byte and no stray file."""
import errno
import os
import stat

import numpy as np
import pytest
from click.testing import CliRunner

from edgesynth.cli import main
from edgesynth.outputs import write_bytes


def run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def disk_full(*_a, **_k):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(1)
    csv = tmp_path / "d.csv"
    csv.write_text("a,b\n" + "".join("%.4f,%.4f\n" % tuple(r) for r in rng.uniform(0, 1, (300, 2))))
    cfg, rel, gen = tmp_path / "c.json", tmp_path / "r.bin", tmp_path / "g.bin"
    assert run("plan", "--bounds", "0:1,0:1", "--epsilon", "1", "--ram", "40K", "-o", cfg)[0] == 0
    assert run("simulate", "--config", cfg, "--input", csv, "--columns", "a,b", "-o", rel)[0] == 0
    assert run("assemble", rel, "-o", gen)[0] == 0
    return tmp_path, csv, cfg, rel, gen


COMMANDS = {
    "plan": lambda f, out: ("plan", "--bounds", "0:1,0:1", "--epsilon", "1", "--ram", "40K", "-o", out),
    "plan-cdf": lambda f, out: ("plan", "--mechanism", "cdf", "--bounds", "0:1", "--bins", 64,
                                "--epsilon", "1", "-o", out),
    "simulate": lambda f, out: ("simulate", "--config", f[2], "--input", f[1], "--columns", "a,b", "-o", out),
    "assemble": lambda f, out: ("assemble", f[3], "-o", out),
    "sample": lambda f, out: ("sample", f[4], "-n", 100, "-o", out),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_disk_full_keeps_the_previous_output(files, monkeypatch, command):
    tmp = files[0]
    out = tmp / "out"
    out.write_bytes(b"the previous output")
    before = sorted(os.listdir(tmp))
    monkeypatch.setattr(os, "fsync", disk_full)
    code, _, err = run(*COMMANDS[command](files, out))
    monkeypatch.undo()
    assert code == 2 and "No space left on device" in err and "unchanged" in err, err
    assert out.read_bytes() == b"the previous output"
    assert sorted(os.listdir(tmp)) == before          # no partial or temporary file left


def test_write_bytes_replaces_and_keeps_mode(tmp_path):
    p = tmp_path / "k"
    write_bytes(str(p), b"one", perms=0o600)
    write_bytes(str(p), b"two", perms=0o600)
    assert p.read_bytes() == b"two" and (os.stat(p).st_mode & 0o777) == 0o600
    assert os.listdir(tmp_path) == ["k"]


def test_outputs_through_a_symlink_replace_its_target_and_keep_the_link(tmp_path):
    real, link = tmp_path / "real.json", tmp_path / "link.json"
    real.write_text("old")
    os.chmod(real, 0o600)
    link.symlink_to(real.name)
    assert run("plan", "--bounds", "0:1", "--epsilon", "1", "--ram", "40K", "-o", link)[0] == 0
    assert link.is_symlink() and os.readlink(link) == real.name
    assert real.read_text().startswith("{") and stat_mode(real) == 0o600   # the replaced file's bits


def test_device_outputs_are_written_through_not_replaced(tmp_path):
    """-o /dev/null (here through a link to it) must never turn the device into a file."""
    link = tmp_path / "null"
    link.symlink_to("/dev/null")
    assert run("plan", "--bounds", "0:1", "--epsilon", "1", "--ram", "40K", "-o", link)[0] == 0
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode) and link.is_symlink()
    code, _, err = run("plan", "--bounds", "0:1", "--epsilon", "1", "--ram", "40K", "-o", tmp_path)
    assert code == 2 and "directory" in err


def stat_mode(p):
    return stat.S_IMODE(os.stat(p).st_mode)
