"""simulate --epochs: disjoint windows, fresh noise per window, numbered frames."""
import json

import numpy as np
from click.testing import CliRunner

from host_tools.cli import main
from host_tools.epochs import epoch_seed, simulate_epochs, window_bounds
from host_tools.frames import iter_frames, read_frames


def run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def test_windows_partition_the_time_slots():
    for n, k in ((10, 3), (3, 5), (1000, 7), (0, 2)):
        b = window_bounds(n, k)
        assert len(b) == k and b[0][0] == 0 and b[-1][1] == n
        assert all(b[i][1] == b[i + 1][0] for i in range(k - 1))
        assert max(s - a for a, s in b) - min(s - a for a, s in b) <= 1


def test_epoch_seeds_differ_per_epoch_and_are_deterministic():
    seeds = {epoch_seed(b"\x01", e) for e in range(1000)}
    assert len(seeds) == 1000 and epoch_seed(b"\x01", 5) == epoch_seed(b"\x01", 5)
    assert epoch_seed(b"\x01", 5) != epoch_seed(b"\x02", 5)


def test_identical_windows_get_independent_noise(make_config):
    """Four windows holding the same readings: with per-epoch seeds the counters
    differ (reused noise would make them equal and leak window differences)."""
    cfg = make_config(d=2, r=8, k=16, w=16, j=2)
    block = np.random.default_rng(0).random((200, 2))
    data = np.vstack([block] * 4)
    frames = simulate_epochs(cfg, data, ["x0", "x1"], 4, seed=b"\x07", first_epoch=10, first_seq=3)
    rels = [next(iter_frames(f)) for f in frames]
    assert [(r.epoch, r.seq) for r in rels] == [(10, 3), (11, 4), (12, 5), (13, 6)]
    trees = [r.mechs[0].tree for r in rels]
    for i in range(4):
        for j in range(i + 1, 4):
            assert np.count_nonzero(trees[i] != trees[j]) > len(trees[i]) // 2
    assert frames == simulate_epochs(cfg, data, ["x0", "x1"], 4, seed=b"\x07", first_epoch=10, first_seq=3)


def test_cli_epochs_back_to_back_and_assemble(tmp_path):
    rng = np.random.default_rng(5)
    csv = tmp_path / "d.csv"
    with open(csv, "w") as fh:
        fh.write("a\n" + "".join("%.4f\n" % v for v in rng.uniform(0, 1, 3000)))
    cfg, out, gen = tmp_path / "c.json", tmp_path / "f.bin", tmp_path / "g.bin"
    assert run("plan", "--bounds", "0:1", "--epsilon", "1", "--ram", "40K", "-o", cfg)[0] == 0
    code, msg, err = run("simulate", "--config", cfg, "--input", csv, "--columns", "a", "--epochs", 5,
                         "--epoch", 100, "--seq", 7, "--seed", "aa", "-o", out)
    assert code == 0 and "5 frames (epochs 100..104)" in msg, err
    rels = read_frames(str(out))
    assert [(r.epoch, r.seq) for r in rels] == [(100 + i, 7 + i) for i in range(5)]
    # each window holds 600 readings; the root counter is noisy but near it
    cfg_m = json.loads(cfg.read_text())["mechanisms"][0]
    root_scale = cfg_m["q"] / cfg_m["sigma"][0]
    for r in rels:
        assert abs(int(r.mechs[0].tree[0]) - 600) < 30 * root_scale
    code, msg, err = run("assemble", out, "-o", gen, "--json")
    assert code == 0 and json.loads(msg)["frames"] == 5, err
