"""CDF tree mechanism: device binning and counters, wire, host estimators
(plain, GLS, PAVA, trellis), planner, and the CLI path."""
import itertools
import json
from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner

from edgesynth import agent
from edgesynth.cli import main
from edgesynth.errors import MergeError
from edgesynth.frames import iter_frames
from edgesynth.mechanisms.cdf.estimate import (
    cdf_from_leaves,
    gls_leaves,
    level_use,
    monotone_l2,
    plain_cumulative,
    plain_error,
    quantiles,
    stored_widths,
    suffix_products,
    trellis,
)
from edgesynth.mechanisms.cdf.plan import choose_tree, level_budgets, plan_cdf
from edgesynth.runtimes.simulate import simulate


def cdf_cfg(K=997, branching=(10, 10, 10), lo=(0,), hi=(1000,), eps=Fraction(1), names=None):
    cfg = plan_cdf(list(lo), list(hi), eps, K, names=names, branching=list(branching))
    return cfg


def state(frame):
    return next(iter_frames(frame)).mechs


def true_levels(bins, K, branching):
    """Exact node counts from bin indices (the reference the device must match)."""
    P = suffix_products(branching)
    leaf = np.bincount(bins, minlength=K)
    return [np.add.reduceat(np.concatenate([leaf, np.zeros(P[0] - K)]), np.arange(0, P[0], P[i]))[:w]
            for i, w in zip(range(1, len(branching) + 1), stored_widths(K, branching))]


# ------------------------------------------------------------------ device
@pytest.mark.parametrize("lo,hi,K,br", [
    (0, 1000, 997, (10, 10, 10)),        # span * K < 2**30: direct integer division
    (0, 1 << 20, 4096, (16, 16, 16)),    # span * K >= 2**30: long division over K's bits
    (-2.5, 7.5, 256, (16, 16)),          # float bounds
])
def test_device_counts_are_exact_tree_counts(lo, hi, K, br):
    cfg = cdf_cfg(K, br, (lo,), (hi,))
    rng = np.random.default_rng(1)
    span = hi - lo
    x = lo + rng.random(3000) * span * 1.2 - 0.1 * span
    if isinstance(lo, int):
        x = np.floor(x)
        edges = np.array([lo + (j * span + K - 1) // K for j in range(K)])  # first integer of each bin
        x = np.concatenate([x, edges, edges - 1, [lo, hi, hi - 1, lo - 1, hi + 5]])
    data = x[:, None]
    seed = b"cdf-counts-seed!"
    empty = simulate(cfg, np.zeros((0, 1)), ["x0"], seed=seed)
    full = simulate(cfg, data, ["x0"], seed=seed)
    assert simulate(cfg, data, ["x0"], seed=seed, runtime="numpy") == full
    if isinstance(lo, int):  # exact integer reference
        bins = np.array([0 if v <= lo else K - 1 if v >= hi else (int(v) - lo) * K // span for v in x])
    else:
        bins = np.clip(np.where(x > lo, ((x - lo) * K / span).astype(np.int64), 0), 0, K - 1)
    a, b = state(empty)[0], state(full)[0]
    for got0, got1, want in zip(a.levels[0], b.levels[0], true_levels(bins, K, list(br))):
        assert np.array_equal(got1 - got0, want)  # same seed, same noise: the difference is the data


@pytest.mark.parametrize("K", [4, 4096])  # span * K below and above 2**30: both integer-bound divisions
def test_float_reading_rounding_up_to_the_span_lands_in_the_top_bin(K):
    """On integer bounds a float reading just below hi can have x - lo round up
    to the span (here 2**28 - 1 has no room for x's fraction): its bin must be
    K - 1, as for every reading at or above hi, not K (an IndexError once)."""
    import math
    lo, hi = -(1 << 27), (1 << 27) - 1
    x = math.nextafter(float(hi), 0)
    assert x < hi and x - lo == hi - lo
    m = agent.Agent(cdf_cfg(K, (K,), (lo,), (hi,)), seed=b"s").mechs[0]
    before = list(m.rows[0][-1])
    m.update((x,))
    after = list(m.rows[0][-1])
    assert [j for j in range(K) if after[j] != before[j]] == [K - 1]


def test_noise_has_the_planned_variance():
    cfg = cdf_cfg(4096, (16, 16, 16), eps=Fraction(1, 2))
    s = state(simulate(cfg, np.zeros((0, 1)), ["x0"], seed=b"variance-seed-00"))[0]
    leaves = s.levels[0][2]  # 4096 pure-noise counters
    se = s.var[2] * np.sqrt(2 / leaves.size) * 1.5  # sd of a sample variance (heavier tails: x1.5)
    assert abs(leaves.var() - s.var[2]) < 3 * se
    assert abs(leaves.mean()) < 3 * np.sqrt(s.var[2] / leaves.size)


def test_budgets_add_up_exactly_and_bad_configs_refused():
    cfg = cdf_cfg()
    m = cfg["mechanisms"][0]
    assert Fraction(sum(m["sigma"]), m["q"]) == 1
    agent.Agent(cfg, seed=b"x" * 16)
    for change, needle in ((("sigma", [1, 1, 1]), "add up"), (("branching", [10, 10, 9]), "fewer than"),
                           (("hi", [1 << 29]), r"2\*\*28"), (("bins", 1), "bins"),
                           (("nmaes", ["x"]), "no field 'nmaes'")):   # a misspelt optional key
        bad = json.loads(json.dumps(cfg))
        bad["mechanisms"][0][change[0]] = change[1]
        with pytest.raises(agent.ConfigError, match=needle):
            agent.Agent(bad, seed=b"x" * 16)


# ---------------------------------------------------------------- estimators
def _design(K, br):
    P = suffix_products(br)
    rows, level = [], []
    for i, w in enumerate(stored_widths(K, br)):
        for k in range(w):
            r = np.zeros(K)
            r[k * P[i + 1]:min((k + 1) * P[i + 1], K)] = 1
            rows.append(r)
            level.append(i)
    return np.array(rows), np.array(level)


@pytest.mark.parametrize("K,br", [(7, (2, 2, 2)), (10, (3, 4)), (12, (3, 4))])
def test_gls_is_the_weighted_least_squares_solution(K, br):
    rng = np.random.default_rng(K)
    var = rng.uniform(0.5, 3, len(br))
    A, lev = _design(K, br)
    x = rng.integers(0, 9, K).astype(float)
    y = A @ x + rng.normal(0, 1, len(A)) * np.sqrt(var[lev])
    W = np.diag(1 / var[lev])
    levels = np.split(y, np.cumsum(stored_widths(K, br))[:-1])
    # unmeasured root: ordinary weighted least squares
    want = np.linalg.solve(A.T @ W @ A, A.T @ W @ y)
    assert np.allclose(gls_leaves(levels, var, K, list(br)), want, atol=1e-10)
    # known root N: least squares under sum(x) = N (KKT system)
    N = x.sum()
    kkt = np.block([[A.T @ W @ A, np.ones((K, 1))], [np.ones((1, K)), np.zeros((1, 1))]])
    want = np.linalg.solve(kkt, np.concatenate([A.T @ W @ y, [N]]))[:K]
    assert np.allclose(gls_leaves(levels, var, K, list(br), root=N), want, atol=1e-10)


def test_plain_error_closed_form():
    # exact level_use against a direct sum of the covering digits d_i(L)
    for K, br in ((997, (10, 10, 10)), (256, (16, 16)), (100, (3, 5, 7)), (50, (64,))):
        P = suffix_products(br)
        for i in range(len(br)):
            assert level_use(K, P[i + 1], br[i]) == sum((L // P[i + 1]) % br[i] for L in range(K))
    # Thm IV.1 (prod n = K, Laplace 2/eps_i: variance 8/eps_i**2): 4K sum (n_i - 1)/eps_i**2
    for br in ((16, 16), (2,) * 8, (256,), (8, 32)):
        m = len(br)
        assert plain_error(256, br, [8 * m * m] * m) == 4 * 256 * m * m * sum(n - 1 for n in br)
    assert plain_error(997, (10, 10, 10), [72.0] * 3) == 966384  # padded (K-bar 1000)
    # noise-free covering sums are the true cumulative counts
    K, br = 997, [10, 10, 10]
    bins = np.random.default_rng(0).integers(0, K, 500)
    got = plain_cumulative(true_levels(bins, K, br), K, br)
    assert np.array_equal(got, np.cumsum(np.bincount(bins, minlength=K))[:-1])


def _mc_plain_and_gls(K, br, trials, rng, N=5000):
    m = len(br)
    var = np.full(m, 8.0 * m * m)  # Laplace(2/eps_i), eps_i = 1/m
    bins = rng.integers(0, K, N)
    exact = true_levels(bins, K, list(br))
    true_c = np.cumsum(np.bincount(bins, minlength=K))
    plain, gls = [], []
    for _ in range(trials):
        noisy = [lv + rng.laplace(0, np.sqrt(v / 2), lv.size) for lv, v in zip(exact, var)]
        plain.append(np.sum((plain_cumulative(noisy, K, list(br)) - true_c[:-1]) ** 2))
        x = gls_leaves(noisy, var, K, list(br), root=N)
        gls.append(np.sum((np.cumsum(x)[:-1] - true_c[:-1]) ** 2))
    return np.array(plain), np.array(gls), plain_error(K, br, var)


@pytest.mark.parametrize("br", [(16, 16), (2,) * 8, (256,), (8, 32)])
def test_theorem_iv1_against_monte_carlo(br):
    plain, _, exact = _mc_plain_and_gls(256, br, 600, np.random.default_rng(sum(br)))
    se = plain.std(ddof=1) / np.sqrt(plain.size)
    assert abs(plain.mean() - exact) < 3 * se, (plain.mean(), exact, se)


def test_gls_is_about_a_third_of_plain_for_16x16():
    plain, gls, exact = _mc_plain_and_gls(256, (16, 16), 600, np.random.default_rng(7), N=20000)
    ratio = gls.mean() / exact
    assert abs(ratio - 41040 / 122880) < 0.03, ratio  # exact weighted least squares 41,040 vs plain 122,880


def _brute(h, N, loss):
    best = None
    for g in itertools.combinations_with_replacement(range(N + 1), len(h)):
        c = sum(abs(a - b) if loss == "l1" else (a - b) ** 2 for a, b in zip(g, h))
        if best is None or c < best[0] - 1e-12:
            best = (c, g)
    return best[0]


@pytest.mark.parametrize("loss", ["l1", "l2"])
def test_trellis_is_optimal(loss):
    rng = np.random.default_rng(3)
    for _ in range(60):
        h = rng.normal(2, 3, 4)
        g = trellis(h, 4, loss)
        assert np.all(np.diff(g) >= 0) and 0 <= g[0] and g[-1] <= 4
        c = np.sum(np.abs(g - h)) if loss == "l1" else np.sum((g - h) ** 2)
        assert abs(c - _brute(h, 4, loss)) < 1e-9


def test_pava_is_the_l2_relaxation_of_the_trellis():
    rng = np.random.default_rng(5)
    for _ in range(20):
        N = 40
        h = np.cumsum(rng.poisson(1, 60))[:-1] * N / 60 + rng.laplace(0, 6, 59)
        g = monotone_l2(h, N)
        assert np.all(np.diff(g) >= 0) and g.min() >= 0 and g.max() <= N
        # the real-valued optimum never costs more than the integer one
        assert np.sum((g - h) ** 2) <= np.sum((trellis(h, N) - h) ** 2) + 1e-9


def test_sec_vi3_reproduction():
    """K = 997, N = 900, eps = 0.1, histogram mechanism (Laplace 20), 100 runs:
    mean unsquared l1 / l2 errors of F raw and consistent (the CDF tree paper, Sec. VI-3)."""
    K, N, eps = 997, 900, 0.1
    rng = np.random.default_rng(0)
    r1, c1, r2, c2 = [], [], [], []
    for _ in range(100):
        x = rng.random(N) * K
        F = np.cumsum(np.bincount(np.floor(x).astype(int), minlength=K)) / N
        raw = np.append(np.cumsum(np.bincount(np.floor(x).astype(int), minlength=K)[:-1]
                                  + rng.laplace(0, 2 / eps, K - 1)), N)
        Fr = raw / N
        cons1 = np.append(trellis(raw[:-1], N, "l1"), N) / N
        cons2 = np.append(np.round(monotone_l2(raw[:-1], N)), N) / N
        r1.append(np.abs(Fr - F).sum())
        c1.append(np.abs(cons1 - F).sum())
        r2.append(np.sqrt(((Fr - F) ** 2).sum()))
        c2.append(np.sqrt(((cons2 - F) ** 2).sum()))
    for got, paper in ((r1, 502.81), (c1, 286.43), (r2, 18.54), (c2, 10.72)):
        assert abs(np.mean(got) / paper - 1) < 0.10, (np.mean(got), paper)


def test_quantiles_and_cdf():
    F = np.array([0.0, 0.5, 0.5, 1.0])
    assert np.allclose(quantiles(F, 0, 4, [0.25, 0.5, 0.75, 1.0]), [1.5, 2.0, 3.5, 4.0])
    F, total = cdf_from_leaves(np.array([3.0, -1.0, 2.0, 1.0]))
    assert np.all(np.diff(F) >= 0) and F[-1] == 1 and total == pytest.approx(5.0)
    F, total = cdf_from_leaves(np.array([-3.0, -1.0]))
    assert total == 0 and np.allclose(F, [0.5, 1.0])


# ------------------------------------------------------------------- planner
def test_planner_picks():
    assert choose_tree(256) == (16, 16)
    assert choose_tree(2048) == (8, 16, 16)
    assert choose_tree(1 << 20) == (16,) * 5
    assert choose_tree(997) == (10, 10, 10)  # padded to 1000; the prime-power rule gives (997)
    assert plain_error(997, (10, 10, 10), [1] * 3) * 9 < plain_error(997, (997,), [1]) / 4
    q, sigma = level_budgets(Fraction(1, 3), 2048, [8, 16, 16])
    assert Fraction(sum(sigma), q) == Fraction(1, 3) and sigma[0] < sigma[1]  # eps_i ~ use_i**(1/3)


def test_beta_star():
    from scipy.optimize import minimize_scalar
    r = minimize_scalar(lambda b: (b - 1) / np.log(b) ** 3, bounds=(3, 64), method="bounded",
                        options={"xatol": 1e-8})
    assert abs(r.x - 16.80) < 0.01


# ------------------------------------------------------------ merge and CLI
def test_merge_adds_variances_and_refuses_other_configs():
    from edgesynth.merge import merge_releases
    cfg = cdf_cfg(256, (16, 16))
    rels = [next(iter_frames(simulate(cfg, np.ones((5, 1)), ["x0"], seed=b"s%015d" % i, device_id="d%d" % i)))
            for i in range(2)]
    _, merged = merge_releases(rels, "cdf")
    assert np.allclose(merged.var, 2 * rels[0].mechs[0].var)
    other = cdf_cfg(256, (16, 16), hi=(999,))
    rel = next(iter_frames(simulate(other, np.ones((5, 1)), ["x0"], seed=b"s" * 16, device_id="d9")))
    with pytest.raises(MergeError):
        merge_releases(rels + [rel], "cdf")


def run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return r


def test_cli_plan_simulate_assemble_sample(tmp_path):
    rng = np.random.default_rng(2)
    x = rng.normal(50, 10, 20000).clip(0, 99.9)
    csv = tmp_path / "d.csv"
    np.savetxt(csv, x[:, None], header="t", comments="", fmt="%.3f")
    c, r, g, s = (tmp_path / n for n in ("c.json", "r.esf", "g.bin", "s.csv"))
    assert run("plan", "--mechanism", "cdf", "--bounds", "0:100", "--bins", "1000", "--epsilon", "1",
               "-o", c).exit_code == 0
    assert run("simulate", "--config", c, "--input", csv, "--columns", "t", "--seed", "0a", "-o", r).exit_code == 0
    out = run("assemble", r, "-o", g, "--json")
    assert out.exit_code == 0
    summ = json.loads(out.output)
    assert set(summ["quantiles"]) == {"0.01", "0.1", "0.25", "0.5", "0.75", "0.9", "0.99"}
    assert summ["epsilon"] == "1"
    want = np.quantile(x, [0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99])
    got = [summ["quantiles"][k] for k in ("0.01", "0.1", "0.25", "0.5", "0.75", "0.9", "0.99")]
    assert np.max(np.abs(np.array(got) - want)) < 0.5  # 0.1-wide bins, 20,000 readings
    assert run("sample", g, "-n", "5000", "--seed", "1", "-o", s).exit_code == 0
    y = np.loadtxt(s, skiprows=1)
    assert y.shape == (5000,) and y.min() >= 0 and y.max() < 100
    assert abs(np.median(y) - np.median(x)) < 1.0
    assert "needs --bounds and --bins" in run("plan", "--mechanism", "cdf", "--epsilon", "1", "-o", c).output
