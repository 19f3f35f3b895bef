"""The adaptive marginals planner (edgesynth.mechanisms.marginals.adapt;
docs/mechanisms/marginals.md, Planner): a function of the fitted model only,
valid public partitions, the most dependent triples first, the RAM fit."""
import math
from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest

from edgesynth.errors import InputError
from edgesynth.mechanisms.marginals.adapt import choose_marginals, partition, plan_from_model
from edgesynth.mechanisms.marginals.model import Model
from edgesynth.mechanisms.marginals.schema import Schema

SIZES = (4, 3, 5, 3, 2)
EPS = Fraction(1)
SCHEMA = Schema.from_json({"columns": [{"name": "c%d" % i, "values": list(range(k - 1))}
                                       for i, k in enumerate(SIZES)]})


def model(seed, n=5000.0, strength=3.0):
    """A model whose columns 0, 1, 2 depend on each other (a random 3-way
    interaction of weight ``strength``) and 3, 4 are independent of all."""
    rng = np.random.default_rng(seed)
    logits = strength * rng.normal(size=SIZES[:3])[..., None, None] + rng.normal(size=SIZES[3])[:, None] \
        + rng.normal(size=SIZES[4])
    logits = logits - np.log(np.exp(logits).sum())
    return Model(SIZES, logits, n, totals=(n / 2, n / 2))


def mech(cfg):
    return cfg["mechanisms"][0]


def test_same_model_same_config_and_only_the_model_counts():
    a = model(1)
    cfg = plan_from_model(a, SCHEMA, EPS)
    # a fresh Model with the same numbers (no fit history, no data) plans the same config
    b = Model(SIZES, a.log_p.copy(), a.total, totals=a.totals)
    assert plan_from_model(b, SCHEMA, EPS) == cfg
    # the partitions follow the model's estimate: another model gives other groups
    assert mech(plan_from_model(model(2), SCHEMA, EPS))["groups"] != mech(cfg)["groups"]


def test_partitions_put_every_cell_in_one_group_and_merge_only_small_cells():
    m = model(3)
    spec = mech(plan_from_model(m, SCHEMA, EPS))
    for c, lab in zip(spec["cols"], spec["groups"]):
        cells = math.prod(SIZES[i] for i in c)
        if lab is None:
            continue
        assert len(lab) == cells and sorted(set(lab)) == list(range(max(lab) + 1))
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.full(60, 0.3))
    lab = np.array(partition(p, 1000, 10.0))
    e = 1000 * p
    for g in range(lab.max() + 1):
        inside = e[lab == g]
        # a cell alone is at least the noise sd; a merged group is all below it and adds up to it
        assert (len(inside) == 1 and inside[0] >= 10) or (inside.max() < 10 and inside.sum() >= 10)
    assert partition(np.full(8, 1 / 8), 1000, 10.0) is None  # every cell above the noise: no map


def test_the_dependent_triple_comes_first_and_every_pair_is_covered():
    cols, score = choose_marginals(model(4))
    assert cols[0] == (0, 1, 2)
    assert score[(0, 1, 2)] == max(score.values()) and min(score.values()) >= 0
    covered = {p for c in cols for p in combinations(c, min(2, len(c)))}
    assert covered == set(combinations(range(len(SIZES)), 2))


def test_the_config_fits_the_ram_given():
    m = model(5)
    full = plan_from_model(m, SCHEMA, EPS)
    need = full["plan"]["expected_peak_bytes"]
    small = plan_from_model(m, SCHEMA, EPS, ram=need - 1)
    assert small["plan"]["expected_peak_bytes"] <= need - 1
    three = [c for c in mech(small)["cols"] if len(c) == 3]
    assert len(three) < len([c for c in mech(full)["cols"] if len(c) == 3])
    with pytest.raises(InputError):
        plan_from_model(m, SCHEMA, EPS, ram=64)
    with pytest.raises(InputError, match="columns"):
        plan_from_model(Model((2, 2), np.log(np.full((2, 2), 0.25)), 10.0), SCHEMA, EPS)


def test_two_columns_measure_their_joint():
    schema = Schema.from_json({"columns": [{"name": "a", "values": [0, 1, 2]}, {"name": "b", "values": [0]}]})
    p = np.array([[0.5, 0.2], [0.1, 0.1], [0.05, 0.05], [0.0, 0.0]]) + 1e-9
    m = Model((4, 2), np.log(p / p.sum()), 2000.0)
    spec = mech(plan_from_model(m, schema, EPS))
    assert spec["cols"] == [[0, 1]]
    # the two near-empty "other" cells (expected ~0 records, below the noise) share one total
    lab = spec["groups"][0]
    assert lab is not None and lab[6] == lab[7] and len(set(lab)) < 8
