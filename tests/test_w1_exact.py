"""The joint W1 is exact without POT: scipy's assignment solver against brute force and closed forms."""
import itertools

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from scipy.stats import wasserstein_distance

from edgesynth.evaluation import metrics as ev


def _brute_force(p, q):
    """W1 with uniform weights on n points each, as the cheapest of all n! matchings."""
    cost = cdist(p, q, "chebyshev")
    idx = np.arange(len(p))
    return min(cost[idx, list(perm)].mean() for perm in itertools.permutations(idx))


@pytest.mark.parametrize("d", [1, 2, 3])
def test_matching_equals_brute_force(d):
    rng = np.random.default_rng(d)
    for trial in range(40):
        n = int(rng.integers(1, 7))
        p, q = rng.random((n, d)), rng.random((n, d)) ** 2
        if trial % 4 == 0:  # ties and duplicate points, as in rounded sensor readings
            p, q = np.round(p, 1), np.round(q, 1)
        assert ev._ot_w1(p, q) == pytest.approx(_brute_force(p, q), abs=1e-12)


def test_one_dimension_equals_sorted_matching():
    rng = np.random.default_rng(1)
    a, b = rng.normal(0, 1, 300), rng.exponential(1, 300)
    assert ev._ot_w1(a[:, None], b[:, None]) == pytest.approx(wasserstein_distance(a, b), rel=1e-12)


def test_translation_costs_exactly_the_shift():
    # Moving every point by (s, s) costs s in l-infinity, and no plan is cheaper:
    # the first coordinate alone already needs W1 = s.
    rng = np.random.default_rng(2)
    p = rng.random((500, 2))
    for s in (0.01, 0.1, 0.3):
        assert ev._ot_w1(p + s, p) == pytest.approx(s, abs=1e-12)


def test_unequal_sizes_use_equal_subsamples():
    # Against a synthetic set concentrated on one point c, any subsample gives
    # the mean l-infinity distance of the real points to c.
    rng = np.random.default_rng(3)
    real = rng.random((40, 2))
    c = np.array([0.25, 0.75])
    res = ev.w1_joint(real, np.tile(c, (1000, 1)), rng, m=300, reps=2)
    assert res["w1"] == pytest.approx(np.abs(real - c).max(axis=1).mean(), abs=1e-12)
    report = ev.utility_report(real, rng.random((1000, 2)), [0, 0], [1, 1], ["a", "b"], rng, m=300, reps=1)
    assert report["joint_m"] == 40
