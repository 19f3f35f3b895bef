"""The PHDStream benchmark's stream generators (benchmarks/phd_streams.py):
the circles-with-deletion stream follows its construction, and a stream
built from point lifetimes has the live population those lifetimes give."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import phd_streams as ps  # noqa: E402


def test_circles_follow_the_construction():
    s = ps.circles(seed=3, n_samples=4000, batch=100)
    n = 2000  # 50 % kept
    ins = s.op > 0
    n_out = int(np.argmax(~ins))  # the outer phase: inserts only
    n_in = n - n_out
    m = min(n_out, n_in)
    assert s.op.size == n + m
    # every point is inserted once; deletions name outer points, in insertion order, alternating with inserts
    assert np.unique(s.ids[ins]).size == n
    pair = s.op[n_out:n_out + 2 * m]
    assert np.all(pair[0::2] == -1) and np.all(pair[1::2] == 1)
    assert np.array_equal(s.ids[n_out:n_out + 2 * m:2], s.ids[:m])
    # live population after e events, from the construction
    e = np.arange(1, s.op.size + 1)
    paired = np.clip(e - n_out, 0, 2 * m)
    live = np.minimum(e, n_out) - (paired + 1) // 2 + paired // 2 + np.clip(e - n_out - 2 * m, 0, None)
    assert np.array_equal(np.cumsum(s.op), live)
    assert np.array_equal(s.live_counts(), live[s.ends - 1])
    # windows: the first holds ceil(t0 * E) events, later ones the batch
    sizes = np.diff(np.concatenate([[0], s.ends]))
    assert sizes[0] == int(np.ceil(0.1 * s.op.size)) and np.all(sizes[1:-1] == 100) and 0 < sizes[-1] <= 100
    # the outer circle has radius 1 and the inner 0.667 (noise 0.05) in the box [-1.25, 1.25)
    def radius(pts):
        c = (pts + 0.5) / ps.SPAN * 2.5 - 1.25
        return np.hypot(c[:, 0], c[:, 1])
    first, last = radius(s.live_after(0)), radius(s.live_after(s.windows - 1))
    assert abs(np.median(first) - 1.0) < 0.02
    assert len(last) == n - m and np.mean(np.abs(last - 0.667) < 0.2) >= n_in / (n - m) - 0.01


def test_lifetimes_give_the_live_population():
    rng = np.random.default_rng(1)
    n = 500
    t_ins = rng.uniform(0, 1000, n)
    t_del = t_ins + rng.exponential(100, n)
    xy = rng.integers(0, ps.SPAN, (n, 2))
    xy_ev, op, ends, ids = ps._events(t_ins, t_del, xy, 200.0, 50.0)
    s = ps.Stream("t", xy_ev, op, ends, ids, "")
    start = t_ins.min()
    edges = np.append(np.arange(start + 200.0, t_ins.max(), 50.0), t_ins.max())
    for k, tk in enumerate(edges[: s.windows]):
        alive = (t_ins < tk) & (t_del >= tk) if k < s.windows - 1 else (t_ins <= tk) & (t_del > tk)
        assert s.live_counts()[k] == alive.sum()
        got = np.sort(s.live_after(k)[:, 0] * ps.SPAN + s.live_after(k)[:, 1])
        want = np.sort((xy[alive, 0] * ps.SPAN + xy[alive, 1]).astype(np.float64))
        assert np.array_equal(got, want)
    # a deletion never precedes its point's insertion
    first = {}
    for i, (p, o) in enumerate(zip(ids.tolist(), op.tolist())):
        if o > 0:
            first[p] = i
        else:
            assert p in first and first[p] < i
