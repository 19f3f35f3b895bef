"""es.sliced_w1: exact per projection, the known value of a shift, symmetric,
zero on identical sets, one-line errors on bad input."""
import math

import numpy as np
import pytest

import edgesynth as es
from edgesynth.evaluation.metrics import normalize, sliced_w1, w1_1d


def test_exported():
    assert es.sliced_w1 is sliced_w1
    assert "sliced_w1" in es.__all__


@pytest.mark.parametrize("n, m", [(1, 1), (7, 3), (1000, 1500), (999, 333)])
def test_d1_equals_w1_1d(n, m):
    # d = 1: the directions are +-1 and W1 is invariant to flipping both sets,
    # so the quantile-grid computation must give scipy's exact W1 on the
    # normalised values (different sizes exercise the merged grid).
    rng = np.random.default_rng(n)
    a = rng.normal(20, 5, n)
    b = rng.normal(25, 8, m)
    got = es.sliced_w1(a, b, -10, 60, rng=3, directions=5)
    want = w1_1d(normalize(a, -10, 60), normalize(b, -10, 60))
    assert got == pytest.approx(want, rel=1e-12, abs=1e-15)


def mean_abs_theta1(d):
    """E|theta_1| for theta uniform on S^(d-1): Gamma(d/2) / (sqrt(pi) Gamma((d+1)/2))."""
    return math.exp(math.lgamma(d / 2) - math.lgamma((d + 1) / 2)) / math.sqrt(math.pi)


@pytest.mark.parametrize("d", [2, 3, 4])
def test_shift_along_axis0(d):
    # Every projection of a set shifted by delta e_0 is the projection shifted by
    # delta theta_1, whose W1 is delta |theta_1|: the estimate is delta times the
    # mean of |theta_1| over the directions. Tolerance: 4 Monte Carlo sd,
    # Var|theta_1| = E theta_1^2 - (E|theta_1|)^2 = 1/d - c_d^2.
    rng = np.random.default_rng(d)
    lo, hi = np.full(d, -5.0), np.full(d, 15.0)
    delta = 0.1  # normalised units; the points stay inside the box (no clipping)
    x = rng.uniform(0, 8, (2000, d))
    y = x.copy()
    y[:, 0] += delta * 20.0
    k = 256
    got = es.sliced_w1(x, y, lo, hi, rng=11, directions=k)
    c = mean_abs_theta1(d)
    sd = delta * math.sqrt(1.0 / d - c * c) / math.sqrt(k)
    assert abs(got - delta * c) < 4 * sd, (got, delta * c, sd)


def test_shift_matches_same_directions():
    # The same rng seed draws the same directions: the estimate is exactly delta
    # times the mean |theta_1| of those directions (float rounding only).
    rng = np.random.default_rng(0)
    x = rng.random((500, 3)) * 0.5
    y = x + np.array([0.25, 0.0, 0.0])
    theta = np.random.default_rng(5).standard_normal((64, 3))
    theta /= np.linalg.norm(theta, axis=1, keepdims=True)
    got = es.sliced_w1(x, y, 0.0, 1.0, rng=5, directions=64)
    assert got == pytest.approx(0.25 * np.abs(theta[:, 0]).mean(), rel=1e-9)


def test_symmetric_and_zero():
    rng = np.random.default_rng(1)
    a = rng.normal(0, 1, (800, 4))
    b = rng.normal(0.3, 1.5, (1300, 4))
    ab = es.sliced_w1(a, b, -4, 4, rng=2, directions=64)
    ba = es.sliced_w1(b, a, -4, 4, rng=2, directions=64)
    assert ab > 0.01
    assert ab == pytest.approx(ba, rel=1e-12)
    assert es.sliced_w1(a, a, -4, 4, rng=2, directions=64) == 0.0
    # a permuted copy is the same empirical distribution
    assert es.sliced_w1(a, a[rng.permutation(800)], -4, 4, rng=2, directions=64) == pytest.approx(0, abs=1e-15)


def test_bounded_by_euclidean_w1_and_box():
    # Projections are 1-Lipschitz: the estimate never exceeds the cost of a
    # known transport plan (here, pairing row i with row i) in normalised units;
    # far-apart corners give at most sqrt(d).
    rng = np.random.default_rng(4)
    a = rng.random((300, 2))
    b = rng.random((300, 2))
    plan_cost = np.linalg.norm(a - b, axis=1).mean()
    assert es.sliced_w1(a, b, 0, 1, rng=1, directions=32) <= plan_cost
    corners = es.sliced_w1(np.zeros((5, 2)), np.ones((5, 2)), 0, 1, rng=1, directions=32)
    assert 0 < corners <= math.sqrt(2)


def test_clips_into_public_box():
    # Readings outside the box are clipped onto it, as the device clamps them.
    a = np.array([[-100.0, 0.5], [0.2, 0.5]])
    b = np.array([[0.0, 0.5], [0.2, 0.5]])
    assert es.sliced_w1(a, b, 0, 1, rng=0, directions=16) == 0.0


@pytest.mark.parametrize("real, synth, kw, msg", [
    (np.zeros((5, 2)), np.zeros((5, 3)), {}, "synth has 3 columns, expected 2"),
    (np.zeros((0, 2)), np.zeros((5, 2)), {}, "real needs at least 1 row"),
    (np.full((5, 2), np.nan), np.zeros((5, 2)), {}, "real contains NaN"),
    (np.zeros((5, 2, 1)), np.zeros((5, 2)), {}, "real must have shape (n, d)"),
    (np.zeros((5, 2)), np.zeros((5, 2)), {"directions": 0}, "directions must be >= 1"),
    (np.zeros((5, 2)), np.zeros((5, 2)), {"lo": [0, 1]}, "channel 1: hi must be greater than lo"),
    (np.zeros((5, 2)), np.zeros((5, 2)), {"lo": [0, 0, 0]}, "bounds must give one lo and one hi"),
])
def test_errors_one_line(real, synth, kw, msg):
    args = {"lo": 0.0, "hi": 1.0, "rng": 0, **kw}
    with pytest.raises(es.InputError) as e:
        es.sliced_w1(real, synth, **args)
    assert msg in str(e.value)
    assert "\n" not in str(e.value)
