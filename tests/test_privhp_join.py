"""PrivHP joined to per-channel CDFs (es.plan cdf_share; privhp/join.py):
raking, in-leaf sampling, assembly, the generator file and the CLI."""
import json
from fractions import Fraction

import msgpack
import numpy as np
import pytest
from click.testing import CliRunner

import edgesynth as es
from edgesynth import ram
from edgesynth.cli import main
from edgesynth.errors import InputError, MergeError
from edgesynth.mechanisms import load_generator
from edgesynth.mechanisms.cdf.generator import CDFGenerator
from edgesynth.mechanisms.integers import cell_integers
from edgesynth.mechanisms.privhp import generator
from edgesynth.mechanisms.privhp.generator import Generator
from edgesynth.mechanisms.privhp.growth import Leaves, generator_need, leaf_cells
from edgesynth.mechanisms.privhp.join import InLeaf, Shape, join_need, marginal, rake
from edgesynth.runtimes import native


def grid_leaves(level, mass):
    """All 2**level leaves of one level over 2 channels, with ``mass``."""
    return Leaves(np.full(1 << level, level), np.arange(1 << level), mass)


def share(g):
    """Each leaf's share of the box volume (rake's ``vol``)."""
    return np.exp2(-g.leaves.level)


def plain(leaves, d=2):
    return Generator(["a", "b"][:d], [0.0] * d, [1.0] * d, leaves, {})


def skewed_cdf(K, power):
    """A CDF over K equal bins of [0, 1): x**power at the right edges."""
    return ((np.arange(1, K + 1) / K) ** power)


def test_rake_keeps_masses_nonnegative_and_the_total():
    rng = np.random.default_rng(1)
    g = plain(grid_leaves(6, rng.normal(10, 8, 64)))  # some negative noisy masses
    F = np.stack([skewed_cdf(50, 3), skewed_cdf(50, 0.5)])
    shapes = {c: Shape(F[c], 0.0, 1.0) for c in range(2)}
    m = rake(g.box_lo, g.box_hi, g.leaves.mass, shapes, share(g))
    assert np.all(m >= 0)
    assert m.sum() == pytest.approx(np.maximum(g.leaves.mass, 0).sum(), rel=1e-12)


def test_rake_fits_consistent_marginals():
    # leaves on a 4 x 4 grid aligned with CDF bins (K = 8): the target is reachable
    # (the leaf table's column and row masses must equal the CDF's mass of the interval),
    # so IPF converges to it; the gap before raking is large
    rng = np.random.default_rng(2)
    g = plain(grid_leaves(4, rng.uniform(1, 5, 16)))
    F = np.stack([skewed_cdf(8, 2), skewed_cdf(8, 0.4)])
    shapes = {c: Shape(F[c], 0.0, 1.0) for c in range(2)}
    total = g.leaves.mass.sum()

    def gap(m):
        return max(np.abs(marginal(g.box_lo, g.box_hi, m, s, c) / total - np.diff(s.P)).max()
                   for c, s in shapes.items())
    assert gap(g.leaves.mass) > 0.05
    m = rake(g.box_lo, g.box_hi, g.leaves.mass, shapes, share(g), rounds=200)
    assert gap(m) < 1e-9
    # and a few rounds already move the marginal toward the CDF
    assert gap(rake(g.box_lo, g.box_hi, g.leaves.mass, shapes, share(g), rounds=2)) < gap(g.leaves.mass) / 4


def test_rake_moves_unaligned_leaves_toward_the_cdf():
    rng = np.random.default_rng(3)
    g = plain(grid_leaves(6, rng.uniform(0, 5, 64)))
    F = np.stack([skewed_cdf(37, 3), skewed_cdf(37, 1.5)])
    shapes = {c: Shape(F[c], 0.0, 1.0) for c in range(2)}
    total = g.leaves.mass.sum()
    gaps = [max(np.abs(marginal(g.box_lo, g.box_hi, m, s, c) / total - np.diff(s.P)).max()
                for c, s in shapes.items())
            for m in (g.leaves.mass, rake(g.box_lo, g.box_hi, g.leaves.mass, shapes, share(g)))]
    assert gaps[1] < gaps[0] / 10


def test_rake_places_cdf_mass_where_the_tree_has_none_and_never_widens_the_gap():
    # the tree puts nothing on channel 0's right half, the CDF 30%: the uniform floor lets raking place it
    g = plain(grid_leaves(6, np.ones(64)))
    mass = np.where(g.box_lo[:, 0] >= 0.5, 0.0, 1.0)
    F = np.stack([np.concatenate([np.linspace(0, 0.7, 9)[1:], np.linspace(0.7, 1, 9)[1:]]), skewed_cdf(16, 2)])
    shapes = {c: Shape(F[c], 0.0, 1.0) for c in range(2)}

    def gap(m):
        return sum(np.abs(marginal(g.box_lo, g.box_hi, m, s, c) / m.sum() - np.diff(s.P)).sum()
                   for c, s in shapes.items())
    m = rake(g.box_lo, g.box_hi, mass, shapes, share(g))
    assert m[g.box_lo[:, 0] >= 0.5].sum() / m.sum() == pytest.approx(0.3, abs=0.01)
    assert gap(m) < 0.05 < gap(mass)
    # CDFs no leaf mass can fit (channel 1 all in its first bin, every leaf spanning 4 of them): the
    # returned pass is never worse than the input
    F_bad = np.stack([F[0], np.ones(16)])
    shapes = {c: Shape(F_bad[c], 0.0, 1.0) for c in range(2)}
    rng = np.random.default_rng(9)
    mass = rng.uniform(0, 1, 64)
    assert gap(rake(g.box_lo, g.box_hi, mass, shapes, share(g))) <= gap(mass) + 1e-12


def test_in_leaf_samples_stay_in_their_leaf_and_follow_the_cdf():
    rng = np.random.default_rng(4)
    g = plain(grid_leaves(6, np.ones(64)))
    F = np.stack([skewed_cdf(64, 4), np.concatenate([np.zeros(32), np.linspace(0, 1, 33)[1:]])])  # 2nd: flat half
    shapes = {c: Shape(F[c], 0.0, 1.0) for c in range(2)}
    inl = InLeaf(g.box_lo, g.box_hi, shapes)
    idx = rng.integers(0, 64, 200_000)
    u = rng.random((idx.size, 2))
    cell = np.take(g._cell, idx, axis=0)
    block = u * cell[:, 0] + cell[:, 1]
    inl.apply(block, idx, u, cell)
    assert np.all(block >= g.box_lo[idx]) and np.all(block < g.box_hi[idx])
    # inside one leaf [1/8, 2/8) on channel 0 the draw is F restricted to it: a KS distance within
    # 1.36 / sqrt(m) (the 5% critical value) of the restricted CDF
    s = shapes[0]
    sel = g.box_lo[idx, 0] == 0.125
    x = np.sort(block[sel, 0])
    G0, G1 = s.G(np.array([0.125, 0.25]))
    emp = np.arange(1, x.size + 1) / x.size
    assert np.abs(emp - (s.G(x) - G0) / (G1 - G0)).max() < 1.36 / np.sqrt(x.size)
    # a leaf where channel 1's CDF is flat is sampled uniformly: the draw is the uniform one
    flat = g.box_hi[idx, 1] <= 0.5
    assert np.allclose(block[flat, 1], u[flat, 1] * cell[flat, 0, 1] + cell[flat, 1, 1])


def test_a_uniform_cdf_leaves_the_sampler_unchanged():
    # leaf masses whose marginals are uniform (a product of equal rows) and a uniform CDF:
    # raking changes nothing and the in-leaf draw is the uniform one: the same samples
    g0 = plain(grid_leaves(4, np.ones(16) * 3.0))
    F = np.tile(np.arange(1, 41) / 40, (2, 1))
    g1 = Generator(g0.names, g0.lo, g0.hi, g0.leaves, {}, None, F)
    assert np.allclose(g1.prob, g0.prob, rtol=0, atol=1e-15)
    a, b = g0.sample(50_000, np.random.default_rng(5)), g1.sample(50_000, np.random.default_rng(5))
    assert np.allclose(a, b, rtol=0, atol=1e-12)


def _skewed_data(n, seed):
    rng = np.random.default_rng(seed)
    return np.stack([rng.beta(0.7, 4, n), rng.beta(5, 1.2, n)], axis=1)


def _col_w1(g, x, grid=1 << 14):
    """Mean per-column W1 between data x and generator g's marginal on [0, 1) (exact up to the grid)."""
    g = getattr(g, "model", g)
    edges = np.arange(grid + 1) / grid
    out = []
    for c in range(x.shape[1]):
        P = edges if g.cdf is None else Shape(g.cdf[c], 0.0, 1.0).G(edges)
        Fg = np.cumsum(marginal(g.box_lo, g.box_hi, g.prob, Shape(P[1:], 0.0, 1.0), c))
        Fd = np.searchsorted(np.sort(x[:, c]), edges[1:], side="right") / x.shape[0]
        out.append(np.abs(Fd - Fg).mean())
    return float(np.mean(out))


@pytest.mark.slow
def test_joined_beats_plain_per_column_end_to_end():
    # skewed 2-D data, 64 KiB C device, epsilon 1, share 3/10 (the recommendation), three seeds.
    # bench_privhp_join.py measured the joined per-column W1 at 0.4-0.7x the plain one on skewed data; a
    # mean ratio below 0.85 leaves room for the seed spread it measured (about +-20% at n = 2e4)
    x = _skewed_data(20_000, 6)
    ratios = []
    for seed in range(3):
        w = []
        for share in (0, "3/10"):
            cfg = es.plan("0:1,0:1", epsilon=1, ram="64K", device_runtime="c", hash_seed="t%d" % seed,
                          cdf_share=share)
            g = es.assemble(es.simulate(cfg, x, seed=100 + seed, runtime="numpy"))
            assert (getattr(g, "model", g).cdf is not None) == (share != 0)
            w.append(_col_w1(g, x))
        ratios.append(w[1] / w[0])
    assert np.mean(ratios) < 0.85, ratios


def small_cfg(share="1/4", ram="32K", **kw):
    return es.plan("0:1,0:100", epsilon=1, ram=ram, device_runtime="c", hash_seed="s", cdf_share=share, **kw)


def test_plan_splits_epsilon_exactly_and_zero_is_todays_config():
    cfg = small_cfg("1/4")
    assert [m["kind"] for m in cfg["mechanisms"]] == ["privhp", "cdf"]
    assert cfg["epsilon"] == [1, 1]
    assert [Fraction(p["epsilon"]) for p in cfg["plan"]["combined"]] == [Fraction(3, 4), Fraction(1, 4)]
    assert cfg["mechanisms"][1]["names"] == cfg["mechanisms"][0]["names"]
    assert cfg["mechanisms"][1]["lo"] == cfg["mechanisms"][0]["lo"]
    assert cfg["plan"]["expected_peak_bytes"] <= 32768
    base = es.plan("0:1,0:100", epsilon=1, ram="32K", device_runtime="c", hash_seed="s")
    assert json.dumps(small_cfg(0)) == json.dumps(base) == json.dumps(small_cfg("0.0"))


@pytest.mark.parametrize("bounds,ram,runtime,joined", [
    ("0:1,0:1", "32K", "c", False),                     # d = 2: measured mixed, privhp alone
    ("0:1,0:1", "256K", "c", False),
    ("0:1,0:1,0:1", "32K", "c", True),                  # d >= 3: joined at any size that fits
    ("0:1,0:1,0:1,0:1", "64K", "c", True),
    ("0:1,0:1,0:1,0:1", "32K", "micropython", False),   # two runtime charges do not fit: privhp alone
    ("0:1", "256K", "c", False),                        # one channel: the tree is its marginal
])
def test_the_default_share_follows_the_measured_rule(bounds, ram, runtime, joined):
    """None (the default) joins 0.3 at d >= 3 when it fits, decided on public parameters alone."""
    cfg = es.plan(bounds, epsilon=1, ram=ram, device_runtime=runtime, hash_seed="s")
    kinds = [m["kind"] for m in cfg["mechanisms"]]
    assert kinds == (["privhp", "cdf"] if joined else ["privhp"])
    if joined:
        assert cfg["plan"]["cdf_share"] == "3/10" and cfg == es.plan(bounds, epsilon=1, ram=ram,
                                                                     device_runtime=runtime, hash_seed="s",
                                                                     cdf_share="3/10")
        alone = es.plan(bounds, epsilon=1, ram=ram, device_runtime=runtime, hash_seed="s", cdf_share=0)
        assert [m["kind"] for m in alone["mechanisms"]] == ["privhp"]
    # the default applies to privhp only: a cdf plan stays one mechanism
    assert [m["kind"] for m in es.plan(bounds, epsilon=1, ram=ram, mechanism="cdf", device_runtime=runtime)
            ["mechanisms"]] == ["cdf"]


def test_the_default_is_decided_above_the_transport_and_says_when_it_does_not_fit():
    """Under mqtt the agent's budget is searched for the joined config
    itself (privhp alone at the budgets the search probes needs more than
    80 KiB with the transport, the joined plan less); at 32 KiB MicroPython
    the joined plan cannot fit and the plan says so."""
    mq = es.plan("0:1,0:1,0:1", epsilon=1, ram="80K", transport="mqtt", hash_seed="s")
    assert [m["kind"] for m in mq["mechanisms"]] == ["privhp", "cdf"] and mq["plan"]["cdf_share"] == "3/10"
    small = es.plan("0:1,0:1,0:1", epsilon=1, ram="32K", device_runtime="micropython", hash_seed="s")
    assert [m["kind"] for m in small["mechanisms"]] == ["privhp"]
    assert small["plan"]["cdf_share"].startswith("0 (the default 3/10 does not fit")


@pytest.mark.parametrize("kw", [dict(bins=64), dict(epsilon="0.123457"), dict(integer=[2]),
                                dict(names="p,q,r", integer="r"),
                                dict(bounds={"a": (0, 1), "b": (0, 1), "c": (0, 100)}, integer=["c"])])
def test_the_default_plans_privhp_alone_where_the_rule_does_not_apply(kw):
    """--bins (a cdf plan's), an epsilon whose 0.3 part needs 7 decimals,
    an integer channel (by position or by name, bounds as a dict)."""
    args = dict(bounds="0:1,0:1,0:100", epsilon=1, ram="64K", device_runtime="c", hash_seed="s")
    args.update(kw)
    cfg = es.plan(args.pop("bounds"), **args)
    assert [m["kind"] for m in cfg["mechanisms"]] == ["privhp"] and "cdf_share" not in cfg["plan"]


def test_the_default_keeps_genuine_errors():
    with pytest.raises(InputError, match="--sketch must be one of"):
        es.plan("0:1,0:1,0:1", epsilon=1, ram="64K", device_runtime="c", sketch="zz")


def test_the_default_leaves_integer_channels_alone_and_a_share_over_integers_only_is_refused():
    mixed = es.plan("0:1,0:1,0:100", epsilon=1, ram="64K", device_runtime="c", hash_seed="s", integer="x2")
    assert [m["kind"] for m in mixed["mechanisms"]] == ["privhp"]
    with pytest.raises(InputError, match="every channel is integer"):
        es.plan("0:10,0:10", epsilon=1, ram="64K", device_runtime="c", integer="x0,x1", cdf_share="0.3")


@pytest.mark.parametrize("kw,said", [
    (dict(n_max=-5), "--n-max must be in"), (dict(rows="3"), "--rows must be an integer"),
    (dict(rows=99), "--rows must be in"), (dict(bins=64), "--bins and --branching apply"),
])
def test_a_share_keeps_the_checks_of_a_plain_plan(kw, said):
    with pytest.raises(InputError, match=said):
        es.plan("0:1,0:1", epsilon=1, ram="64K", device_runtime="c", cdf_share="0.3", **kw)


def test_a_share_that_needs_too_many_decimals_is_refused_by_name():
    with pytest.raises(InputError, match="--cdf-share .* needs more than 6 decimal places"):
        es.plan("0:1,0:1", epsilon=1, ram="64K", device_runtime="c", cdf_share="0.123456789")


@pytest.mark.parametrize("share", ["1", "-0.1", "1.5", "x"])
def test_plan_refuses_a_share_outside_0_1(share):
    with pytest.raises(InputError, match=r"--cdf-share must be a fraction in \[0, 1\)"):
        small_cfg(share)


def test_plan_refuses_in_one_line_when_the_split_does_not_fit():
    with pytest.raises(InputError) as e:
        es.plan("0:1,0:1", epsilon=1, ram="32K", hash_seed="s", cdf_share="1/5")  # micropython: two overheads
    assert "--cdf-share" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(InputError, match="applies to --mechanism privhp"):
        es.plan("0:1", epsilon=1, bins=16, mechanism="cdf", cdf_share="1/5")


def test_combined_config_gives_identical_frames_on_cpython_numpy_and_the_c_core():
    cfg = small_cfg("1/4")
    x = _skewed_data(300, 7) * [1, 100]
    a = es.simulate(cfg, x, seed=9, runtime="cpython")
    assert es.simulate(cfg, x, seed=9, runtime="numpy") == a
    if native.available():
        assert es.simulate(cfg, x, seed=9, runtime="native") == a


@pytest.fixture(scope="module")
def joined_frames():
    x = _skewed_data(2000, 8) * [1, 100]
    return es.simulate(small_cfg("1/4"), x, seed=10, runtime="numpy")


def test_assembly_default_joins_and_mechanism_gives_each_alone(joined_frames):
    g = getattr(es.assemble(joined_frames), "model", None)
    assert isinstance(g, Generator) and g.cdf is not None and g.cdf.shape[0] == 2
    assert g.summary()["joined_cdf"]["channels"] == ["x0", "x1"]
    assert g.meta["joined_with"]["mechanism_epsilon"] == "1/4"
    assert es.assemble(joined_frames, mechanism="privhp").model.cdf is None
    assert isinstance(es.assemble(joined_frames, mechanism="cdf").model, CDFGenerator)


def test_different_channels_keep_the_choose_one_error():
    p = es.plan("0:1,0:1", epsilon=1, ram="32K", device_runtime="c", hash_seed="s", names="a,b")
    c = es.plan("0:2,0:1", epsilon=1, bins=16, mechanism="cdf", names="a,b")
    frames = es.simulate(es.combine([p, c]), np.full((50, 2), 0.5), seed=1, runtime="numpy")
    with pytest.raises(MergeError, match="choose one"):
        es.assemble(frames)


def test_a_cdf_device_beside_a_privhp_device_is_not_joined():
    """Same channels, but the two states come from different devices (two
    populations): the default keeps the choose-one error."""
    p = es.plan("0:1,0:1", epsilon=1, ram="32K", device_runtime="c", hash_seed="s", names="a,b")
    c = es.plan("0:1,0:1", epsilon=1, bins=16, mechanism="cdf", names="a,b")
    x = np.full((50, 2), 0.5)
    frames = es.simulate(p, x, seed=1, runtime="numpy", device_id="p") + es.simulate(c, x, seed=2, runtime="numpy",
                                                                                  device_id="c")
    with pytest.raises(MergeError, match="several mechanisms"):
        es.assemble(frames)


def test_generator_file_round_trip(joined_frames):
    g = es.assemble(joined_frames).model
    h = load_generator(g.to_bytes())
    assert np.array_equal(h.cdf, g.cdf) and np.array_equal(h.prob, g.prob)
    assert np.array_equal(h.sample(1000, np.random.default_rng(1)), g.sample(1000, np.random.default_rng(1)))
    p = es.assemble(joined_frames, mechanism="privhp").model
    assert load_generator(p.to_bytes()).cdf is None  # a file without the keys loads as before


def _with(gen, **keys):
    m = msgpack.unpackb(gen.to_bytes())
    for k, v in keys.items():
        if v is None:
            m.pop(k)
        else:
            m[k] = v
    return msgpack.packb(m)


def _bad_cdfs(F):
    nan = F.copy()
    nan[0, 3] = np.nan
    down = F.copy()
    down[1, 2] = 2.0
    return {"shape": {"cdf": F[:, :-1].tobytes()},
            "nan": {"cdf": nan.tobytes()},
            "non-monotone": {"cdf": down.tobytes()},
            "huge bins": {"cdf_bins": 1 << 40},
            "bins alone": {"cdf": None},
            "not bytes": {"cdf": [1.0, 2.0]}}


@pytest.mark.parametrize("case", list(_bad_cdfs(np.zeros((2, 4)))))
def test_hostile_joined_files_are_refused_in_one_line(joined_frames, case):
    g = es.assemble(joined_frames).model
    data = _with(g, **_bad_cdfs(g.cdf)[case])
    with pytest.raises(InputError) as e:
        load_generator(data, "f.gen")
    assert str(e.value).startswith("f.gen:") and "\n" not in str(e.value)


def test_cli_plan_cdf_share(tmp_path):
    out = tmp_path / "c.json"
    r = CliRunner().invoke(main, ["plan", "--bounds", "0:1,0:1", "--epsilon", "1", "--ram", "64K",
                                  "--device-runtime", "c", "--cdf-share", "0.2", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "with a cdf of" in r.output and "epsilon 1/5" in r.output
    assert [m["kind"] for m in json.loads(out.read_text())["mechanisms"]] == ["privhp", "cdf"]
    for bad in ("1", "-0.5"):
        r = CliRunner().invoke(main, ["plan", "--bounds", "0:1,0:1", "--epsilon", "1", "--ram", "64K",
                                      "--cdf-share", bad, "-o", str(out)])
        assert r.exit_code == 2 and "error: --cdf-share must be a fraction in [0, 1)" in r.output


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("lo, hi, d", [(-1e300, 1e300, 2), (0.0, 1e-40, 8)])
def test_raking_does_not_depend_on_the_bounds_scale(lo, hi, d):
    # the floor's weights are the leaves' shares of the box volume: bounds +-1e300 (volume inf in data units)
    # and tiny spans over 8 channels (volume 0) rake exactly as the unit box does, without a warning
    level = 2 * d
    rng = np.random.default_rng(11)
    leaves = Leaves(np.full(1 << level, level), np.arange(1 << level), rng.uniform(0, 5, 1 << level))
    F = np.stack([skewed_cdf(32, 0.3 + 0.4 * c) for c in range(d)])
    names = ["c%d" % c for c in range(d)]
    unit = Generator(names, [0.0] * d, [1.0] * d, leaves, {}, None, F)
    g = Generator(names, [lo] * d, [hi] * d, leaves, {}, None, F)
    with np.errstate(over="ignore", under="ignore"):
        v = np.prod(g.box_hi - g.box_lo, axis=1)
    assert np.all(np.isinf(v) | (v == 0))  # the volume in data units over- or underflows
    assert np.abs(unit.prob - leaves.mass / leaves.mass.sum()).max() > 1e-3  # raking moved the masses
    assert np.allclose(g.prob, unit.prob, rtol=1e-9, atol=0)
    x = g.sample(1000, np.random.default_rng(1))
    assert np.all((x >= lo) & (x < hi))
    # no signal at all: uniform on the box, at any scale
    empty = Generator(names, [lo] * d, [hi] * d, Leaves(leaves.level, leaves.path, -leaves.mass), {}, None, F)
    assert np.allclose(empty.prob, 1.0 / leaves.level.size, rtol=1e-12, atol=0)


class OneLeaf:
    """A stand-in for numpy's Generator in Generator.sample that puts every
    point in leaf ``leaf``; the uniforms are seeded numpy ones."""

    def __init__(self, leaf, seed):
        self.leaf, self.rng = leaf, np.random.default_rng(seed)

    def multinomial(self, m, p):
        counts = np.zeros(len(p), np.int64)
        counts[self.leaf] = m
        return counts

    def shuffle(self, a):
        pass

    def random(self, shape):
        return self.rng.random(shape)


def test_mixed_real_and_integer_channels_end_to_end():
    # one real channel (skewed) and one integer one: only the real channel is joined; per leaf, its draws stay
    # in the leaf's box and follow the CDF there (they differ from the plain generator's uniform ones for the
    # same uniforms), and the integer draws are whole numbers of the leaf's cell, the plain generator's exactly
    rng = np.random.default_rng(12)
    x = np.stack([rng.beta(0.7, 4, 5000), rng.binomial(1000, 0.3, 5000)], axis=1)
    cfg = es.plan("0:1,0:1000", epsilon=1, ram="64K", device_runtime="c", hash_seed="m", integer=["x1"],
                  cdf_share="0.3")
    frames = es.simulate(cfg, x, seed=13, runtime="numpy")
    g, p = es.assemble(frames).model, es.assemble(frames, mechanism="privhp").model
    assert g.integer == [False, True] and g.cdf is not None
    assert g.summary()["joined_cdf"]["channels"] == ["x0"]
    q, bits = leaf_cells(g.leaves, 2)
    first, count = cell_integers(q[:, 1], 1 << bits[:, 1], 0, 1000)
    moved = 0
    for leaf in np.random.default_rng(14).choice(g.prob.size, 30, replace=False):
        s, t = g.sample(200, OneLeaf(leaf, leaf)), p.sample(200, OneLeaf(leaf, leaf))
        assert np.all((s[:, 0] >= g.box_lo[leaf, 0]) & (s[:, 0] < g.box_hi[leaf, 0]))
        assert np.all(s[:, 1] == np.floor(s[:, 1]))
        assert np.all((s[:, 1] >= first[leaf]) & (s[:, 1] < first[leaf] + count[leaf]))
        assert np.array_equal(s[:, 1], t[:, 1])
        moved += not np.allclose(s[:, 0], t[:, 0], rtol=0, atol=1e-12)
    assert moved >= 10  # the CDF's shape is not uniform inside most leaves


def test_the_raking_memory_is_checked_on_load_before_raking(monkeypatch):
    # a file whose leaves fit the host limit but whose leaves + joined CDFs of 2**16 bins do not: refused in
    # one line before rake runs
    K = 1 << 16
    F = np.tile(np.arange(1, K + 1) / K, (2, 1))
    data = _with(plain(grid_leaves(6, np.ones(64))), cdf_bins=K, cdf=F.tobytes())
    assert load_generator(data).cdf.shape == (2, K)
    limit = 8 << 20
    assert generator_need(64, 2) < limit < generator_need(64, 2) + join_need(64, K, 2)
    monkeypatch.delenv("EDGESYNTH_HOST_MEMORY", raising=False)
    monkeypatch.setattr(ram, "HOST_MEMORY", limit)

    def no_rake(*a, **k):
        raise AssertionError("raked before the memory check")
    monkeypatch.setattr(generator, "rake", no_rake)
    with pytest.raises(InputError) as e:
        load_generator(data, "f.gen")
    msg = str(e.value)
    assert msg.startswith("f.gen: loading a generator of 64 leaves over 2 channel(s) joined to CDFs of 65536 bins")
    assert "host limit" in msg and "\n" not in msg


@pytest.mark.parametrize("row", ["negative", "not ending at 1"])
def test_cdf_rows_out_of_0_1_or_not_ending_at_1_are_refused(joined_frames, row):
    g = es.assemble(joined_frames).model
    F = g.cdf.copy()
    K = F.shape[1]
    F[0] = np.linspace(-0.5, 1.0, K) if row == "negative" else np.linspace(0.1, 0.9, K)  # both non-decreasing
    assert np.all(np.diff(F[0]) >= 0)
    with pytest.raises(InputError, match=r"^f\.gen: the joined CDFs are not CDFs") as e:
        load_generator(_with(g, cdf=F.tobytes()), "f.gen")
    assert "\n" not in str(e.value)
