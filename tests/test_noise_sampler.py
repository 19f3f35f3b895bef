"""Exactness of the integer discrete Laplace sampler against its pmf.

Chi-square at six scales (including non-integer rational ones) with a seeded
DRBG, the variance against 2a/(1-a)**2, and Bernoulli(exp(-x)) frequencies
against exp(-x). Critical values follow OpenDP's design: false-alarm rate per
assertion about 1e-6, so a fixed seed never flakes and a wrong sampler fails.
"""
import math

import numpy as np
import pytest
from scipy import stats

from agent.dlap import bernoulli_exp, discrete_laplace
from firmware_shims.drbg import seeded_source

SCALES = [(1, 1), (5, 1), (20, 1), (3, 2), (100, 7), (1000, 1)]
N = 20000


def pmf(x, num, den):
    a = math.exp(-den / num)
    return (1 - a) / (1 + a) * a ** abs(x)


@pytest.mark.parametrize("num,den", SCALES)
def test_chi_square_matches_exact_pmf(num, den):
    rng = seeded_source(b"chi-square-%d-%d" % (num, den))
    draws = np.array([discrete_laplace(rng, num, den) for _ in range(N)])
    # bins: every integer whose expected count is >= 5, plus one pooled tail bin
    m = 0
    while N * pmf(m + 1, num, den) >= 5:
        m += 1
    edges = np.arange(-m, m + 1)
    expected = np.array([N * pmf(x, num, den) for x in edges])
    observed = np.array([(draws == x).sum() for x in edges])
    expected = np.append(expected, N - expected.sum())
    observed = np.append(observed, N - observed.sum())
    chi2 = ((observed - expected) ** 2 / expected).sum()
    p = stats.chi2.sf(chi2, len(expected) - 1)
    assert p > 1e-6, "chi2=%.1f df=%d p=%.2g" % (chi2, len(expected) - 1, p)
    a = math.exp(-den / num)
    var = 2 * a / (1 - a) ** 2
    # sample variance of a Laplace-like law: sd of the estimate ~ var*sqrt(5/N)
    assert abs(draws.var() - var) < 6 * var * math.sqrt(5.0 / N)
    assert abs(draws.mean()) < 6 * math.sqrt(var / N)


@pytest.mark.parametrize("num,den", [(0, 1), (1, 2), (1, 1), (3, 2), (7, 3), (1, 1000003)])
def test_bernoulli_exp_frequency(num, den):
    rng = seeded_source(b"bern-%d-%d" % (num, den))
    n = 20000
    hits = sum(bernoulli_exp(rng, num, den) for _ in range(n))
    p = math.exp(-num / den)
    sd = math.sqrt(max(p * (1 - p), 1e-12) / n)
    assert abs(hits / n - p) <= 6 * sd + 1e-12


def test_scale_is_validated():
    rng = seeded_source(b"x" * 16)
    with pytest.raises(ValueError):
        discrete_laplace(rng, 0, 1)


def test_same_seed_same_draws_different_seed_different_draws():
    s1, s2, s3 = (seeded_source(b"seed-one-0123456"), seeded_source(b"seed-one-0123456"),
                  seeded_source(b"seed-two-0123456"))
    d1 = [discrete_laplace(s1, 10, 1) for _ in range(50)]
    d2 = [discrete_laplace(s2, 10, 1) for _ in range(50)]
    d3 = [discrete_laplace(s3, 10, 1) for _ in range(50)]
    assert d1 == d2 and d1 != d3


def test_uniform_below_has_no_modulo_bias():
    rng = seeded_source(b"uniform-below-00")
    m = 3 * 256 // 2  # 384: a modulo reduction of 2 bytes would be biased
    draws = np.array([rng.below(m) for _ in range(60000)])
    counts = np.bincount(draws // 32, minlength=12)
    assert stats.chisquare(counts).pvalue > 1e-6
