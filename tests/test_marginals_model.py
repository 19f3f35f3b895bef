"""The marginals host model (docs/mechanisms/marginals.md, Host algorithms):
the fit to noisy, partitioned measurements, sampling, and the k-way TV metric."""
import itertools

import numpy as np
import pytest

from edgesynth.errors import InputError
from edgesynth.evaluation.table_metrics import tv
from edgesynth.mechanisms.marginals.measure import Measurement
from edgesynth.mechanisms.marginals.model import MAX_CELLS, clique_sums, clique_total, fit

SIZES = (3, 4, 5, 2)
CHAIN = [(0, 1), (1, 2), (2, 3)]


def chain(seed):
    """A random Markov chain 0 - 1 - 2 - 3 over SIZES: a distribution that the
    max-entropy model on its three 2-way marginals reproduces exactly."""
    rng = np.random.default_rng(seed)
    p0 = rng.dirichlet(np.ones(SIZES[0]))
    t = [rng.dirichlet(np.ones(SIZES[i + 1]), SIZES[i]) for i in range(3)]
    return np.einsum("a,ab,bc,cd->abcd", p0, *t)


def marg(P, cols):
    return P.sum(axis=tuple(i for i in range(P.ndim) if i not in cols))


def tv_tables(p, q):
    return 0.5 * float(np.abs(np.ravel(p) - np.ravel(q)).sum())


def test_exact_measurements_recover_a_chain():
    P, n = chain(1), 1e5
    ms = [Measurement.ungrouped(c, n * marg(P, c).ravel(), 1e-2) for c in CHAIN]
    m = fit(SIZES, ms, iters=2000)
    assert m.total == pytest.approx(n)
    assert tv_tables(m.joint(), P) < 1e-4
    # a marginal the measurements never saw, implied by the chain
    assert tv_tables(m.marginal((0, 3)), marg(P, (0, 3))) < 1e-4


def test_error_shrinks_with_the_noise_variance():
    P, n = chain(2), 1e5
    cols = [c for k in (1, 2) for c in itertools.combinations(range(4), k)]
    errors = []
    for var in (1e4, 1e2, 1.0):
        err = []
        for seed in range(3):
            rng = np.random.default_rng(seed)
            ms = [Measurement.ungrouped(c, n * marg(P, c).ravel() + rng.normal(0, var ** 0.5, marg(P, c).size), var)
                  for c in cols]
            m = fit(SIZES, ms, iters=1500)
            err.append(np.mean([tv_tables(m.marginal(c), marg(P, c)) for c in itertools.combinations(range(4), 2)]))
        errors.append(np.mean(err))
    # error scales like the noise's standard deviation: 10x per step here
    assert errors[0] > 3 * errors[1] > 9 * errors[2]
    assert errors[2] < 1e-3


def test_partitioned_measurement_shape_comes_from_other_measurements():
    # independent columns: their max-entropy model under the 1-ways and any
    # grouping of the 2-way cells is the truth itself, which a uniform spread
    # of the group totals over their cells is not
    rng = np.random.default_rng(3)
    pa, pb, n = rng.dirichlet(np.ones(3)), rng.dirichlet(np.ones(4)), 1e4
    P = np.outer(pa, pb)
    groups = np.array([0, 0, 1, 1, 2, 0, 1, 3, 3, 2, 2, 1])
    sums = np.bincount(groups, weights=n * P.ravel())
    ms = [Measurement.ungrouped((0,), n * pa, 1e-2), Measurement.ungrouped((1,), n * pb, 1e-2),
          Measurement((0, 1), groups, sums, 1e-2)]
    m = fit((3, 4), ms, iters=3000)
    assert np.allclose(ms[2].group_sums(m.total * m.joint()), sums, atol=0.05)
    uniform = (sums / np.bincount(groups))[groups] / n
    assert tv_tables(m.joint(), P) < 1e-4
    assert tv_tables(uniform, P) > 0.3  # 0.37


def test_noisy_partitioned_group_totals_are_kept_not_clipped():
    # a negative noisy total is evidence of a small group: the fit uses it as is
    ms = [Measurement((0,), [0, 1, 1], [-5.0, 1000.0], 25.0)]
    m = fit((3,), ms)
    assert m.total == pytest.approx(995.0)  # the one sum of totals
    p = m.joint()
    assert p[0] < 1e-3 and p[1] == pytest.approx(p[2])


def test_sample_rounds_each_cell_and_matches_marginals():
    m = fit(SIZES, [Measurement.ungrouped(c, 1e5 * marg(chain(4), c).ravel(), 1e-2) for c in CHAIN], iters=500)
    n = 20000
    rows = m.sample(n, np.random.default_rng(5))
    assert rows.shape == (n, 4) and rows.dtype == np.int64
    counts = np.bincount(np.ravel_multi_index(rows.T, SIZES), minlength=int(np.prod(SIZES)))
    assert np.all(np.abs(counts - n * m.joint().ravel()) < 1)  # systematic rounding: floor or ceil
    for c in itertools.combinations(range(4), 2):
        p = m.marginal(c).ravel()
        emp = np.bincount(np.ravel_multi_index(rows[:, c].T, [SIZES[i] for i in c]), minlength=p.size) / n
        # four binomial standard deviations per cell: a bound an i.i.d. sample meets too
        assert tv_tables(emp, p) <= 0.5 * float(np.sum(4 * np.sqrt(p * (1 - p) / n)))
    # rows are shuffled: the first half and the second half look alike
    assert tv(rows[: n // 2], rows[n // 2:], SIZES, 1)[1] < 0.03


def test_peeled_clique_sums_and_totals_equal_the_direct_ones():
    rng = np.random.default_rng(6)
    sizes = (2, 3, 4, 2, 3)
    p = rng.random(sizes)
    axes = tuple(range(5))
    cliques = [(0, 1), (0, 3), (1, 2, 4), (2, 3), (3,), (0, 2, 4), (1, 4)]
    got = clique_sums(p, axes, cliques, sizes)
    for c in cliques:
        assert np.allclose(got[c], p.sum(axis=tuple(i for i in axes if i not in c)))
    assert np.array_equal(clique_sums(p, axes, [axes], sizes)[axes], p)
    theta = {c: rng.normal(size=[sizes[i] for i in c]) for c in cliques}
    direct = sum(t.reshape([sizes[i] if i in c else 1 for i in axes]) for c, t in theta.items())
    assert np.allclose(clique_total(theta, axes, sizes), direct)


def test_tv_against_hand_computed_values():
    real = [[0, 0], [0, 1], [1, 1], [1, 1]]
    synth = [[0, 0], [0, 0], [1, 1], [1, 0]]
    # column 0: equal halves (0); column 1: (1/4, 3/4) vs (3/4, 1/4), TV 1/2
    assert tv(real, synth, (2, 2), 1) == (0.25, 0.5)
    # cells 00, 01, 10, 11: (1/4, 1/4, 0, 1/2) vs (1/2, 0, 1/4, 1/4)
    assert tv(real, synth, (2, 2), 2) == (0.5, 0.5)
    three = [[0, 0, 0], [1, 1, 1]]
    assert tv(three, three, (2, 2, 2), 3) == (0.0, 0.0)
    assert tv(three, [[0, 0, 0], [0, 0, 0]], (2, 2, 2), 2) == (0.5, 0.5)


def test_errors_are_clear():
    with pytest.raises(InputError, match="junction-tree"):
        fit((1 << 12, (MAX_CELLS >> 12) + 1), [Measurement.ungrouped((0,), np.ones(1 << 12), 1.0)])
    with pytest.raises(InputError, match="cells"):
        fit((3, 4), [Measurement.ungrouped((0, 1), np.ones(6), 1.0)])
    with pytest.raises(InputError, match="group"):
        Measurement((0,), [0, 2, 2], [1.0, 2.0, 3.0], 1.0)
    with pytest.raises(InputError, match="sorted"):
        Measurement((1, 0), [0, 1], [1.0, 2.0], 1.0)
    with pytest.raises(InputError, match="domain"):
        tv([[0, 2]], [[0, 0]], (2, 2), 1)


def test_to_table_writes_the_schema_values_back():
    from edgesynth.mechanisms.marginals.model import to_table
    from edgesynth.mechanisms.marginals.schema import Schema

    schema = Schema.from_json({"columns": [{"name": "site", "values": ["A", "B"]},
                                           {"name": "temp", "bounds": [-40, 60], "bins": 20}]})
    cells = np.array([[0, 0], [1, 19], [2, 20], [1, 7]])
    t = to_table(schema, cells, np.random.default_rng(0))
    assert list(t.columns) == ["site", "temp"]
    assert t.site.tolist()[:2] == ["A", "B"] and t.site.isna().tolist() == [False, False, True, False]
    temp = t.temp.to_numpy()
    assert -40 <= temp[0] < -35 and 55 <= temp[1] <= 60 and np.isnan(temp[2]) and -5 <= temp[3] < 0
    # encoding the written values gives the cells back ("other" included)
    again = np.stack([schema.encode_column(i, t[n].tolist()) for i, n in enumerate(schema.names)], axis=1)
    assert np.array_equal(again, cells)


def windowed(P, ns, var, rng):
    """Every window measures the chain's three pairs of its own n_k records,
    Gaussian noise of variance ``var`` per cell: (measurements, window ids)."""
    ms, ws = [], []
    for k, n in enumerate(ns):
        for c in CHAIN:
            y = n * marg(P, c).ravel()
            ms.append(Measurement.ungrouped(c, y + rng.normal(0, var ** 0.5, y.size), var))
            ws.append(k)
    return ms, ws


def test_windows_recover_each_total_and_the_distribution():
    P, ns, var = chain(3), (2000, 5000, 3000), 25.0
    ms, ws = windowed(P, ns, var, np.random.default_rng(4))
    m = fit(SIZES, ms, iters=2000, windows=ws)
    # n_k's estimate: inverse-variance mean of 3 sums of G_c cells, variance 1 / sum(1 / (G_c var))
    sd_k = (1 / sum(1 / (np.prod([SIZES[i] for i in c]) * var) for c in CHAIN)) ** 0.5
    assert len(m.totals) == 3
    for got, n in zip(m.totals, ns):
        assert abs(got - n) < 4 * sd_k
    assert m.total == pytest.approx(sum(m.totals))
    # each pair is the sum of 3 independent noisy windows: a cell's count has sd sqrt(3 var);
    # the fit's pooled cells must be at least that close (5 sd over all 38 cells)
    for c in CHAIN:
        err = np.abs(m.total * m.marginal(c) - sum(ns) * marg(P, c))
        assert err.max() < 5 * (3 * var) ** 0.5
    # read as one window, the three counts average instead of adding up
    one = fit(SIZES, ms, iters=2000)
    assert one.total < 0.5 * sum(ns) and one.totals == (one.total,)


def test_one_window_id_is_the_single_window_fit():
    ms, ws = windowed(chain(5), (3000,), 4.0, np.random.default_rng(6))
    a, b = fit(SIZES, ms, iters=300), fit(SIZES, ms, iters=300, windows=[7] * len(ms))
    assert a.total == b.total and np.array_equal(a.log_p, b.log_p)
    with pytest.raises(InputError, match="window ids"):
        fit(SIZES, ms, windows=[0])
