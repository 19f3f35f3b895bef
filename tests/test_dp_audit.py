"""Empirical DP audit of the agent on neighbouring streams, with planted mutants.

Neighbouring streams: D = [] and D' = [one reading]. The config puts the
sketch level's share at 1 (j = 4 rows of width 1, so the reading touches all
four cells), ε = 65/64 in all. Each run is a real ``agent.Agent`` with its
own fixed seed; the output is bucketed by two events fixed in advance:

    E_up   = {all four sketch cells >= 1}   (more likely under D')
    E_down = {all four sketch cells <= 0}   (more likely under D)

For discrete Laplace cells of scale b, P_D'(E_up) / P_D(E_up) = e^(4/b)
exactly (per cell P(X >= 0) / P(X >= 1) = e^(1/b)), and likewise for E_down:
the correct agent (b = j q / p = 4) sits at e^1 <= e^ε, on the boundary, so
the audit is as sharp as the guarantee. ε-DP says P_hi(E) <= e^ε P_lo(E) for
every event; the test rejects when the Clopper-Pearson lower bound of
P_hi(E) exceeds e^ε times the upper bound of P_lo(E), each bound at level
α/4 (two events, two bounds each, α = 1e-6): a correct mechanism is rejected
with probability at most α whatever the seed. Mutants, planted by
monkeypatching the sampler the agent calls (the agent is not changed):

* "forgot j": sketch cells get scale q/p instead of j q/p (ratio e^4);
* "wrong split": the level's share is spent 4/3 times (scale 3, ratio e^(4/3)).

With 30,000 runs per stream the wrong-split mutant is rejected with power
above 0.99 (binomial simulation of this exact test; the forgot-j mutant
needs only 3,000).
"""
import math

import pytest
from scipy.stats import beta

import edgesynth.agent.dlap as dlap
from edgesynth import agent

ALPHA = 1e-6
Q, P_ROOT, P_SKETCH, J = 64, 1, 64, 4
CFG = {"format": 1, "epsilon": [P_ROOT + P_SKETCH, Q], "relation": "add-remove",
       "mechanisms": [{"kind": "privhp", "names": ["x"], "lo": [0.0], "hi": [1.0], "r": 1, "k": 1, "w": 1,
                       "j": J, "sketch": "cms", "hash_seed": "dp-audit", "q": Q, "sigma": [P_ROOT, P_SKETCH],
                       "clamp_p": 0}]}
EPS = (P_ROOT + P_SKETCH) / Q
SKETCH_SCALE = (J * Q, P_SKETCH)          # the (num, den) the agent asks the sampler for


def cells(seed, reading):
    a = agent.Agent(CFG, seed=seed)
    if reading is not None:
        a.update(reading)
    return [row[0] for row in a.mechs[0].sketch_rows]


def event_counts(n, reading, tag):
    up = down = 0
    for i in range(n):
        c = cells(b"dp-audit-%s-%d" % (tag, i), reading)
        up += all(v >= 1 for v in c)
        down += all(v <= 0 for v in c)
    return up, down


def cp_low(k, n, a):
    return beta.ppf(a, k, n - k + 1) if k > 0 else 0.0


def cp_high(k, n, a):
    return beta.ppf(1 - a, k + 1, n - k) if k < n else 1.0


def audit(n):
    """(rejected?, lower bounds on e^ε_observed for E_up and E_down)."""
    up_d, down_d = event_counts(n, None, b"D")
    up_d1, down_d1 = event_counts(n, (0.3,), b"D1")
    a = ALPHA / 4
    lower = [cp_low(up_d1, n, a) / cp_high(up_d, n, a), cp_low(down_d, n, a) / cp_high(down_d1, n, a)]
    return any(r > math.exp(EPS) for r in lower), lower


@pytest.fixture
def mutant(monkeypatch):
    calls = [0]

    def plant(remap):
        real = dlap.discrete_laplace

        def sampler(rng, num, den):
            if (num, den) == SKETCH_SCALE:
                calls[0] += 1
                num, den = remap
            return real(rng, num, den)
        monkeypatch.setattr(dlap, "discrete_laplace", sampler)
        return calls
    return plant


def test_agent_passes_the_audit():
    rejected, lower = audit(30000)
    assert not rejected, "correct agent rejected: lower bounds %s > e^eps = %.3f" % (lower, math.exp(EPS))


def test_forgot_j_mutant_fails_the_audit(mutant):
    calls = mutant((Q, P_SKETCH))
    rejected, lower = audit(3000)
    assert calls[0] == 2 * 3000 * J and rejected, lower


def test_wrong_split_mutant_fails_the_audit(mutant):
    calls = mutant((3 * J * Q, 4 * P_SKETCH))       # scale 3 instead of 4: ε spent 4/3 times
    rejected, lower = audit(30000)
    assert calls[0] == 2 * 30000 * J and rejected, lower
