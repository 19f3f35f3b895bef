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

from edgesynth.agent.dlap import bernoulli_exp, discrete_laplace
from edgesynth.firmware_shims.drbg import seeded_source

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


def cdf(x, num, den):
    """Exact CDF of discrete Laplace at integer x."""
    a = math.exp(-den / num)
    if x < 0:
        return a ** (-x) / (1 + a)
    return 1 - a ** (x + 1) / (1 + a)


@pytest.mark.parametrize("num,den", [(1, 1), (5, 1), (20, 1), (3, 2), (100, 7)])
def test_kolmogorov_smirnov_against_exact_cdf(num, den):
    """sup |F_n - F| over the integers, against the Dvoretzky-Kiefer-Wolfowitz
    bound P(sup > t) <= 2 exp(-2 n t^2), valid for discrete laws too:
    t = sqrt(ln(2/alpha) / 2n) at alpha = 1e-6."""
    n = 20000
    rng = seeded_source(b"ks-%d-%d" % (num, den))
    draws = np.sort(np.array([discrete_laplace(rng, num, den) for _ in range(n)]))
    xs = np.arange(draws[0] - 1, draws[-1] + 1)
    emp = np.searchsorted(draws, xs, side="right") / n
    d = max(abs(e - cdf(int(x), num, den)) for x, e in zip(xs, emp))
    assert d < math.sqrt(math.log(2 / 1e-6) / (2 * n)), d


def _freq(tag, n, fn):
    rng = seeded_source(tag)
    return sum(fn(rng) for _ in range(n)) / n


@pytest.mark.parametrize("a,b", [((1, 3), (2, 5)), ((1, 65537), (65536, 65537)), ((7, 1000003), (1, 2)),
                                 ((1, 1 << 30), (3, 4))])
def test_bernoulli_exp_factorises(a, b):
    """P[B(x+y)] = P[B(x)] P[B(y)] with independent draws: two-sample z-test,
    |z| < 6 (false alarm about 2e-9 per assertion)."""
    n = 20000
    s = (a[0] * b[1] + b[0] * a[1], a[1] * b[1])
    joint = _freq(b"fac-sum-%d-%d" % s, n, lambda r: bernoulli_exp(r, *s))
    prod = _freq(b"fac-prod-%d-%d" % s, n, lambda r: bernoulli_exp(r, *a) * bernoulli_exp(r, *b))
    p = math.exp(-s[0] / s[1])
    assert abs(joint - prod) < 6 * math.sqrt(2 * p * (1 - p) / n)


@pytest.mark.parametrize("m,num,den", [(2, 1, 3), (3, 2, 7), (5, 1, 4)])
def test_bernoulli_exp_scales(m, num, den):
    """P[B(m x)] = P[B(x)]^m: m independent B(x) draws all 1 vs one B(m x)."""
    n = 20000
    one = _freq(b"scale-one-%d" % m, n, lambda r: bernoulli_exp(r, m * num, den))
    power = _freq(b"scale-pow-%d" % m, n, lambda r: all(bernoulli_exp(r, num, den) for _ in range(m)))
    p = math.exp(-m * num / den)
    assert abs(one - power) < 6 * math.sqrt(2 * p * (1 - p) / n)


def test_bernoulli_exp_is_monotone_and_exact_at_the_ends():
    rng = seeded_source(b"bern-ends-000000")
    assert all(bernoulli_exp(rng, 0, d) for d in (1, 7, 1 << 30) for _ in range(200))   # exp(0) = 1
    n = 20000
    ps = [_freq(b"mono-%d" % k, n, lambda r, k=k: bernoulli_exp(r, k, 4)) for k in range(0, 13, 3)]
    gaps = [ps[i] - ps[i + 1] for i in range(len(ps) - 1)]
    assert all(g > 0 for g in gaps), ps     # true gaps >= 0.055; 6 sd of a difference <= 0.03
