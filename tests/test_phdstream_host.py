"""PHDStream's host post-processing (edgesynth.mechanisms.phdstream.tree,
.generator and .metric): Ext_T against its definition, consistency of G,
the sampler's counts per leaf (float boxes and the stream generator's
integer cells), the generator file's checks and the paper's range-query
metric on hand-checked cases."""
import msgpack
import numpy as np
import pytest

from edgesynth.errors import EvaluationInputError, InputError
from edgesynth.mechanisms.phdstream import generator, metric, tree


def _random_tree(rng, beta, n_splits):
    """A random union tree: ``n_splits`` times, a random current leaf gets
    all ``beta`` children (new rows appended, so BFS order differs from row
    order)."""
    children = [[-1] * beta]
    for _ in range(n_splits):
        leaves = [v for v, row in enumerate(children) if row[0] < 0]
        v = leaves[rng.integers(len(leaves))]
        children[v] = list(range(len(children), len(children) + beta))
        children.extend([[-1] * beta for _ in range(beta)])
    return np.array(children, dtype=np.int64)


def _ext_by_definition(children, values):
    """Ext_T straight from the definition: w(v, u) = 1 for u = v or a strict
    ancestor of v, beta**-k for u k levels below v, 0 otherwise."""
    parent, depth, _ = tree.structure(children)
    beta, n = children.shape[1], children.shape[0]

    def ancestors(u):
        out = []
        while u >= 0:
            out.append(u)
            u = parent[u]
        return out

    out = np.zeros(n)
    for u in range(n):
        up = ancestors(u)
        for v in range(n):
            if v in up:  # v is u or an ancestor of u: u is k levels below v
                w = float(beta) ** -(depth[u] - depth[v])
            elif u in ancestors(v):  # u a strict ancestor of v
                w = 1.0
            else:
                w = 0.0
            out[u] += values[v] * w
    return out


def _cut(children, rng):
    """A random disjoint cover of the root by nodes of the tree (the leaves
    of a random subtree, like a step's T(t))."""
    out, stack = [], [0]
    while stack:
        v = stack.pop()
        if children[v, 0] >= 0 and rng.random() < 0.7:
            stack.extend(children[v].tolist())
        else:
            out.append(v)
    return np.array(sorted(out))


def test_privtree_params_match_the_corrected_formulas():
    p = tree.privtree_params(1.0, 2)
    assert p["eps_tree"] == p["eps_counts"] == 0.5
    assert p["lam"] == 6.0 and p["leaf_scale"] == 2.0
    assert p["delta"] == pytest.approx(4.159, abs=1e-3)
    p4 = tree.privtree_params(1.0, 4)
    assert p4["lam"] == pytest.approx(7 / 1.5)  # (2*4 - 1) / ((4 - 1) * 0.5)
    assert p4["delta"] == pytest.approx(6.469, abs=1e-3)
    assert tree.privtree_params(0.5, 2)["lam"] == 12.0
    with pytest.raises(EvaluationInputError):
        tree.privtree_params(0.0, 2)


@pytest.mark.parametrize("beta", [2, 3, 4])
def test_ext_equals_its_definition_and_not_the_printed_closed_form(beta):
    rng = np.random.default_rng(14 + beta)
    children = _random_tree(rng, beta, 6)
    values = rng.integers(-20, 40, size=children.shape[0]).astype(float)
    np.testing.assert_allclose(tree.ext(children, values), _ext_by_definition(children, values), rtol=0,
                               atol=1e-12)


def test_ext_hand_case():
    # root 0 -> (1, 2); 1 -> (3, 4). Cn: root 8, node 1: 4, node 3: 1, node 2: -2
    children = np.array([[1, 2], [3, 4], [-1, -1], [-1, -1], [-1, -1]])
    g = tree.ext(children, np.array([8.0, 4.0, -2.0, 1.0, 0.0]))
    # root: everything = 11; node 1: 8/2 + 4 + 1 = 9; node 2: 8/2 - 2 = 2;
    # node 3: (8/2 + 4)/2 + 1 = 5; node 4: (8/2 + 4)/2 = 4
    assert g.tolist() == [11.0, 9.0, 2.0, 5.0, 4.0]


@pytest.mark.parametrize("beta", [2, 4])
def test_g_is_consistent_and_keeps_the_total(beta):
    rng = np.random.default_rng(7 * beta)
    children = _random_tree(rng, beta, 200)
    cn = rng.integers(-30, 60, size=children.shape[0]).astype(float)
    g = tree.ext(children, cn)
    internal = np.flatnonzero(children[:, 0] >= 0)
    np.testing.assert_allclose(g[internal], g[children[internal]].sum(axis=1), rtol=1e-12, atol=1e-9)
    assert g[0] == pytest.approx(cn.sum(), abs=1e-9)
    for _ in range(5):  # any cut (a step's leaf set) carries the whole mass
        assert g[_cut(children, rng)].sum() == pytest.approx(cn.sum(), abs=1e-8)


def test_ext_is_linear():
    rng = np.random.default_rng(3)
    children = _random_tree(rng, 2, 30)
    a, b = rng.normal(size=(2, children.shape[0]))
    np.testing.assert_allclose(tree.ext(children, 2 * a - 3 * b),
                               2 * tree.ext(children, a) - 3 * tree.ext(children, b), atol=1e-12)


def test_structure_refuses_malformed_trees():
    with pytest.raises(EvaluationInputError, match="all beta children or none"):
        tree.structure(np.array([[1, -1], [-1, -1]]))
    with pytest.raises(EvaluationInputError, match="twice"):
        tree.structure(np.array([[1, 1], [-1, -1]]))
    with pytest.raises(EvaluationInputError, match="not reachable"):
        tree.structure(np.array([[-1, -1], [-1, -1]]))


def test_node_boxes_alternate_axes_and_halve():
    children = np.array([[1, 2], [3, 4], [-1, -1], [-1, -1], [-1, -1]])
    blo, bhi = tree.node_boxes(children, [0.0, 10.0], [4.0, 12.0])
    # root cut on x, node 1 (x in [0,2)) cut on y
    assert blo.tolist() == [[0, 10], [0, 10], [2, 10], [0, 10], [0, 11]]
    assert bhi.tolist() == [[4, 12], [2, 12], [4, 12], [2, 11], [2, 12]]
    b3 = tree.node_boxes(np.array([[1, 2, 3], [-1] * 3, [-1] * 3, [-1] * 3]), [0.0], [1.0])
    np.testing.assert_allclose(b3[0][:, 0], [0, 0, 1 / 3, 2 / 3])
    assert b3[1][3, 0] == 1.0


def test_point_counts_ceil_positive_masses_only():
    counts = tree.point_counts([3.0, 2.1, 0.2, 0.0, -0.5, -7.0, 1e-9])
    assert counts.tolist() == [3, 3, 1, 0, 0, 0, 1]


def test_sample_puts_ceil_g_points_in_each_positive_leaf():
    rng = np.random.default_rng(5)
    children = _random_tree(rng, 2, 40)
    cn = rng.integers(-5, 12, size=children.shape[0]).astype(float)
    leaves = np.flatnonzero(children[:, 0] < 0)
    blo, bhi, mass = tree.step_leaves(children, leaves, cn, [0.0, 0.0], [1.0, 1.0])
    assert mass.sum() == pytest.approx(cn.sum())
    pts, leaf = tree.sample(blo, bhi, mass, np.random.default_rng(0))
    want = np.where(mass > 0, np.ceil(mass), 0)
    assert np.bincount(leaf, minlength=leaves.size).tolist() == want.astype(int).tolist()
    assert (mass <= 0).any() and (want[mass <= 0] == 0).all()  # the case is exercised
    assert np.all(pts >= blo[leaf]) and np.all(pts < bhi[leaf])
    # the same seed gives the same snapshot
    again, _ = tree.sample(blo, bhi, mass, np.random.default_rng(0))
    assert np.array_equal(pts, again)


def test_sample_is_uniform_within_a_leaf():
    pts, _ = tree.sample(np.array([[0.0, 0.0]]), np.array([[2.0, 1.0]]), np.array([20000.0]),
                         np.random.default_rng(11))
    # mean of U[0,2) is 1 with sd 2/sqrt(12)/sqrt(n) = 0.0041: 5 sd
    assert abs(pts[:, 0].mean() - 1.0) < 0.021 and abs(pts[:, 1].mean() - 0.5) < 0.011


def test_range_counts_hand_case_half_open():
    pts = np.array([[0.1, 0.1], [0.5, 0.5], [0.5, 0.2], [0.9, 0.9], [0.2, 0.5]])
    rects = np.array([[0.0, 0.0, 0.5, 0.5],   # 0.5 excluded on both axes: only (0.1, 0.1)
                      [0.0, 0.0, 0.51, 0.51],  # all but (0.9, 0.9)
                      [0.5, 0.2, 1.0, 1.0],    # (0.5,0.5), (0.5,0.2), (0.9,0.9)
                      [0.3, 0.3, 0.4, 0.4]])
    assert metric.range_counts(pts, rects).tolist() == [1, 4, 3, 0]


def test_range_counts_matches_brute_force():
    rng = np.random.default_rng(8)
    pts = rng.random((3000, 2))
    rects = metric.query_set(rng, [0.0, 0.0], [1.0, 1.0], "medium")[:300]
    brute = ((pts[None, :, 0] >= rects[:, None, 0]) & (pts[None, :, 0] < rects[:, None, 2])
             & (pts[None, :, 1] >= rects[:, None, 1]) & (pts[None, :, 1] < rects[:, None, 3])).sum(axis=1)
    assert metric.range_counts(pts, rects).tolist() == brute.tolist()


@pytest.mark.parametrize("kind", ["small", "medium", "large"])
def test_query_areas_lie_in_their_class(kind):
    lo, hi = np.array([-1.0, 2.0]), np.array([3.0, 4.0])
    rects = metric.query_set(np.random.default_rng(1), lo, hi, kind)
    a, b, n = metric.QUERY_CLASSES[kind]
    frac = (rects[:, 2] - rects[:, 0]) * (rects[:, 3] - rects[:, 1]) / 8.0
    assert rects.shape == (n, 4)
    assert frac.min() >= a * (1 - 1e-12) and frac.max() < b
    assert np.all(rects[:, :2] >= lo) and np.all(rects[:, 2:] <= hi)


def test_relative_error_hand_case():
    # |f| = 5000: floor 5. Queries: true 100 syn 90 -> 0.1; true 0 syn 2 -> 2/5;
    # true 3 syn 3 -> 0; true 5 syn 10 -> 1
    r = metric.relative_error([100, 0, 3, 5], [90, 2, 3, 10], 5000)
    assert r == pytest.approx((0.1 + 0.4 + 0 + 1) / 4)
    assert metric.relative_error([10], [10], 1) == 0.0
    with pytest.raises(EvaluationInputError):
        metric.relative_error([1], [1], 0)


def test_metric_on_a_sample_of_the_truth_is_small_and_on_nothing_is_one():
    rng = np.random.default_rng(21)
    truth = rng.random((20000, 2)) * [0.5, 1.0]  # uniform on the left half
    rects = metric.query_set(rng, [0.0, 0.0], [1.0, 1.0], "large")
    t = metric.range_counts(truth, rects)
    empty = metric.relative_error(t, np.zeros_like(t), truth.shape[0])
    # every query with q(f) >= 0.001 |f| = 20 scores exactly 1; smaller ones less
    assert 0.0 < empty <= 1.0 and empty == pytest.approx(np.mean(np.minimum(t / 20.0, 1.0)))
    # the exact leaf masses of a depth-6 dyadic partition, sampled: error well below 1
    children = np.full((2 ** 7 - 1, 2), -1)
    children[:63] = np.arange(1, 127).reshape(63, 2)
    leaves = np.arange(63, 127)
    blo, bhi = tree.node_boxes(children, [0.0, 0.0], [1.0, 1.0])
    mass = np.array([np.count_nonzero(np.all((truth >= blo[v]) & (truth < bhi[v]), axis=1)) for v in leaves],
                    dtype=float)
    pts, _ = tree.sample(blo[leaves], bhi[leaves], mass, rng)
    assert pts.shape[0] == truth.shape[0]
    assert metric.relative_error(t, metric.range_counts(pts, rects), truth.shape[0]) < 0.15


def _stream_gen(level, path, mass, lo=(0, 0), hi=(255, 255)):
    """A stream generator of one step (step 1) with the given leaf cells."""
    st = generator.Stream("d", [1], [0, len(level)], level, path, mass, 0, [0])
    return generator.Generator(["x0", "x1"], list(lo), list(hi), [st], {})


def test_stream_sampler_draws_uniform_integers_of_each_cell():
    # the root split on x0: cell 0 holds 0..127, cell 1 holds 128..255 (the top face hi = 255 in it)
    gen = _stream_gen([1, 1], [0, 1], [3.2, 20000.0])
    assert gen.population(1) == 4 + 20000
    rows = np.concatenate(list(gen.blocks(None, np.random.default_rng(3), 1)))
    left = rows[rows[:, 0] < 128]
    assert len(left) == 4 and np.all(rows == np.floor(rows))
    right = rows[rows[:, 0] >= 128]
    assert right[:, 0].min() == 128 and right[:, 0].max() == 255 and right[:, 1].min() == 0 \
        and right[:, 1].max() == 255
    # 128 x 256 equally likely values: each channel's mean within 5 sd of the centre
    sd = np.sqrt((128 ** 2 - 1) / 12 / 20000), np.sqrt((256 ** 2 - 1) / 12 / 20000)
    assert abs(right[:, 0].mean() - 191.5) < 5 * sd[0] and abs(right[:, 1].mean() - 127.5) < 5 * sd[1]
    # a cell narrower than one integer holds its rounded centre (as PrivHP's integer channels)
    # cell 200 of 256 on both channels of span 3: 2.34..2.36, no integer; its centre rounds to 2
    path = 0
    for bit in range(7, -1, -1):
        b = (200 >> bit) & 1
        path = path << 2 | b << 1 | b
    deep = _stream_gen([16], [path], [2.0], hi=(3, 3))
    rows = np.concatenate(list(deep.blocks(None, np.random.default_rng(0), 1)))
    assert rows.tolist() == [[2.0, 2.0], [2.0, 2.0]]


def test_apportion_is_exact_at_the_population_and_proportional_otherwise():
    w = np.array([3, 1, 0, 5], dtype=np.int64)
    assert generator._apportion(9, w).tolist() == [3, 1, 0, 5]
    assert generator._apportion(10, w[:2]).tolist() == [8, 2]  # 7.5 and 2.5: the tie to the earlier leaf
    assert generator._apportion(0, w).tolist() == [0, 0, 0, 0]
    big = generator._apportion(10 ** 9 - 1, np.array([1, 2], dtype=np.int64))
    assert big.sum() == 10 ** 9 - 1 and big.tolist() == [333333333, 666666666]


def test_stream_sampler_refusals():
    gen = _stream_gen([1, 1], [0, 1], [-2.0, 0.0])
    assert gen.population(1) == 0 and list(gen.blocks(None, np.random.default_rng(0), 1)) == []
    with pytest.raises(InputError, match="no positive mass"):
        gen.blocks(5, np.random.default_rng(0), 1)
    with pytest.raises(InputError, match="no step 2"):
        gen.blocks(None, np.random.default_rng(0), 2)
    with pytest.raises(InputError, match="one step at a time"):
        gen.sample(3, np.random.default_rng(0))


@pytest.mark.parametrize("change", [
    lambda m: m["streams"][0].update(offsets=np.array([0, 5], "<u8").tobytes()),   # past the cells
    lambda m: m["streams"][0].update(steps=np.array([0], "<u8").tobytes()),        # step 0
    lambda m: m["streams"][0].update(level=np.array([1, 40], "<u1").tobytes()),    # deeper than 28
    lambda m: m["streams"][0].update(path=np.array([0, 2], "<u4").tobytes()),      # path longer than its level
    lambda m: m["streams"][0].update(mass=np.array([1.0, np.nan]).tobytes()),
    lambda m: m.update(hi=[0, 255]),
    lambda m: m["streams"][0].pop("mass"),
])
def test_a_damaged_generator_file_is_refused(change):
    m = msgpack.unpackb(_stream_gen([1, 1], [0, 1], [3.0, 4.0]).to_bytes())
    change(m)
    with pytest.raises(InputError, match="phdstream generator"):
        generator.Generator.from_bytes(msgpack.packb(m), "g")
