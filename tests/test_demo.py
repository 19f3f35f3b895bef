"""`edgesynth demo` plans from public parameters only, draws fresh entropy unless seeded,
and its library function returns what the command prints."""
import numpy as np
import pytest

from edgesynth.data import datasets
from edgesynth.demo import run_demo


@pytest.fixture
def demo(tmp_path, monkeypatch):
    """run_demo over ``n`` synthetic station readings; returns the output directory."""
    def go(n, seed, name):
        rng = np.random.default_rng(n)
        data = np.column_stack([rng.uniform(30, 80, n), rng.uniform(45, 75, n)])
        monkeypatch.setattr(datasets, "station_temperatures", lambda: (data, list(datasets.NAMES)))
        out = tmp_path / name
        run_demo(str(out), "1", 32 * 1024, seed)
        return out
    return go


def test_plan_does_not_depend_on_the_number_of_readings(demo):
    """Old demo planned with n_max = 4n: r and k changed between n = 1024 and 1025."""
    a, b = demo(1024, 1, "a"), demo(1025, 1, "b")
    assert (a / "device.json").read_bytes() == (b / "device.json").read_bytes()


def test_noise_is_fresh_unless_seeded(demo):
    first, second = demo(500, None, "x"), demo(500, None, "y")
    assert (first / "release.msgpack").read_bytes() != (second / "release.msgpack").read_bytes()
    s1, s2 = demo(500, 9, "s1"), demo(500, 9, "s2")
    assert (s1 / "release.msgpack").read_bytes() == (s2 / "release.msgpack").read_bytes()


def test_run_demo_prints_nothing_and_returns_what_the_command_prints(tmp_path, monkeypatch, capsys):
    from click.testing import CliRunner

    from edgesynth.cli import main
    rng = np.random.default_rng(3)
    data = np.column_stack([rng.uniform(30, 80, 400), rng.uniform(45, 75, 400)])
    monkeypatch.setattr(datasets, "station_temperatures", lambda: (data, list(datasets.NAMES)))
    r = run_demo(str(tmp_path / "lib"), 1, "32K", 5)
    assert capsys.readouterr() == ("", "")
    assert (r.n, r.n_synthetic, r.names, r.seed) == (400, 400, list(datasets.NAMES), 5)
    assert r.frame_bytes == (tmp_path / "lib" / "release.msgpack").stat().st_size
    assert sorted(r.files) == ["config", "frame", "generator", "plot", "real", "report", "synthetic"]
    out = CliRunner().invoke(main, ["demo", "--out", str(tmp_path / "cli"), "--ram", "32K", "--seed", "5"])
    assert out.exit_code == 0, out.output
    assert "device: released one %d-byte frame" % r.frame_bytes in out.output
    assert "host: generator with %d leaves; sampled 400 synthetic rows" % r.leaves in out.output
    assert (tmp_path / "lib" / "synthetic.csv").read_bytes() == (tmp_path / "cli" / "synthetic.csv").read_bytes()
