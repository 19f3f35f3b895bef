"""Tests of edgesynth.data.synthdata, edgesynth.evaluation.metrics and edgesynth.evaluation.plots.

Every random test uses a fixed seed; tolerances are derived from the
distributions, not fitted to one run.
"""
import json

import numpy as np
import pytest
from scipy import stats

from edgesynth.data import synthdata as sd
from edgesynth.evaluation import metrics as ev
from edgesynth.evaluation import plots

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


# --------------------------------------------------------------------------
# synthdata
# --------------------------------------------------------------------------

def test_multifractal_half_is_uniform():
    x = sd.multifractal(np.random.default_rng(0), 20_000, 2, 0.5)
    assert x.shape == (20_000, 2) and x.dtype == np.float64
    assert x.min() >= 0.0 and x.max() < 1.0
    for j in range(2):
        assert stats.kstest(x[:, j], "uniform").pvalue > 1e-3


def test_multifractal_cell_masses_follow_cascade():
    B, n = 0.8, 200_000  # more than one block of 2**16 rows
    x = sd.multifractal(np.random.default_rng(1), n, 2, B)
    assert x.min() >= 0.0 and x.max() < 1.0
    for j in range(2):
        for lo, hi, p in [(0.0, 0.5, B),              # level 1, left half
                          (0.0, 0.25, B * B),         # level 2, path 00
                          (0.25, 0.5, B * (1 - B))]:  # level 2, path 01
            frac = np.mean((x[:, j] >= lo) & (x[:, j] < hi))
            assert abs(frac - p) < 5 * np.sqrt(p * (1 - p) / n)
    # coordinates are independent: mass of the lower-left quadrant is B**2
    q = np.mean((x[:, 0] < 0.5) & (x[:, 1] < 0.5))
    assert abs(q - B * B) < 5 * np.sqrt(B * B * (1 - B * B) / n)


def test_multifractal_reproducible_and_checked():
    a = sd.multifractal(np.random.default_rng(7), 70_000, 1, 0.9, depth=30)
    b = sd.multifractal(np.random.default_rng(7), 70_000, 1, 0.9, depth=30)
    assert np.array_equal(a, b)
    assert sd.multifractal(np.random.default_rng(0), 0, 3, 0.7).shape == (0, 3)
    for bad in (0.4, 1.5):
        with pytest.raises(ValueError):
            sd.multifractal(np.random.default_rng(0), 10, 1, bad)


def test_uniform_and_scale_to_box():
    u = sd.uniform(np.random.default_rng(2), 5000, 3)
    assert u.shape == (5000, 3) and u.min() >= 0 and u.max() < 1
    lo, hi = np.array([-40.0, 0.0, 900.0]), np.array([85.0, 100.0, 1100.0])
    y = sd.scale_to_box(u, lo, hi)
    assert np.all(y >= lo) and np.all(y < hi)
    assert np.all(sd.scale_to_box(np.full((1, 3), np.nextafter(1.0, 0)), lo, hi) < hi)
    assert np.allclose(ev.normalize(y, lo, hi), u)


# --------------------------------------------------------------------------
# normalisation and 1-D W1
# --------------------------------------------------------------------------

def test_normalize_clips_into_unit_box():
    x = np.array([[-5.0, 50.0], [5.0, 150.0], [20.0, 0.0]])
    z = ev.normalize(x, [0.0, 0.0], [10.0, 100.0])
    assert np.array_equal(z, [[0.0, 0.5], [0.5, 1.0], [1.0, 0.0]])
    assert np.array_equal(ev.normalize(np.array([-1.0, 0.5, 3.0]), 0, 1), [0, 0.5, 1])
    with pytest.raises(ValueError):
        ev.normalize(x, [0.0, 1.0], [10.0, 1.0])


def test_w1_1d_shift():
    a = np.random.default_rng(3).random(1000)
    assert ev.w1_1d(a, a) == 0.0
    assert ev.w1_1d(a, a + 0.25) == pytest.approx(0.25, abs=1e-12)


def _dense_w1(x, a, b, mass, lo=0.0, hi=2.0, n_grid=2 ** 22):
    """Midpoint-rule integral of |F_x - F_T| over [lo, hi] on a dense grid.

    Its error is at most h = (hi - lo) / n_grid (half a cell per unit of
    jump, and F_x and F_T each jump by 1 in total), about 5e-7 here.
    """
    h = (hi - lo) / n_grid
    t = lo + (np.arange(n_grid) + 0.5) * h
    f_x = np.searchsorted(np.sort(x), t, side="right") / x.size
    f_t = np.zeros(n_grid)
    w = mass / mass.sum()
    for ai, bi, mi in zip(a, b, w):
        if bi > ai:
            f_t += mi * np.clip((t - ai) / (bi - ai), 0.0, 1.0)
        else:
            f_t += mi * (t >= ai)
    return float(np.sum(np.abs(f_x - f_t)) * h)


def test_w1_marginal_exact_closed_forms():
    # point mass at 0 against U[0, 1): integral of (1 - t) = 1/2
    assert ev.w1_marginal_exact([0.0], [0.0], [1.0], [1.0]) == pytest.approx(0.5, abs=1e-15)
    assert ev.w1_marginal_exact([0.5], [0.0], [1.0], [1.0]) == pytest.approx(0.25, abs=1e-15)
    # and the other way round: a point mass target against a point sample
    assert ev.w1_marginal_exact([0.0, 1.0], [0.5], [0.5], [1.0]) == pytest.approx(0.5)
    # n cell midpoints against U[0, 1): 1 / (4 n)
    n = 1000
    mid = (np.arange(n) + 0.5) / n
    assert ev.w1_marginal_exact(mid, [0.0], [1.0], [1.0]) == pytest.approx(1 / (4 * n), rel=1e-9)
    # the sample of each leaf at its midpoint, leaves tiling [0, 1)
    edges = np.array([0.0, 0.125, 0.25, 0.5, 1.0])
    w = np.diff(edges)
    assert ev.w1_marginal_exact(edges[:-1] + w / 2, edges[:-1], edges[1:], np.full(4, 0.25)) \
        == pytest.approx(np.sum(0.25 * w / 4), rel=1e-12)
    # a sample that is exactly the target: zero
    assert ev.w1_marginal_exact([0.3, 0.3], [0.3], [0.3], [5.0]) == 0.0
    # raw counts are normalised
    assert ev.w1_marginal_exact([0.0], [0.0], [1.0], [37.0]) == pytest.approx(0.5)


def test_w1_marginal_exact_point_masses_match_scipy():
    rng = np.random.default_rng(4)
    x, pts, w = rng.random(2000), rng.random(60), rng.random(60)
    expected = stats.wasserstein_distance(x, pts, v_weights=w)
    assert ev.w1_marginal_exact(x, pts, pts, w) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("aligned", [True, False])
def test_w1_marginal_exact_matches_dense_grid(aligned):
    rng = np.random.default_rng(5 + aligned)
    k = 25
    a = rng.random(k) * 0.8
    b = a + rng.random(k) * 0.3  # overlapping intervals
    b[:3] = a[:3]                # three point masses
    mass = rng.random(k)
    x = rng.beta(2.0, 3.0, 500)
    if aligned:  # breakpoints on cell edges of the grid: only crossings cost O(h**2)
        a, b, x = (np.round(v * 4096) / 4096 for v in (a, b, x))
    exact = ev.w1_marginal_exact(x, a, b, mass)
    assert exact == pytest.approx(_dense_w1(x, a, b, mass), abs=1e-6)


def test_w1_marginal_exact_with_extreme_density_contrast():
    # 1000 leaves of width 2**-29 holding half the mass, then 1000 wide leaves;
    # each leaf holds 50 points at its own (j + 1/2)/50 quantiles, so the
    # exact W1 is sum_i m_i * w_i / (4 * 50) = 1 / (4 N).
    narrow = np.arange(1001) * 2.0 ** -29
    edges = np.concatenate([narrow, np.linspace(narrow[-1], 1.0, 1001)[1:]])
    a, b = edges[:-1], edges[1:]
    per = 50
    x = (a[:, None] + (np.arange(per) + 0.5) / per * (b - a)[:, None]).ravel()
    n_total = x.size
    got = ev.w1_marginal_exact(x, a, b, np.full(a.size, per / n_total))
    assert got == pytest.approx(1 / (4 * n_total), rel=1e-8)


def test_w1_marginal_exact_matches_scipy_on_quantile_sample():
    rng = np.random.default_rng(8)
    k = 40
    a = np.concatenate([[0.0], rng.random(k - 1) * 0.9])
    b = np.concatenate([[1.0], a[1:] + rng.random(k - 1) * 0.1])
    mass = np.concatenate([[0.2], rng.random(k - 1)])
    mass /= mass.sum()
    # exact CDF of T at its breakpoints, then its quantile function by interpolation
    knots = np.unique(np.concatenate([a, b]))
    cdf = (mass * np.clip((knots[:, None] - a) / (b - a), 0, 1)).sum(axis=1)
    m = 1_000_000
    y = np.interp((np.arange(m) + 0.5) / m, cdf, knots)  # stratified sample of T
    x = rng.random(3000) ** 2
    assert ev.w1_marginal_exact(x, a, b, mass) == pytest.approx(ev.w1_1d(x, y), abs=1e-5)


def test_w1_marginal_exact_rejects_bad_input():
    with pytest.raises(ValueError):
        ev.w1_marginal_exact([0.1], [0.5], [0.4], [1.0])  # b < a
    with pytest.raises(ValueError):
        ev.w1_marginal_exact([0.1], [0.0], [1.0], [-1.0])
    with pytest.raises(ValueError):
        ev.w1_marginal_exact([], [0.0], [1.0], [1.0])


# --------------------------------------------------------------------------
# joint W1 and range queries
# --------------------------------------------------------------------------

def test_w1_joint_floor_and_shift():
    rng = np.random.default_rng(9)
    real = rng.random((4000, 2))
    same = rng.random((4000, 2))
    res = ev.w1_joint(real, same, rng, m=300, reps=3)
    assert set(res) == {"w1", "floor"}
    assert 0 < res["floor"] < 0.1
    assert abs(res["w1"] - res["floor"]) < 0.3 * res["floor"]
    prev = res["w1"]
    for shift in (0.05, 0.1, 0.2):
        w = ev.w1_joint(real, same + shift, rng, m=300, reps=2)["w1"]
        assert w > prev
        # a translation by (s, s) moves mass by exactly s in l-infinity
        assert abs(w - shift) < 2 * res["floor"]
        prev = w


def test_w1_joint_small_real_uses_halves():
    rng = np.random.default_rng(10)
    res = ev.w1_joint(rng.random((50, 2)), rng.random((500, 2)), rng, m=300, reps=1)
    assert res["w1"] > 0 and res["floor"] > 0


def test_box_fractions_match_brute_force():
    rng = np.random.default_rng(11)
    for d in (1, 2, 3):
        pts = rng.random((3000, d))
        qlo, qhi = ev._random_boxes(rng, 200, d)
        inside = np.all((pts[None] >= qlo[:, None]) & (pts[None] <= qhi[:, None]), axis=2)
        assert np.array_equal(ev._box_fractions(pts, qlo, qhi), inside.mean(axis=1))


def test_range_query_error_identical_and_disjoint():
    rng = np.random.default_rng(12)
    x = rng.random((5000, 2))
    assert ev.range_query_error(x, x.copy(), rng) == 0.0
    assert ev.range_query_error(x, x[::-1], rng, n_queries=100) == 0.0  # order is irrelevant
    low = 0.5 * rng.random((5000, 2))
    high = 0.5 + 0.5 * rng.random((5000, 2))
    assert ev.range_query_error(low, high, rng) > 0.1


# --------------------------------------------------------------------------
# report and plots
# --------------------------------------------------------------------------

def test_utility_report_is_json_and_beats_baseline():
    rng = np.random.default_rng(13)
    lo, hi = [-10.0, 0.0], [40.0, 100.0]
    real = sd.scale_to_box(sd.multifractal(rng, 20_000, 2, 0.85), lo, hi)
    synth = sd.scale_to_box(sd.multifractal(rng, 10_000, 2, 0.85), lo, hi)
    rep = ev.utility_report(real, synth, lo, hi, ["temp", "hum"], rng, m=300, reps=2,
                            n_queries=300)
    text = json.dumps(rep, allow_nan=False)
    assert json.loads(text) == rep
    assert rep["schema"] == "edgesynth.utility/1"
    assert rep["columns"] == ["temp", "hum"] and rep["d"] == 2
    assert rep["n_real"] == 20_000 and rep["n_synthetic"] == 10_000
    for part in ("synthetic", "baseline"):
        assert set(rep[part]) == {"channels", "w1_joint", "range_query_error"}
        for ch, width in zip(rep[part]["channels"], (50.0, 100.0)):
            assert ch["w1"] == pytest.approx(ch["w1_normalized"] * width)
    s, b = rep["synthetic"], rep["baseline"]
    assert s["w1_joint"] < 0.5 * b["w1_joint"]
    assert s["range_query_error"] < 0.5 * b["range_query_error"]
    for cs, cb in zip(s["channels"], b["channels"]):
        assert cs["w1_normalized"] < 0.2 * cb["w1_normalized"]
    assert rep["w1_joint_floor"] > 0


def test_utility_report_rejects_bad_input():
    rng = np.random.default_rng(14)
    x = rng.random((100, 2))
    with pytest.raises(ev.EvaluationInputError):
        ev.utility_report(x, x, [0, 0], [1, 1], ["a"], rng)
    with pytest.raises(ev.EvaluationInputError):
        ev.utility_report(x, x[:, :1], [0, 0], [1, 1], ["a", "b"], rng)
    bad = x.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError):
        ev.utility_report(bad, x, [0, 0], [1, 1], ["a", "b"], rng)


@pytest.mark.parametrize("d", [1, 2])
def test_plot_comparison_writes_png(tmp_path, d):
    rng = np.random.default_rng(15)
    lo, hi = [0.0, -1.0][:d], [10.0, 1.0][:d]
    real = sd.scale_to_box(sd.multifractal(rng, 5000, d, 0.7), lo, hi)
    synth = sd.scale_to_box(sd.multifractal(rng, 3000, d, 0.7), lo, hi)
    path = tmp_path / f"cmp{d}.png"
    out = plots.plot_comparison(real, synth, ["a", "b"][:d], lo, hi, path, title="test")
    assert out == path
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE and len(data) > 5000
