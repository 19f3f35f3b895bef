"""The range-query metric of the PHDStream paper (Kumar, Strohmer,
Vershynin, arXiv 2401.14577, §5.4; docs/mechanisms/phdstream.md, "Host algorithms").

Random axis-aligned rectangles of three size classes, counted on the true
and on the synthetic snapshot, and the average relative error

    r(Q, f, g, t) = 1/|Q| sum_q |q(f) - q(g)| / max(q(f), 0.001 |f|)

with |f| the number of live points at t. The paper calls the 0.001 |f|
term "1% of |f|" too; this uses 0.001 as printed, in the paper's max form
(not the additive form of the authors' code), so figures are comparable
only with results of the same choice. It reads the true data, so it runs
in benchmarks only.
"""
import numpy as np

from edgesynth.errors import EvaluationInputError

# (low, high) area as a fraction of the box: the paper's 10,000 small,
# 5,000 medium and 1,000 large queries (after Zhang et al. 2016)
QUERY_CLASSES = {"small": (1e-4, 1e-3, 10000), "medium": (1e-3, 1e-2, 5000), "large": (1e-2, 1e-1, 1000)}
FLOOR = 0.001


def random_rectangles(rng, n, area_lo, area_hi, lo, hi):
    """``n`` random 2-D half-open rectangles inside the box [lo, hi) with
    area a fraction in [area_lo, area_hi) of the box's (0 < area_lo <
    area_hi <= 1). Each side is an independent uniform fraction of its axis
    in [sqrt(area_lo), sqrt(area_hi)) (so their product lies in the range;
    the paper leaves the shape open), the low corner uniform among the
    positions that keep the rectangle inside the box. Returns float64
    (n, 4): x0, y0, x1, y1."""
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    if lo.shape != (2,) or hi.shape != (2,) or not np.all(lo < hi) or not 0 < area_lo < area_hi <= 1:
        raise EvaluationInputError("need a 2-D box lo < hi and 0 < area_lo < area_hi <= 1")
    width = hi - lo
    side = rng.uniform(np.sqrt(area_lo), np.sqrt(area_hi), size=(n, 2)) * width
    corner = lo + rng.random((n, 2)) * (width - side)
    return np.concatenate([corner, corner + side], axis=1)


def query_set(rng, lo, hi, kind):
    """The paper's query set ``kind`` ("small", "medium", "large") over the
    box [lo, hi): random_rectangles with its area range and count."""
    a, b, n = QUERY_CLASSES[kind]
    return random_rectangles(rng, n, a, b, lo, hi)


def range_counts(points, rects):
    """Points of ``points`` (float (n, 2)) in each half-open rectangle of
    ``rects`` (float (Q, 4): x0, y0, x1, y1): int64 (Q,). One binary search
    per rectangle on the x-sorted points, then a count over that slab."""
    points = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    rects = np.asarray(rects, dtype=np.float64)
    if rects.ndim != 2 or rects.shape[1] != 4:
        raise EvaluationInputError("rects must be (Q, 4): x0, y0, x1, y1")
    by_x = np.argsort(points[:, 0], kind="stable")
    xs, ys = points[by_x, 0], points[by_x, 1]
    first = np.searchsorted(xs, rects[:, 0], side="left")
    end = np.searchsorted(xs, rects[:, 2], side="left")
    out = np.empty(rects.shape[0], dtype=np.int64)
    for i in range(rects.shape[0]):
        y = ys[first[i]:end[i]]
        out[i] = np.count_nonzero((y >= rects[i, 1]) & (y < rects[i, 3]))
    return out


def relative_error(true_counts, synthetic_counts, live):
    """r(Q, f, g, t): the mean over queries of |q(f) - q(g)| / max(q(f),
    0.001 |f|). ``true_counts``/``synthetic_counts`` the answers of the same
    queries on the true and the synthetic snapshot; ``live`` = |f| > 0, the
    true number of live points (with none alive the metric is undefined)."""
    t = np.asarray(true_counts, dtype=np.float64)
    s = np.asarray(synthetic_counts, dtype=np.float64)
    if t.shape != s.shape or t.ndim != 1 or t.size == 0:
        raise EvaluationInputError("true and synthetic counts must be equal-length, non-empty vectors")
    if not live > 0:
        raise EvaluationInputError("the relative error needs at least one live point (|f| > 0)")
    return float(np.mean(np.abs(t - s) / np.maximum(t, FLOOR * live)))
