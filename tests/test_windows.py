"""simulate on a public clock: --time-column/--window/--start/--end.

The schedule is public (docs/trust.md §3): a reading's window is floor(t / window)
on a grid anchored at the Unix epoch, every window of [start, end) releases, and
nothing about it is read off the data. So one inserted reading changes exactly
one frame, and seeded windows whose readings did not change are byte-identical.
"""
import json

import numpy as np
import pytest
from click.testing import CliRunner

from edgesynth.cli import main
from edgesynth.errors import InputError
from edgesynth.frames import iter_frames, read_frames
from edgesynth.runtimes.windows import Schedule, parse_time, simulate_windows, window_seed

T0 = 1262304000  # 2010-01-01T00:00Z, a multiple of 3600
HOUR = 3600


def run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def split_frames(blob):
    """The exact bytes of each back-to-back frame of a simulate output."""
    return [bytes(r.raw) for r in iter_frames(blob)]


@pytest.fixture
def setup(tmp_path):
    cfg = tmp_path / "c.json"
    assert run("plan", "--bounds", "0:1,0:1", "--epsilon", "1", "--ram", "40K", "--hash-seed", "w", "-o", cfg)[0] == 0
    rng = np.random.default_rng(3)
    n = 400
    times = T0 + np.sort(rng.integers(0, 6 * HOUR, n))   # six hours of readings ...
    vals = rng.uniform(0, 1, (n, 2))

    def write(path, rows):
        with open(path, "w") as fh:
            fh.write("t,a,b\n" + "".join("%d,%.6f,%.6f\n" % r for r in rows))
        return path
    rows = [(t, a, b) for t, (a, b) in zip(times, vals)]
    return tmp_path, cfg, rows, write


def simulate_csv(cfg, csv, out, *extra):
    # ... in a public schedule of eight hours: the last two windows are empty
    return run("simulate", "--config", cfg, "--input", csv, "--columns", "a,b", "--time-column", "t",
               "--window", HOUR, "--start", "2010-01-01T00:00Z", "--end", T0 + 8 * HOUR, "-o", out, *extra)


def test_inserting_one_row_changes_exactly_one_frame(setup):
    tmp, cfg, rows, write = setup
    extra = (T0 + 2 * HOUR + 17, 0.5, 0.25)             # a reading in window T0/3600 + 2
    a, b = write(tmp / "a.csv", rows), write(tmp / "b.csv", rows[:150] + [extra] + rows[150:])
    for csv, out in ((a, tmp / "a.bin"), (b, tmp / "b.bin")):
        code, msg, err = simulate_csv(cfg, csv, out, "--seed", "07")
        assert code == 0 and "8 frames" in msg and "NOT private" in err, err
    fa, fb = split_frames((tmp / "a.bin").read_bytes()), split_frames((tmp / "b.bin").read_bytes())
    assert len(fa) == len(fb) == 8
    changed = [i for i in range(8) if fa[i] != fb[i]]
    assert changed == [2]
    rels = read_frames(str(tmp / "a.bin"))
    assert [r.epoch for r in rels] == [T0 // HOUR + i for i in range(8)]
    assert [r.seq for r in rels] == list(range(8))


def test_empty_windows_release_and_counts_follow_the_clock(setup):
    tmp, cfg, rows, write = setup
    code, _, err = simulate_csv(cfg, write(tmp / "a.csv", rows), tmp / "a.bin", "--seed", "07")
    assert code == 0, err
    rels = read_frames(str(tmp / "a.bin"))
    m = json.loads(cfg.read_text())["mechanisms"][0]
    scale = m["q"] / m["sigma"][0]   # root counter noise: discrete Laplace of this scale
    per_window = np.bincount([(t - T0) // HOUR for t, _, _ in rows], minlength=8)
    for r, n in zip(rels, per_window):
        assert abs(int(r.mechs[0].tree[0]) - n) < 30 * scale
    assert per_window[6] == per_window[7] == 0
    assert run("assemble", tmp / "a.bin", "--json")[0] == 0


def test_seedless_windows_draw_fresh_entropy(setup):
    tmp, cfg, rows, write = setup
    csv = write(tmp / "a.csv", rows)
    for out in ("x.bin", "y.bin"):
        assert simulate_csv(cfg, csv, tmp / out)[0] == 0
    fx, fy = split_frames((tmp / "x.bin").read_bytes()), split_frames((tmp / "y.bin").read_bytes())
    assert all(p != q for p, q in zip(fx, fy))


def test_reading_outside_the_schedule_is_refused_by_line_and_nothing_written(setup):
    tmp, cfg, rows, write = setup
    out = tmp / "out.bin"
    out.write_bytes(b"previous")
    late = rows[:10] + [(T0 + 8 * HOUR, 0.1, 0.1)] + rows[10:]   # == --end: outside [start, end)
    code, _, err = simulate_csv(cfg, write(tmp / "late.csv", late), out)
    assert code == 2 and "line 12" in err and "outside" in err and "2010-01-01T08:00:00Z" in err, err
    assert out.read_bytes() == b"previous"
    early = [(T0 - 1, 0.1, 0.1)] + rows
    code, _, err = simulate_csv(cfg, write(tmp / "early.csv", early), out)
    assert code == 2 and "line 2" in err


@pytest.mark.parametrize("args, msg", [
    (("--window", 3600), "go together"),
    (("--time-column", "t", "--window", 3600, "--start", T0 + 10, "--end", T0), "before --end"),
    (("--time-column", "t", "--window", 1, "--start", T0, "--end", T0 + 10 ** 6), "at most"),
    (("--time-column", "t", "--window", 3600, "--start", "yesterday", "--end", T0), "--start"),
    (("--time-column", "t", "--window", 60, "--start", -600, "--end", 60), "2**32"),
    (("--time-column", "t", "--window", 3600, "--start", T0, "--end", T0 + 3600, "--epoch", 3), "--epoch"),
])
def test_schedule_options_are_checked(setup, args, msg):
    tmp, cfg, rows, write = setup
    code, _, err = run("simulate", "--config", cfg, "--input", write(tmp / "a.csv", rows), "--columns", "a,b",
                       "-o", tmp / "o.bin", *args)
    assert code == 2 and msg in err, err


def test_epochs_option_is_gone(setup):
    tmp, cfg, rows, write = setup
    code, _, err = run("simulate", "--config", cfg, "--input", write(tmp / "a.csv", rows), "--columns", "a,b",
                       "--epochs", 4, "-o", tmp / "o.bin")
    assert code == 2 and "--epochs" in err


def test_parse_time_forms():
    assert parse_time("1262304000") == T0
    assert parse_time(" 1262304000.5 ") == T0 + 0.5
    assert parse_time("2010-01-01T00:00Z") == T0
    assert parse_time("2010-01-01 00:00:00") == T0          # no offset: UTC
    assert parse_time("2010-01-01T01:00+01:00") == T0
    for bad in ("", "noon", "2010-13-01", "nan", "inf"):
        with pytest.raises(ValueError):
            parse_time(bad)


def test_schedule_is_the_grid_of_the_public_interval():
    s = Schedule(HOUR, T0 + 1800, T0 + 3 * HOUR + 1)      # not aligned: partial first and last windows
    assert (s.first, s.last, len(s)) == (T0 // HOUR, T0 // HOUR + 3, 4)
    assert list(s.windows([T0 + 1800, T0 + HOUR, T0 + 3 * HOUR])) == [T0 // HOUR, T0 // HOUR + 1, T0 // HOUR + 3]
    with pytest.raises(ValueError):
        s.check(T0 + 1799)
    with pytest.raises(InputError):
        Schedule(0, T0, T0 + 1)


def test_window_seeds_are_per_window_and_identical_windows_get_independent_noise(make_config):
    seeds = {window_seed(b"\x01", e) for e in range(1000)}
    assert len(seeds) == 1000 and window_seed(b"\x01", 5) != window_seed(b"\x02", 5)
    cfg = make_config(d=2, r=8, k=16, w=16, j=2)
    block = np.random.default_rng(0).random((200, 2))
    data = np.vstack([block] * 4)
    times = np.repeat(np.arange(4) * 60 + 6000, 200)
    sched = Schedule(60, 6000, 6240)
    frames = simulate_windows(cfg, data, times, ["x0", "x1"], sched, seed=b"\x07", first_seq=3)
    rels = [next(iter_frames(f)) for _, f in frames]
    assert [(r.epoch, r.seq) for r in rels] == [(100, 3), (101, 4), (102, 5), (103, 6)]
    trees = [r.mechs[0].tree for r in rels]
    for i in range(4):
        for j in range(i + 1, 4):
            assert np.count_nonzero(trees[i] != trees[j]) > len(trees[i]) // 2
    assert frames == simulate_windows(cfg, data, times, ["x0", "x1"], sched, seed=b"\x07", first_seq=3)


def test_extreme_timestamps_are_refused_in_one_line_and_an_empty_recording_releases_every_window(setup):
    tmp, cfg, rows, write = setup
    for cell in ("1e17", "1e300", "-1e12"):
        path = tmp / "x.csv"
        path.write_text("t,a,b\n%d,0.1,0.1\n%s,0.2,0.2\n" % (T0, cell))
        code, _, err = simulate_csv(cfg, path, tmp / "o.bin")
        assert code == 2 and "line 3" in err and "outside" in err and "internal" not in err, err
    empty = tmp / "empty.csv"
    empty.write_text("t,a,b\n")
    code, msg, err = simulate_csv(cfg, empty, tmp / "e.bin", "--seed", "01")
    assert code == 0 and "0 readings, 8 frames" in msg, err
    assert len(read_frames(str(tmp / "e.bin"))) == 8
