"""Marginals windows of different plans assembled together (issue 18): one
summed state per plan, fitted as windows of one stream, the same bytes in
any frame order, a bounded number of plans, and the drift check (a
stationary stream passes, a drifting one warns)."""
from fractions import Fraction
from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import edgesynth as es
import edgesynth.merge as merge
from edgesynth.cli import main
from edgesynth.errors import MergeError
from edgesynth.frames import parse_frame
from edgesynth.mechanisms import build
from edgesynth.mechanisms.marginals.adapt import plan_from_model
from edgesynth.mechanisms.marginals.drift import limit
from edgesynth.mechanisms.marginals.generator import MarginalsGenerator
from edgesynth.mechanisms.marginals.model import fit
from edgesynth.mechanisms.marginals.schema import Schema
from edgesynth.mechanisms.marginals.table import encode
from edgesynth.merge import merge_releases

SCHEMA = {"columns": [{"name": "site", "values": ["north", "south", "east"]},
                      {"name": "status", "values": ["ok", "warn", "fail"]},
                      {"name": "hour", "values": [0, 1, 2, 3]},
                      {"name": "temp", "bounds": [-10.0, 30.0], "bins": 8}]}
N = 20000


def records(n, seed, shift=0.0):
    """Dependent columns; ``shift`` moves the sites' mix (0: the base mix)."""
    rng = np.random.default_rng(seed)
    p = (1 - shift) * np.array([.5, .3, .15, .05]) + shift * np.array([.05, .15, .3, .5])
    site = rng.choice(["north", "south", "east", "west"], n, p=p)
    ok = rng.choice(["ok", "warn", "fail"], n, p=[.8, .15, .05])
    status = np.where(site == "north", ok, rng.choice(["ok", "warn", "fail"], n, p=[.4, .4, .2]))
    temp = np.where(status == "fail", rng.normal(25, 3, n), rng.normal(10, 5, n)).round(2)
    return pd.DataFrame({"site": site, "status": status, "hour": rng.integers(0, 4, n), "temp": temp})


@pytest.fixture(scope="module")
def base():
    """Window 0 under the base plan and its generator."""
    cfg = es.plan(mechanism="marginals", schema=SCHEMA, epsilon=1)
    frame = es.simulate(cfg, records(N, 1), seed=1, runtime="numpy", epoch=0)
    return cfg, frame, es.assemble(frame)


def next_window(gen, data, seed, epoch, device="device"):
    """A window under the plan made from ``gen`` (the adaptive path)."""
    cfg = es.plan(mechanism="marginals", epsilon=1, from_generator=gen)
    return cfg, es.simulate(cfg, data, seed=seed, runtime="numpy", epoch=epoch, device_id=device)


def test_two_plans_assemble_in_any_order_one_sum_per_plan(base):
    cfg0, f0, g0 = base
    cfg1, f1 = next_window(g0, records(N, 2), 2, 1)
    assert cfg1["mechanisms"][0]["cols"] != cfg0["mechanisms"][0]["cols"]  # another plan
    # a second device under the base plan: summed with window 0 into one plan
    f0b = es.simulate(cfg0, records(N, 3), seed=3, runtime="numpy", epoch=0, device_id="other")
    g = es.assemble([f0, f1, f0b])
    assert g.to_bytes() == es.assemble([f1, f0b, f0]).to_bytes() == es.assemble([f0b, f0, f1, f1]).to_bytes()
    s = g.summary()
    ids = sorted(parse_frame(f)[0].mechs[0].config_id() for f in (f0, f1))
    assert s["config_id"] == "+".join(ids) and [p["config_id"] for p in s["plans"]] == ids
    frames = {p["config_id"]: p["frames"] for p in s["plans"]}
    assert frames[parse_frame(f0)[0].mechs[0].config_id()] == 2 and s["frames"] == 3
    # each plan estimates its own record count (2N under the base plan, N under the other)
    n = {p["config_id"]: p["estimated_records"] for p in s["plans"]}
    assert abs(n[parse_frame(f0)[0].mechs[0].config_id()] - 2 * N) < 200
    assert abs(n[parse_frame(f1)[0].mechs[0].config_id()] - N) < 200
    assert abs(s["estimated_records"] - 3 * N) < 300
    # partial merges of disjoint frames (the Dask tree reduction) combine into the same generator
    left, right = merge.Merges(unique=False), merge.Merges(unique=False)
    for f in (f0, f1):
        left.add(parse_frame(f)[0])
    right.add(parse_frame(f0b)[0])
    whole = merge.Merges(unique=False)
    whole.absorb(left)
    whole.absorb(right)
    assert es.Generator(build(whole)).to_bytes() == g.to_bytes()
    # one plan alone is fitted as before: the plans entry holds its single window
    assert g0.summary()["config_id"] == parse_frame(f0)[0].mechs[0].config_id() and len(g0.summary()["plans"]) == 1


def test_plans_are_capped_and_other_kinds_still_refuse_mixed_configs(base, monkeypatch):
    cfg0, f0, g0 = base
    _, f1 = next_window(g0, records(2000, 4), 4, 1)
    small = es.plan(mechanism="marginals", schema=SCHEMA, epsilon=1, marginals="site;hour")
    f2 = es.simulate(small, records(2000, 5), seed=5, runtime="numpy", epoch=2)
    monkeypatch.setattr(merge, "MAX_PLANS", 2)
    with pytest.raises(MergeError, match="more than 2 plans"):
        es.assemble([f0, f1, f2])
    assert len(es.assemble([f0, f1]).summary()["plans"]) == 2
    monkeypatch.undo()
    a = es.plan([(0, 10)], epsilon=1, mechanism="cdf", bins=16)
    b = es.plan([(0, 20)], epsilon=1, mechanism="cdf", bins=16)
    x = np.random.default_rng(0).uniform(0, 10, (100, 1))
    with pytest.raises(MergeError, match="different public configurations"):
        es.assemble([es.simulate(a, x, seed=1), es.simulate(b, x, seed=2, epoch=1)])


def test_a_stationary_stream_passes_the_drift_check_and_a_drifting_one_warns(base):
    _, f0, g0 = base
    _, same = next_window(g0, records(N, 6), 6, 1)
    _, moved = next_window(g0, records(N, 6, shift=0.3), 6, 1)
    calm, drifted = es.assemble([f0, same]).model, es.assemble([f0, moved]).model
    # stationary: each plan's statistic is within chi-square's mean + 6 sd of its totals
    assert not calm.drifting and all(st <= lim for st, _, lim in calm.drift)
    assert [d for _, d, _ in calm.drift] == [len(np.concatenate(s.totals)) for s in
                                             sorted((parse_frame(f)[0].mechs[0] for f in (f0, same)),
                                                    key=lambda s: s.config_id())]
    # the site mix moved by 0.3 between the windows: far beyond both plans' noise
    assert drifted.drifting and all(st > 3 * lim for st, _, lim in drifted.drift)
    assert all(lim == limit(d) for _, d, lim in drifted.drift)
    assert calm.meta["fit"].startswith("one distribution") and drifted.meta["fit"].startswith("mixture")


def test_a_drifting_stream_is_modelled_as_the_mixture_of_its_plans(base):
    """Under drift the model is sum_k n_k p_k / n: its marginals are the
    pooled records', where one distribution fitted to both plans is not."""
    _, f0, g0 = base
    data = records(N, 8, shift=0.6)
    _, moved = next_window(g0, data, 8, 1)
    gen = es.assemble([f0, moved]).model
    assert gen.drifting and abs(gen.model.total - 2 * N) < 200
    assert sorted(gen.model.totals) == sorted(p["estimated_records"] for p in gen.meta["plans"])
    pooled = pd.concat([records(N, 1), data])
    want = pooled["site"].value_counts(normalize=True).reindex(["north", "south", "east", "west"]).to_numpy()
    got = gen.model.marginal((0,))
    assert np.abs(got - want).max() < 0.01  # sampling and noise: a few records in 10,000 per cell
    # one distribution fitted to both plans is further from the pooled records' pairs than the mixture
    _, states = merge_releases([parse_frame(f)[0] for f in (f0, moved)], "marginals")
    ms = [m for s in states for m in s.measurements()]
    joint = fit(gen.model.sizes, ms, windows=[k for k, s in enumerate(states) for _ in s.measurements()])
    cells = encode(Schema.from_json(SCHEMA), pooled)
    assert pair_tv(gen.model, cells) < 0.3 * pair_tv(joint, cells)


def pair_tv(model, cells):
    """Average total variation between the model's and the records' 2-way tables."""
    out = []
    for c in combinations(range(cells.shape[1]), 2):
        shape = [model.sizes[i] for i in c]
        real = np.bincount(np.ravel_multi_index(tuple(cells[:, i] for i in c), shape), minlength=np.prod(shape))
        out.append(0.5 * np.abs(model.marginal(c).ravel() - real / len(cells)).sum())
    return float(np.mean(out))


def test_assemble_prints_one_warning_line_for_a_drifting_stream(base, tmp_path):
    _, f0, g0 = base
    _, moved = next_window(g0, records(N, 7, shift=0.3), 7, 1)
    _, same = next_window(g0, records(N, 7), 7, 1)
    (tmp_path / "a.frame").write_bytes(f0)
    (tmp_path / "b.frame").write_bytes(moved)
    (tmp_path / "c.frame").write_bytes(same)
    run = CliRunner().invoke
    out = run(main, ["assemble", str(tmp_path / "a.frame"), str(tmp_path / "b.frame"), "-o", str(tmp_path / "g")])
    assert out.exit_code == 0, out.output
    lines = [ln for ln in out.output.splitlines() if ln.startswith("warning:")]
    assert len(lines) == 1 and "the stream drifts" in lines[0] and "of 2 plans" in out.output
    out = run(main, ["assemble", str(tmp_path / "a.frame"), str(tmp_path / "c.frame"), "-o", str(tmp_path / "g")])
    assert out.exit_code == 0 and "warning" not in out.output and "of 2 plans" in out.output


def test_the_next_plan_does_not_depend_on_the_order_of_the_plans_records(base):
    """The path users reach (es.plan(from_generator=...)) reads the latest
    plan from meta.plans by first epoch, not by list order: the plans in
    either order give the same next window's records and the same config,
    and the latest plan's records per window are what they give."""
    _, _, g0 = base
    g = g0.model
    early = {"config_id": "b", "first_epoch": 0, "windows": 1, "frames": 1, "estimated_records": 3000.0,
             "drift": [1.0, 10]}
    late = {"config_id": "a", "first_epoch": 4, "windows": 2, "frames": 2, "estimated_records": 1000.0,
            "drift": [1.0, 10]}
    gens = [MarginalsGenerator(g.schema, g.model, dict(g.meta, plans=p)) for p in ([early, late], [late, early])]
    assert [x.next_window_records() for x in gens] == [500.0, 500.0]
    cfgs = [es.plan(mechanism="marginals", epsilon=1, from_generator=x) for x in gens]
    assert cfgs[0] == cfgs[1]
    assert cfgs[0] == plan_from_model(g.model, g.schema, Fraction(1), n_next=500.0)
