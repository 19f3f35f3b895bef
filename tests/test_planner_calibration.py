"""Properties of the PrivHP planner's calibrated error model and search
(host_tools/mechanisms/privhp/plan.py): the prediction is a W1 (never above 1),
more RAM never predicts worse, a truthful n_max never picks a plan that the
model predicts worse at that n than the default n_max's pick, the depth
follows its rule (or the caller's depth), and every pick fits the RAM."""
import math
from fractions import Fraction

import pytest
from click.testing import CliRunner

import edgesynth as es
from edgesynth.agent.hashing import MAX_WIDTH
from edgesynth.agent.privhp import build as B
from edgesynth.budget import level_weights
from edgesynth.cli import main
from edgesynth.errors import InputError
from edgesynth.mechanisms.privhp import plan as P
from edgesynth.noise import dlap_variance
from edgesynth.ram import heap_need

GRID = [(d, eps, ram, rt) for d in (1, 2, 4) for eps in (Fraction(1, 10), Fraction(1), Fraction(4))
        for ram in (32 << 10, 64 << 10, 1 << 20) for rt in ("c", "micropython")]


def pick(d, eps, ram, runtime="c", **kw):
    cfg = P.plan_privhp([0.0] * d, [1.0] * d, eps, ram, runtime=runtime, hash_seed="cal", **kw)
    return cfg["mechanisms"][0], cfg["plan"]


def agent_build(spec, factor=1):
    """The device's own parse of ``spec`` and draw_noise's scale checks (the
    counters not filled: a 1 MiB plan's noise takes long in Python)."""
    class M:
        pass
    m = M()
    B.parse(m, spec)
    m.factor = factor
    q = m.q * factor
    for lvl in range(m.r + 1):
        assert (m.j if lvl > m.L else 1) * q <= m.sigma[lvl] * B.MAX_SCALE
    assert not m.clamp_p or q <= m.clamp_p * B.MAX_SCALE
    return m


def shape(m):
    return m["r"], m["k"], m["w"], m["j"]


CLAMP = {"clamp_share": Fraction(1, 50)}   # the planner's default: its notes predict at this noise


def gamma(d, l):
    return 2.0 ** -(l // d)


@pytest.mark.parametrize("d", [1, 2, 4])
def test_noise_is_capped_at_the_parent_mass(d):
    """Uncapped terms, not predicted_w1's min(1, ...): at n = 2 and eps = 1/100
    the noise swamps every count, so consistency moves each split parent's whole
    mass: on the complete tree the noise term is exactly sum_l gamma_{l-1}
    (the old uncapped model gave sd/n per parent, about 2**l times more)."""
    for r in (d, 8, 12):
        noise, collide, prune, res = P.error_terms(d, r, 1 << r, 1, 1, Fraction(1, 100), 2)
        assert noise == pytest.approx(sum(gamma(d, l - 1) for l in range(1, r + 1)), rel=1e-9)
        assert (collide, prune, res) == (0.0, 0.0, gamma(d, r))
    # with sketch levels every term is a mass (at most 1 per level) times gamma (at most 1)
    for r, k, w, j in ((8, 2, 4, 1), (20, 64, 4096, 4), (29, 2048, 16, 2)):
        terms = P.error_terms(d, r, k, w, j, Fraction(1, 100), 2)
        assert all(0 <= t <= r for t in terms) and terms[0] > 0.9 * gamma(d, 0)


def test_the_uncapped_prediction_falls_below_1_with_data():
    """At n = 10**9 and eps = 4 a roomy plan's uncapped prediction is far below
    the cap, so the planner compares uncapped scores, not a flat 1."""
    for d in (1, 2, 4):
        assert P.fit_score(P.error_terms(d, 20, 1024, 4096, 2, Fraction(4), 10 ** 9)) < 0.1


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
    """At the true n (below or above the default 10**6) the truthful plan's
    prediction is at most the default plan's prediction evaluated at that n."""
    default = pick(d, eps, ram, rt)[0]
    for n in (1000, 3 * 10 ** 4, 3 * 10 ** 5, 10 ** 6, 10 ** 7, 2 ** 29):
        truthful = pick(d, eps, ram, rt, n_max=n)[1]["predicted_w1"]
        assert truthful <= P.predicted_w1(d, *shape(default), eps, n, **CLAMP) * (1 + 1e-12), (n, shape(default))


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
    for bad in (0, 1, 30):   # 1 < d = 2 channels: the second would never split
        with pytest.raises(InputError, match="--depth"):
            es.plan("0:1,0:1", epsilon=1, ram="64K", depth=bad)
    # integer channels 0..1000 reach one unit at r = 2 * 10 = 20: deeper splits nothing
    assert es.plan("0:1000,0:1000", epsilon=1, ram="1M", integer="x0,x1", depth=20, hash_seed="d")["plan"][
        "resolution"] == {"x0": 1, "x1": 1}
    with pytest.raises(InputError, match="--depth must be 2..20"):
        es.plan("0:1000,0:1000", epsilon=1, ram="1M", integer="x0,x1", depth=21)


def test_too_many_channels_or_too_little_epsilon_is_one_line():
    """d above the device's 16 channels, and an epsilon so small that every
    level's noise scale exceeds the device's 2**22, are refused by the planner
    (the device would refuse every such plan at build)."""
    with pytest.raises(InputError, match="1..16 channels"):
        pick(17, Fraction(1), 1 << 20)
    with pytest.raises(InputError, match="1..16 channels"):
        pick(30, Fraction(1), 1 << 20)
    assert pick(16, Fraction(1), 1 << 20)[0]["r"] >= 16
    with pytest.raises(InputError, match="too small for the device"):
        pick(2, Fraction(1, 10 ** 6), 64 << 10)


def test_the_device_noise_is_scored():
    """replace doubles every noise scale, clamp_share and uniform_split change
    the levels' budgets: the prediction sees the noise the device draws."""
    base = P.error_terms(2, 16, 256, 256, 1, Fraction(1, 2), 10 ** 4)[0]
    assert P.error_terms(2, 16, 256, 256, 1, Fraction(1, 2), 10 ** 4, factor=2)[0] > 1.5 * base
    assert P.error_terms(2, 16, 256, 256, 1, Fraction(1, 2), 10 ** 4, clamp_share=Fraction(1, 2))[0] > 1.5 * base
    assert P.error_terms(2, 16, 256, 256, 1, Fraction(1, 2), 10 ** 4, uniform=True)[0] != base
    add = pick(2, Fraction(1, 2), 64 << 10, n_max=10 ** 4)[1]["predicted_w1"]
    rep = pick(2, Fraction(1, 2), 64 << 10, n_max=10 ** 4, relation="replace")[1]["predicted_w1"]
    assert rep > add


@pytest.mark.parametrize("d,eps,ram,rt", GRID)
def test_picks_fit_the_ram_and_the_device(d, eps, ram, rt):
    """The pick's charge (counters and the runtime's measured overhead) fits
    the budget; the device's own parse and noise check accept it; w, j, r and
    the candidates per sketch cell are what the search allows."""
    cfg = P.plan_privhp([0.0] * d, [1.0] * d, eps, ram, runtime=rt, hash_seed="cal")
    m, plan = cfg["mechanisms"][0], cfg["plan"]
    agent_build(m)
    r, k, w, j = shape(m)
    need = heap_need(P.counter_bytes(r, k, w, j), rt, "cms", d, P.privhp_arrays(r, k, j))
    assert need == plan["expected_peak_bytes"] <= ram
    assert 1 <= w <= MAX_WIDTH and j in P.ROWS["cms"] and 1 <= r <= 29 and k <= 1 << r
    assert k == 1 << r or 2 * k <= P.MAX_LOAD * w   # the load cap holds on every pick
    if k < 1 << r and w < MAX_WIDTH:   # not the widest: twice as wide must not fit
        assert heap_need(P.counter_bytes(r, k, 2 * w, j), rt, "cms", d, P.privhp_arrays(r, k, j)) > ram


@pytest.mark.parametrize("args, said", [
    (["--bounds", "0:1,0:1", "--depth", "1"], "--depth must be 2..29 for 2 channels"),
    (["--bounds", "0:3,0:3", "--integer", "x0,x1", "--depth", "5"], "--depth must be 2..4 for 2 channels"),
    (["--bounds", ",".join(["0:1"] * 17)], "privhp takes 1..16 channels"),
    (["--bounds", "0:1,0:1", "--epsilon", "1/1000000"], "too small for the device"),
])
def test_cli_refusals_are_one_line(tmp_path, args, said):
    if "--epsilon" not in args:
        args = args + ["--epsilon", "1"]
    res = CliRunner().invoke(main, ["plan", "--ram", "64K", "-o", str(tmp_path / "d.json")] + args)
    assert res.exit_code == 2 and said in res.output and len(res.output.strip().splitlines()) == 1, res.output


@pytest.mark.parametrize("sketch", ["cms", "cs"])
def test_more_rows_never_raise_the_predicted_collisions(sketch):
    """The host fits all j rows jointly: at the same (d, r, k, w) more rows
    never raise the collision term, and it falls by the sketch kind's own row
    gain, j**ROW_GAIN[sketch] (the count sketch's, not count-min's)."""
    for d, r, k, w in [(1, 12, 16, 64), (2, 16, 256, 512), (4, 20, 4096, 256)]:
        cols = [P.error_terms(d, r, k, w, j, Fraction(1), 10 ** 6, sketch=sketch)[1] for j in range(1, 9)]
        assert all(b <= a for a, b in zip(cols, cols[1:])) and cols[-1] < cols[0]
        for j, col in enumerate(cols, 1):
            assert col == pytest.approx(cols[0] * j ** -P.ROW_GAIN[sketch], rel=1e-12)


def test_sketch_noise_is_averaged_over_the_rows():
    """On sketch levels the least-squares recovery averages the j rows' counters:
    with one sketch level and the noise far below every hot parent's mass (large
    n), that level's noise is k hot parents' sd(j / sigma_r) / sqrt(j) / n."""
    d, r, k, eps, n = 1, 9, 256, Fraction(1), 10 ** 12
    for j in (1, 2, 4):
        a = level_weights(d, k, r, j, False)
        sigma = [float(eps) * x / sum(a) for x in a]
        sd = math.sqrt(dlap_variance(j, sigma[r]) / j) / n
        full = P.error_terms(d, r, k, 4, j, eps, n)[0]
        tree = sum(gamma(d, l - 1) * 2 ** (l - 1) * math.sqrt(dlap_variance(1, sigma[l])) / n for l in range(1, r))
        assert full - tree == pytest.approx(k * gamma(d, r - 1) * sd, rel=1e-9)


def test_count_sketch_plans_use_its_rows():
    for d in (1, 2):
        m, plan = pick(d, Fraction(1), 64 << 10, sketch="cs", n_max=10 ** 6)
        assert m["sketch"] == "cs" and m["j"] in P.ROWS["cs"]
        assert plan["predicted_w1"] == pytest.approx(P.predicted_w1(d, *shape(m), Fraction(1), 10 ** 6, sketch="cs",
                                                                    **CLAMP), rel=1e-12)
