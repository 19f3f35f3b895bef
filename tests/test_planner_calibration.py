"""Properties of the PrivHP planner's calibrated error model and search
(host_tools/mechanisms/privhp/plan.py): the prediction is a W1 (never above 1),
more RAM never predicts worse, a truthful n_max never picks a plan that the
model predicts worse at that n than the default n_max's pick, the depth
follows its rule (or the caller's depth), and every pick fits the RAM."""
import math
from fractions import Fraction

import pytest

import edgesynth as es
from edgesynth.agent.hashing import MAX_WIDTH
from edgesynth.errors import InputError
from edgesynth.mechanisms.privhp import plan as P
from edgesynth.ram import heap_need

GRID = [(d, eps, ram, rt) for d in (1, 2, 4) for eps in (Fraction(1, 10), Fraction(1), Fraction(4))
        for ram in (32 << 10, 64 << 10, 1 << 20) for rt in ("c", "micropython")]


def pick(d, eps, ram, runtime="c", **kw):
    cfg = P.plan_privhp([0.0] * d, [1.0] * d, eps, ram, runtime=runtime, hash_seed="cal", **kw)
    return cfg["mechanisms"][0], cfg["plan"]


def shape(m):
    return m["r"], m["k"], m["w"], m["j"]


@pytest.mark.parametrize("n", [2, 100, 10 ** 4, 10 ** 9])
def test_prediction_is_a_w1_in_0_1(n):
    """Even at tiny n and eps, d = 4, one hot node and the narrowest sketch
    (the uncapped noise model of the old planner passed 1 there), the
    prediction stays in (0, 1], and so does the planner's note."""
    for d in (1, 2, 4):
        for r, k, w, j in ((d, 1, 4, 1), (8, 2, 4, 1), (12, 1 << 12, 1, 1), (20, 64, 4096, 4), (29, 2048, 16, 2)):
            p = P.predicted_w1(d, r, k, w, j, Fraction(1, 100), n)
            assert 0 < p <= 1
        assert 0 < pick(d, Fraction(1, 100), 32 << 10, n_max=min(n, 2 ** 29))[1]["predicted_w1"] <= 1


def test_each_term_falls_where_it_should():
    """Noise falls with n and eps, collisions with w and j, pruning with k, resolution with r."""
    base = P.error_terms(2, 16, 256, 256, 1, Fraction(1), 10 ** 5)
    assert P.error_terms(2, 16, 256, 256, 1, Fraction(1), 10 ** 6)[0] < base[0]
    assert P.error_terms(2, 16, 256, 256, 1, Fraction(4), 10 ** 5)[0] < base[0]
    assert P.error_terms(2, 16, 256, 1024, 1, Fraction(1), 10 ** 5)[1] < base[1]
    assert P.error_terms(2, 16, 256, 256, 3, Fraction(1), 10 ** 5)[1] < base[1]
    assert P.error_terms(2, 16, 1024, 256, 1, Fraction(1), 10 ** 5)[2] < base[2]
    assert P.error_terms(2, 18, 256, 256, 1, Fraction(1), 10 ** 5)[3] < base[3]
    # the complete tree (k = 2**r) has no sketch levels: no collisions, no pruning
    assert P.error_terms(2, 12, 4096, 1, 1, Fraction(1), 10 ** 5)[1:3] == (0.0, 0.0)


@pytest.mark.parametrize("d,eps,n", [(1, Fraction(1), 10 ** 5), (2, Fraction(1), 3 * 10 ** 4),
                                     (2, Fraction(1), 10 ** 6), (4, Fraction(4), 10 ** 5)])
def test_more_ram_never_predicts_worse(d, eps, n):
    """The candidates at a larger budget include every shape that fit a
    smaller one at the same or a wider w, so the prediction cannot rise."""
    prev = None
    for ram in (24 << 10, 32 << 10, 48 << 10, 64 << 10, 170 << 10, 1 << 20, 16 << 20):
        p = pick(d, eps, ram, n_max=n)[1]["predicted_w1"]
        assert prev is None or p <= prev * (1 + 1e-12), (ram, p, prev)
        prev = p


def test_ram_beyond_the_old_cap_is_used():
    """The old planner stopped at about 170 KB of counters (w <= 4096, j <= 2,
    k <= 2048); 1 MiB and 16 MiB now buy more counters and a lower prediction."""
    sizes = [pick(2, Fraction(1), ram)[1] for ram in (170 << 10, 1 << 20, 16 << 20)]
    assert sizes[0]["counter_bytes"] < sizes[1]["counter_bytes"] < sizes[2]["counter_bytes"]
    assert sizes[1]["counter_bytes"] > 400 << 10
    assert sizes[0]["predicted_w1"] > sizes[1]["predicted_w1"] > sizes[2]["predicted_w1"]


@pytest.mark.parametrize("d,eps,ram,rt", GRID)
def test_truthful_n_max_never_predicts_worse_than_the_default(d, eps, ram, rt):
    """At the true n (below the default 10**6) the truthful plan's prediction
    is at most the default plan's prediction evaluated at that n."""
    try:
        default = pick(d, eps, ram, rt)[0]
    except InputError:   # the budget holds no state for this runtime
        return
    for n in (1000, 3 * 10 ** 4, 3 * 10 ** 5, 10 ** 6):
        truthful = pick(d, eps, ram, rt, n_max=n)[1]["predicted_w1"]
        assert truthful <= P.predicted_w1(d, *shape(default), eps, n) * (1 + 1e-12), (n, shape(default))


@pytest.mark.parametrize("d,eps,n,r_rule", [(1, Fraction(1), 10 ** 4, 11), (2, Fraction(1), 10 ** 6, 17),
                                            (4, Fraction(1), 3 * 10 ** 4, 11), (4, Fraction(4), 10 ** 6, 18),
                                            (2, Fraction(3, 10), 10 ** 5, 12), (3, Fraction(1), 4, 3)])
def test_depth_follows_the_rule(d, eps, n, r_rule):
    """choose_depth = round(log2(eps n) - 2 - log2 d), at least d; the pick's
    depth lies in the searched window around it (or the default n_max's)."""
    lo, hi = [0.0] * d, [1.0] * d
    assert P.choose_depth(d, eps, n, lo, hi) == r_rule == max(d, round(math.log2(eps * n) - 2 - math.log2(d)))
    r_default = P.choose_depth(d, eps, P.DEFAULT_N_MAX, lo, hi)
    r = pick(d, eps, 64 << 10, n_max=n)[0]["r"]
    assert r_rule - P.DEPTH_WINDOW <= r <= max(r_rule, r_default) + P.DEPTH_WINDOW


def test_depth_option_fixes_the_depth():
    for r in (6, 20, 24):
        assert pick(2, Fraction(1), 64 << 10, depth=r)[0]["r"] == r
        assert es.plan("0:1,0:1", epsilon=1, ram="64K", depth=r, hash_seed="d")["mechanisms"][0]["r"] == r
    for bad in (0, 30):
        with pytest.raises(InputError, match="--depth"):
            es.plan("0:1,0:1", epsilon=1, ram="64K", depth=bad)


@pytest.mark.parametrize("d,eps,ram,rt", GRID)
def test_picks_fit_the_ram_and_the_device(d, eps, ram, rt):
    """The pick's charge (counters and the runtime's measured overhead) fits
    the budget; w, j and r are what the device accepts and the search allows."""
    try:
        m, plan = pick(d, eps, ram, rt)
    except InputError:
        return
    r, k, w, j = shape(m)
    need = heap_need(P.counter_bytes(r, k, w, j), rt, "cms", d, P.privhp_arrays(r, k, j))
    assert need == plan["expected_peak_bytes"] <= ram
    assert 1 <= w <= MAX_WIDTH and j in P.ROWS["cms"] and 1 <= r <= 29 and k <= 1 << r
    if k < 1 << r and w < MAX_WIDTH:   # not the widest: twice as wide must not fit
        assert heap_need(P.counter_bytes(r, k, 2 * w, j), rt, "cms", d, P.privhp_arrays(r, k, j)) > ram
