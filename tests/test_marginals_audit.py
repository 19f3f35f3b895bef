"""Empirical DP audit of the marginals device (agent/marginals) on
neighbouring datasets: D and D plus one record, with a planted mutant.

As tests/test_phdstream_audit.py: every run is the real agent with its own
fixed seed, the two datasets draw from disjoint seeds, and the released
totals are bucketed by events fixed in advance. epsilon-DP says
P_hi(E) <= e^epsilon P_lo(E) for every event E; the audit rejects when the
Clopper-Pearson lower bound of P_hi(E) exceeds e^epsilon times the upper
bound of P_lo(E), each bound at level alpha/4 (two events, two bounds each,
alpha = 1e-6), so a correct mechanism is rejected with probability at most
alpha whatever the seeds.

Config: two marginals of a 3 x 2 schema, (0,) under the public partition
{0, 1} | {2, "other"} and (0, 1) ungrouped, q = 2, sigma = [1, 1]: each
spends 1/2, epsilon = 1, noise scale 2. The added record (cell (0, 0)) moves
group 0 of the first marginal and cell 0 of the second by one each, so the
events "both totals above D's counts" and "both at most D's counts" have
the ratio e^(1/2 + 1/2) = e exactly (the audit is as sharp as the bound).
The mutant draws noise of half the scale (what the budget would be spent as
if the sensitivity were miscounted): ratio e^2, rejected.
"""
import math
from fractions import Fraction

import pytest
from scipy.stats import beta

import edgesynth.agent.marginals.build as build
from edgesynth.agent import Agent

ALPHA = 1e-6
N = 2500  # runs per dataset
SCHEMA = {"columns": [{"name": "a", "values": ["x", "y"]}, {"name": "b", "values": [0]}]}
SPEC = {"kind": "marginals", "schema": SCHEMA, "cols": [[0], [0, 1]], "groups": [[0, 0, 1], None],
        "q": 2, "sigma": [1, 1]}
CFG = {"format": 1, "epsilon": [1, 1], "mechanisms": [SPEC]}
D = [(1, 0), (2, 1), (0, 1)]
ADDED = (0, 0)


def true_counts(rows):
    """(group 0 of marginal (0,), cell (0, 0) of marginal (0, 1)) of ``rows``."""
    return sum(1 for r in rows if r[0] in (0, 1)), sum(1 for r in rows if r == (0, 0))


def outputs(rows, tag):
    """The two audited totals of N agents over ``rows``, each with its own seed."""
    out = []
    for k in range(N):
        a = Agent(CFG, seed=b"%s-%d" % (tag, k))
        for r in rows:
            a.update(r)
        m = a.mechs[0]
        out.append((m.tabs[0][0], m.tabs[1][0]))
    return out


def cp(k, n, level):
    """Clopper-Pearson (lower, upper) bounds of a binomial proportion."""
    lo = 0.0 if k == 0 else beta.ppf(level, k, n - k + 1)
    hi = 1.0 if k == n else beta.ppf(1 - level, k + 1, n - k)
    return lo, hi


def rejects(lo_runs, hi_runs, event, eps):
    """True when the runs prove P_hi(event) > e^eps P_lo(event) at level ALPHA/4 per bound."""
    k_lo = sum(1 for y in lo_runs if event(y))
    k_hi = sum(1 for y in hi_runs if event(y))
    upper_lo = cp(k_lo, len(lo_runs), ALPHA / 4)[1]
    lower_hi = cp(k_hi, len(hi_runs), ALPHA / 4)[0]
    return lower_hi > math.exp(eps) * upper_lo


def audit():
    """Whether either event rejects eps = 1 for the device as built now."""
    c = true_counts(D)
    runs_d = outputs(D, b"D")
    runs_e = outputs(D + [ADDED], b"E")
    up = lambda y: y[0] > c[0] and y[1] > c[1]  # noqa: E731  more likely with the record
    down = lambda y: y[0] <= c[0] and y[1] <= c[1]  # noqa: E731  more likely without it
    return rejects(runs_d, runs_e, up, 1.0) or rejects(runs_e, runs_d, down, 1.0)


def test_config_spends_epsilon_one():
    a = Agent(CFG, seed=b"x")
    assert Fraction(*a.mechs[0].budget()) == 1


def test_one_record_added_passes_the_audit():
    assert not audit()


def test_mutant_with_half_the_noise_is_rejected(monkeypatch):
    real = build.fill_noise
    monkeypatch.setattr(build, "fill_noise", lambda tab, rng, num, den: real(tab, rng, num, 2 * den))
    assert audit()


@pytest.mark.parametrize("rows", [D, D + [ADDED]])
def test_audited_totals_are_centred_on_the_true_counts(rows):
    """Sanity of the events: the audited totals are noise around the counts
    (mean within 5 standard errors; discrete Laplace of scale 2 has variance
    about 2 * 2**2)."""
    runs = outputs(rows, b"C")
    for j, c in enumerate(true_counts(rows)):
        mean = sum(y[j] for y in runs) / len(runs)
        assert abs(mean - c) < 5 * math.sqrt(8.5 / len(runs))
