"""Second-pass review of issue 18 (marginals): the drift mixture only over
plans that measure every column and at most MAX_MIXED of them, a hostile
meta.plans in a generator file, bounded per-plan window counts in the merge,
and the planner's n_next per device."""
from fractions import Fraction

import msgpack
import numpy as np
import pandas as pd
import pytest

import edgesynth as es
import edgesynth.mechanisms.marginals.generator as generator
import edgesynth.merge as merge
from edgesynth.errors import InputError
from edgesynth.frames import parse_frame
from edgesynth.mechanisms.marginals.adapt import plan_from_model
from edgesynth.mechanisms.marginals.generator import MarginalsGenerator

SCHEMA = {"columns": [{"name": "site", "values": ["north", "south", "east"]},
                      {"name": "status", "values": ["ok", "warn", "fail"]},
                      {"name": "hour", "values": [0, 1, 2, 3]}]}
N = 20000


def records(n, seed, shift=0.0):
    rng = np.random.default_rng(seed)
    p = (1 - shift) * np.array([.5, .3, .15, .05]) + shift * np.array([.05, .15, .3, .5])
    site = rng.choice(["north", "south", "east", "west"], n, p=p)
    ok = rng.choice(["ok", "warn", "fail"], n, p=[.8, .15, .05])
    status = np.where(site == "north", ok, rng.choice(["ok", "warn", "fail"], n, p=[.4, .4, .2]))
    return pd.DataFrame({"site": site, "status": status, "hour": rng.integers(0, 4, n)})


@pytest.fixture(scope="module")
def frames():
    full = es.plan(mechanism="marginals", schema=SCHEMA, epsilon=1)
    part = es.plan(mechanism="marginals", schema=SCHEMA, epsilon=1, marginals="site;hour")
    f0 = es.simulate(full, records(N, 1), seed=1, runtime="numpy", epoch=0)
    moved_part = es.simulate(part, records(N, 2, shift=0.6), seed=2, runtime="numpy", epoch=1)
    full2 = es.plan(mechanism="marginals", schema=SCHEMA, epsilon=2)
    moved_full = es.simulate(full2, records(N, 3, shift=0.6), seed=3, runtime="numpy", epoch=1)
    return f0, moved_part, moved_full


def test_a_plan_that_misses_a_column_keeps_the_joint_fit(frames):
    f0, moved_part, _ = frames
    gen = es.assemble([f0, moved_part]).model
    assert gen.drifting  # the site mix moved
    # a mixture would give the partial plan's share a uniform status column
    assert gen.meta["fit"].startswith("one distribution") and "does not measure every column" in gen.meta["fit"]
    status = gen.model.marginal((1,))
    assert status[0] > 0.45  # "ok" is about 0.6 in both windows; a uniform half would pull it toward 0.25


def test_a_mixture_fits_at_most_max_mixed_plans(frames, monkeypatch):
    f0, _, moved_full = frames
    assert es.assemble([f0, moved_full]).model.meta["fit"].startswith("mixture")
    monkeypatch.setattr(generator, "MAX_MIXED", 1)
    gen = es.assemble([f0, moved_full]).model
    assert gen.drifting and "more than the 1 a mixture fits" in gen.meta["fit"]


@pytest.mark.parametrize("plans", [
    "x", [1], [{}], [{"drift": [1.0]}],
    {"config_id": "a", "frames": 1, "estimated_records": 1.0, "first_epoch": 0, "windows": 1, "drift": [1.0, 0]},
    {"config_id": "a", "frames": 1, "estimated_records": 1.0, "first_epoch": 0, "windows": 0, "drift": [1.0, 2]},
    {"config_id": "a", "frames": 1, "estimated_records": 1.0, "first_epoch": 0, "windows": 1,
     "drift": [float("nan"), 2]},
    {"config_id": "a", "frames": 1, "estimated_records": float("inf"), "first_epoch": 0, "windows": 1,
     "drift": [1.0, 2]},
    {"config_id": "a", "frames": True, "estimated_records": 1.0, "first_epoch": 0, "windows": 1, "drift": [1.0, 2]},
])
def test_a_hostile_meta_plans_is_one_input_error_at_load(frames, plans):
    gen = es.assemble(frames[0]).model
    good = msgpack.unpackb(gen.to_bytes())
    assert MarginalsGenerator.from_bytes(msgpack.packb(good)).drift == gen.drift
    good["meta"]["plans"] = [plans] if isinstance(plans, dict) else plans
    with pytest.raises(InputError, match="^f: meta.plans must list"):
        MarginalsGenerator.from_bytes(msgpack.packb(good), "f")


def test_windows_count_one_devices_frames_not_distinct_epochs(frames):
    """Devices number their own epochs: two devices releasing two windows
    each under one plan, at epochs 0, 1 and 5, 6, are 2 windows (not 4),
    from epoch 0; partial merges of them combine to the same."""
    cfg = es.plan(mechanism="marginals", schema=SCHEMA, epsilon=1)
    fs = [es.simulate(cfg, records(500, 10 + e), seed=10 + e, runtime="numpy", epoch=e, device_id=d)
          for d, e in (("a", 0), ("a", 1), ("b", 5), ("b", 6))]
    plan = es.assemble(fs).model.meta["plans"]
    assert [(p["first_epoch"], p["windows"], p["frames"]) for p in plan] == [(0, 2, 4)]
    left, right, whole = merge.Merges(unique=False), merge.Merges(unique=False), merge.Merges(unique=False)
    for f in fs[:3]:
        left.add(parse_frame(f)[0])
    right.add(parse_frame(fs[3])[0])
    whole.absorb(right)
    whole.absorb(left)
    assert whole.by_kind["marginals"].plan_windows() == [(0, 2)]
    assert not hasattr(whole.by_kind["marginals"].plans[plan[0]["config_id"]], "epochs")  # no set per frame


def _totals(cfg, sizes):
    """The totals the config's marginals release: a group each, or a cell
    each for an ungrouped (null) marginal."""
    m = cfg["mechanisms"][0]
    return sum(max(g) + 1 if g is not None else int(np.prod([sizes[i] for i in c]))
               for c, g in zip(m["cols"], m["groups"]))


def test_the_planner_scales_the_noise_by_the_frames_of_a_window():
    """Two devices per window add two noise draws to each total: the next
    plan partitions as for sqrt(2) times one frame's sd, i.e. merges more
    cells than one device with the same records per window."""
    cfg = es.plan(mechanism="marginals", schema=SCHEMA, epsilon=0.3)
    one = es.assemble(es.simulate(cfg, records(4000, 20), seed=20, runtime="numpy", epoch=0, device_id="a"))
    two = es.assemble([es.simulate(cfg, records(2000, 21 + i), seed=21 + i, runtime="numpy", epoch=0, device_id=d)
                       for i, d in enumerate("ab")])
    assert one.model.next_window_frames() == 1.0 and two.model.next_window_frames() == 2.0
    g = one.model
    alone = plan_from_model(g.model, g.schema, Fraction(3, 10), n_next=4000.0)
    assert alone == plan_from_model(g.model, g.schema, Fraction(3, 10), n_next=4000.0, frames_next=1.0)
    pooled = plan_from_model(g.model, g.schema, Fraction(3, 10), n_next=4000.0, frames_next=9.0)
    assert _totals(alone, g.schema.sizes) > _totals(pooled, g.schema.sizes)  # 3x the sd: fewer, larger groups
    # the planner reads the frames per window from the generator
    via = es.plan(mechanism="marginals", epsilon=0.3, from_generator=two)
    direct = plan_from_model(two.model.model, two.model.schema, Fraction(3, 10),
                             n_next=two.model.next_window_records(), frames_next=2.0)
    assert via["mechanisms"][0]["groups"] == direct["mechanisms"][0]["groups"]
