"""Profile sketch: device counters and saturation, unfolding, Algorithms 2-3,
tails, naive vs fast, the exact LP, merge rules and the CLI path."""
import json
from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner
from scipy.linalg import circulant

from edgesynth import agent
from edgesynth.cli import main
from edgesynth.errors import MergeError
from edgesynth.frames import iter_frames
from edgesynth.mechanisms.profile.generator import assemble_profile
from edgesynth.mechanisms.profile.invert import fit_norm, invert, kernel, project_simplex, solve_exact, tails, unfold
from edgesynth.mechanisms.profile.plan import plan_profile
from edgesynth.runtimes.simulate import simulate


def dlap(rng, alpha, size):
    return rng.geometric(1 - alpha, size) - rng.geometric(1 - alpha, size)


def noisy(h, eps, rng):
    return h + dlap(rng, np.exp(-eps), h.size)


def cfg_for(lo=0, hi=2000, cap=30, eps=Fraction(1)):
    return plan_profile(lo, hi, cap, eps)


# ------------------------------------------------------------------ device
def test_device_counts_saturate_at_the_cap_and_ignore_other_ids():
    cfg = cfg_for(100, 1100, cap=20)
    rng = np.random.default_rng(0)
    ids = np.concatenate([rng.integers(50, 1150, 6000), np.full(60, 500)])  # id 500 far above the cap
    seed = b"profile-seed-000"
    empty = next(iter_frames(simulate(cfg, np.zeros((0, 1)), ["id"], seed=seed))).mechs[0].counts
    frame = simulate(cfg, ids[:, None].astype(float), ["id"], seed=seed)
    assert simulate(cfg, ids[:, None].astype(float), ["id"], seed=seed, runtime="numpy") == frame
    got = next(iter_frames(frame)).mechs[0].counts
    h = np.bincount(ids[(ids >= 100) & (ids < 1100)] - 100, minlength=1000)
    assert np.array_equal(got, np.minimum(empty + h, 20))  # min(h + Z, U): the noise itself is capped too
    assert got.max() == 20 and got[400] == 20 and empty.min() < 0  # never clipped low


def test_ids_must_be_integers_and_domain_checked():
    from edgesynth.errors import InputError
    with pytest.raises(InputError, match="integers"):
        simulate(cfg_for(), np.array([[1.5]]), ["id"], seed=b"s" * 16)
    bad = cfg_for()
    bad["mechanisms"][0]["p"] += 1
    with pytest.raises(agent.ConfigError, match="add up"):
        agent.Agent(bad, seed=b"s" * 16)
    # a misspelt optional key must not silently fall back to dense ids
    for where, key in ((None, "sampel"), ("sample", "sead")):
        bad = cfg_for()
        spec = bad["mechanisms"][0]
        if where:
            spec[where] = {"bits": 20, "seed": "k"}
            spec = spec[where]
        spec[key] = {"bits": 20, "seed": "k"} if where is None else "k"
        with pytest.raises(agent.ConfigError, match="no field '%s'" % key):
            agent.Agent(bad, seed=b"s" * 16)


# ------------------------------------------------------------------- host
def test_unfolding_restores_the_unsaturated_law():
    rng = np.random.default_rng(1)
    alpha, cap, h = np.exp(-0.7), 3, 1
    z = dlap(rng, alpha, 400000)
    un = unfold(np.minimum(h + z, cap), cap, alpha, rng)
    for v in range(-3, 9):
        p = np.mean(h + z == v)
        assert abs(np.mean(un == v) - p) < 4 * np.sqrt(2 * p * (1 - p) / z.size) + 1e-5


def test_algorithms_2_and_3_give_a_valid_accurate_profile():
    rng = np.random.default_rng(2)
    d, n, eps = 20000, 12, 1.0
    alpha = np.exp(-eps)
    h = np.minimum(rng.poisson(2, d), n)
    f = np.bincount(h, minlength=n + 1) / d
    for p in (1, 2, "inf"):
        fh, ft, diag = invert(noisy(h, eps, rng), n, alpha, p=p)
        assert fh.min() >= 0 and abs(fh.sum() - 1) < 1e-12
        assert abs(diag["kappa_eff"] / ((1 + alpha) / (1 - alpha)) ** 2 - 1) < 1e-3
        assert np.abs(fh - f).sum() < 0.15
    # delta is exactly the mass that M^-1 f~ (an independent FFT solve) puts outside [0, n]
    fh, ft, diag = invert(noisy(h, eps, rng), n, alpha)
    R, m = diag["radius"], diag["m"]
    kern = kernel(alpha, diag["tau"])
    from scipy.fft import irfft, rfft
    c = np.zeros(m)
    c[:R + 1], c[m - R:] = kern[R:], kern[:R]
    ftm = np.zeros(m)
    ftm[:ft.size] = ft
    x0 = irfft(rfft(ftm) / rfft(c).real, n=m)
    assert abs(x0[R:R + n + 1].sum() - 1 + diag["delta"]) < 1e-9
    g = np.array([0.3, 1.4, -0.2, 0.5])
    pr = project_simplex(g)
    assert abs(pr.sum() - 1) < 1e-12 and pr.min() >= 0
    assert np.allclose(pr, [0, 0.95, 0, 0.05])


def _poisson_case(rng, eps, d=20000, n=14):
    """bench_profile's case: Poisson(3) counts capped at n = 14; (true profile, noisy counts)."""
    h = np.minimum(rng.poisson(3, d), n)
    return np.bincount(h, minlength=n + 1) / d, noisy(h, eps, rng)


def _pnorm(e, p):
    return np.linalg.norm(e, np.inf if p == "inf" else p)


@pytest.mark.parametrize("eps", [0.5, 1.0])
def test_fast_and_exact_solve_the_same_problem(eps):
    """Apples to apples (the paper's (P) and (P2), §4.2-4.3): Algorithm 2's residual |delta|/||w||_q
    is the optimum of the relaxation (P2), found again by a dense solve of
    (P2); it bounds the exact (P) in the same norm from below, and (P) bounds
    the (P)-objective of Algorithm 3's output from below. On the noiseless
    f~ = M f both recover f exactly, so (P) uses invert's kernel and radius."""
    n, alpha = 14, np.exp(-eps)
    f, v = _poisson_case(np.random.default_rng(7), eps)
    for p in (1, 2, "inf"):
        fh, ft, diag = invert(v, n, alpha, p=p)
        kern, R, m = kernel(alpha, diag["tau"]), diag["radius"], diag["m"]
        c = np.zeros(m)
        c[:R + 1], c[m - R:] = kern[R:], kern[:R]
        b = np.zeros(m)
        b[R:R + n + 1] = 1.0
        _, relaxed = fit_norm(circulant(c), np.concatenate([ft, np.zeros(m - ft.size)]), p, b, (None, None))
        assert relaxed == pytest.approx(diag["residual"], rel=1e-5), p  # SLSQP stops ~1e-6 above
        _, exact = solve_exact(ft, n, alpha, diag["tau"], p)
        rounded = _pnorm(np.convolve(fh, kern) - ft, p)
        assert diag["residual"] <= exact * (1 + 1e-9) and exact <= rounded * (1 + 1e-7), (p, exact, rounded)
        x, val = solve_exact(np.convolve(f, kern), n, alpha, diag["tau"], p)
        assert val < 1e-6 and np.abs(x - f).max() < 1e-6, (p, val)


@pytest.mark.parametrize("eps", [0.5, 1.0])
def test_fast_is_within_ten_percent_of_the_exact_problem_in_its_own_norm(eps):
    """bench_profile's fast-vs-exact table: Algorithms 2 + 3 with norm p against (P) solved exactly in
    the same norm (HiGHS LP for p = 1, inf; SLSQP QP for p = 2), l1 error to
    the true profile, Poisson(3), d = 20,000, n = 14.

    bench_profile.py --reps 1000 gives 1.073 / 1.096 / 0.977 (p = 1 / 2 / inf,
    each +- 0.003..0.007) at eps = 0.5 and 1.073 / 1.027 / 0.874 at eps = 1:
    p = 2 at eps = 0.5 sits on the 10% line. With 40 reps the ratio's s.e. is
    0.01-0.02 (0.04 for p = inf; delta method on the paired errors, which
    matches the spread of the ratio over 60 seeds), so the test asserts what
    40 reps can show: no ratio is significantly above 1.10 (one-sided, 2 s.e.).
    Likewise the default p = 2 is not significantly more than 5% worse than
    p = 1 (measured 0.95-1.03 over eps 0.5-2, d 5,000-80,000)."""
    rng = np.random.default_rng(0)
    alpha, reps = np.exp(-eps), 40
    err = {p: [] for p in (1, 2, "inf")}
    for _ in range(reps):
        f, v = _poisson_case(rng, eps)
        for p in err:
            fh, ft, diag = invert(v, 14, alpha, p=p)
            x, _ = solve_exact(ft, 14, alpha, diag["tau"], p)
            err[p].append((np.abs(fh - f).sum(), np.abs(x - f).sum()))

    def ratio(a, b):
        r = a.mean() / b.mean()
        return r, (a - r * b).std(ddof=1) / np.sqrt(a.size) / b.mean()

    for p, e in err.items():
        r, se = ratio(*np.array(e).T)
        assert r - 2 * se <= 1.10, (p, r, se)
    r, se = ratio(np.array(err[2])[:, 0], np.array(err[1])[:, 0])
    assert r - 2 * se <= 1.05, (r, se)


def test_error_falls_as_one_over_sqrt_d():
    rng = np.random.default_rng(3)
    ds = [2 ** 12, 2 ** 14, 2 ** 16, 2 ** 18]
    err = []
    for d in ds:
        e = []
        for _ in range(8):
            h = np.minimum(rng.poisson(2, d), 15)
            fh, _, _ = invert(noisy(h, 1.0, rng), 15, np.exp(-1.0))
            e.append(np.sqrt(((fh - np.bincount(h, minlength=16) / d) ** 2).sum()))
        err.append(np.mean(e))
    slope = np.polyfit(np.log(ds), np.log(err), 1)[0]
    assert -0.65 < slope < -0.35, slope


def test_naive_is_biased_the_inversion_and_tails_are_not():
    rng = np.random.default_rng(4)
    d, n, eps = 100000, 15, 1.0
    alpha = np.exp(-eps)
    h = np.minimum(rng.poisson(2, d), n)
    f = np.bincount(h, minlength=n + 1) / d
    fast0, naive0, tail2 = [], [], []
    for _ in range(20):
        v = noisy(h, eps, rng)
        fh, ft, diag = invert(v, n, alpha)
        fast0.append(fh[0] - f[0])
        naive0.append(np.mean(np.clip(v, 0, n) == 0) - f[0])
        tail2.append(tails(ft, diag["radius"], alpha, [2])[2] - (h >= 2).mean())
    for errs, biased in ((fast0, False), (tail2, False), (naive0, True)):
        se = np.std(errs, ddof=1) / np.sqrt(len(errs))
        assert (abs(np.mean(errs)) > 10 * se + 0.01) == biased, (np.mean(errs), se)


# ---------------------------------------------------------------- merging
def _rel(lo, hi, dev, epoch=0, seed=b"x" * 16, ids=None):
    cfg = cfg_for(lo, hi, cap=10)
    ids = np.arange(lo, hi) if ids is None else ids
    return next(iter_frames(simulate(cfg, ids[:, None].astype(float), ["id"], seed=seed, device_id=dev,
                                     epoch=epoch)))


def test_disjoint_domains_concatenate_same_ids_refused_unless_forced():
    a, b = _rel(0, 3000, "a"), _rel(3000, 6000, "b", seed=b"y" * 16)
    res = assemble_profile([a, b])
    assert res.stats["ids"] == 6000 and res.stats["domains"] == [[0, 3000], [3000, 6000]]
    assert res.stats["summed_sketches"] == 1 and res.profile[1] > 0.7  # every id seen once
    again = _rel(0, 3000, "a", epoch=1, seed=b"z" * 16)
    with pytest.raises(MergeError, match="kappa"):
        assemble_profile([a, again])
    res2 = assemble_profile([a, again], force_sum=True)
    kappa = res.stats["kappa"]
    assert res2.stats["summed_sketches"] == 2 and res2.stats["error_growth"] == pytest.approx(kappa ** 2)
    assert res2.stats["max_count"] == 20 and res2.profile[2] > 0.5  # each id seen once per epoch
    with pytest.raises(MergeError, match="overlap"):
        assemble_profile([a, _rel(1000, 4000, "c")])


def test_cli_plan_simulate_assemble(tmp_path):
    rng = np.random.default_rng(5)
    ids = rng.integers(0, 20000, 40000)
    csv = tmp_path / "d.csv"
    np.savetxt(csv, ids[:, None], header="dev", comments="", fmt="%d")
    c, r, g, s = (tmp_path / n for n in ("c.json", "r.esf", "g.bin", "s.csv"))
    run = CliRunner().invoke
    assert run(main, ["plan", "--mechanism", "profile", "--domain", "0:20000", "--cap", "40", "--epsilon", "2",
                      "-o", str(c)], catch_exceptions=False).exit_code == 0
    assert run(main, ["simulate", "--config", str(c), "--input", str(csv), "--columns", "dev", "--seed", "0b",
                      "-o", str(r)], catch_exceptions=False).exit_code == 0
    out = run(main, ["assemble", str(r), "--json"], catch_exceptions=False)
    assert out.exit_code == 0
    js = json.loads(out.output)
    assert {"profile", "distinct", "never_seen", "epsilon"} <= set(js) and js["epsilon"] == "2"
    h = np.bincount(ids, minlength=20000)
    assert len(js["profile"]) == 41
    assert abs(js["never_seen"] - np.mean(h == 0)) < 0.02
    assert abs(js["distinct"] - np.sum(h > 0)) < 0.02 * 20000
    assert run(main, ["assemble", str(r), "-o", str(g)], catch_exceptions=False).exit_code == 0
    assert run(main, ["sample", str(g), "-n", "1000", "-o", str(s)], catch_exceptions=False).exit_code == 0
    y = np.loadtxt(s, skiprows=1)
    assert y.shape == (1000,) and y.min() >= 0 and y.max() <= 40


# ------------------------------------------------------------- hashed ids
def test_hashed_ids_are_a_keyed_permutation_sample():
    small = plan_profile(0, 256, 1000, Fraction(1), sample_bits=8, sample_seed="k")
    seed = b"feistel-seed-000"
    empty = next(iter_frames(simulate(small, np.zeros((0, 1)), ["id"], seed=seed))).mechs[0].counts
    every = np.arange(256, dtype=float)[:, None]
    got = next(iter_frames(simulate(small, every, ["id"], seed=seed))).mechs[0].counts
    assert np.array_equal(got - empty, np.ones(256))  # a bijection of the universe
    # a 1/16 sample of 2**20 hashed ids estimates the universe's distinct count
    rng = np.random.default_rng(6)
    active = rng.choice(1 << 20, 50000, replace=False)
    ids = active[rng.integers(0, 50000, 300000)]
    cfg = plan_profile(0, 1 << 16, 40, Fraction(2), sample_bits=20, sample_seed="k1")
    frame = simulate(cfg, ids[:, None].astype(float), ["id"], seed=seed)
    assert simulate(cfg, ids[:, None].astype(float), ["id"], seed=seed, runtime="numpy") == frame
    res = assemble_profile(list(iter_frames(frame)))
    true = np.unique(ids).size
    assert res.stats["sample_fraction"] == 1 / 16
    # sampling sd ~ sqrt(true * 15/16 / 16) * 16 ~ 880, plus the privacy error
    assert abs(res.stats["distinct_universe_estimate"] - true) < 4000
    other = plan_profile(0, 1 << 16, 40, Fraction(2), sample_bits=20, sample_seed="k2")
    rel = next(iter_frames(simulate(other, ids[:10, None].astype(float), ["id"], seed=seed, device_id="b")))
    with pytest.raises(MergeError, match="cannot be combined"):
        assemble_profile(list(iter_frames(frame)) + [rel])
