"""PHDStream fold-pruning (spec ``fold`` = K; agent/phdstream/pool.py): a
node that stays a leaf of T(t) with children for K steps gives its subtree
back to the pool and keeps its mass in Off. The host mirror must fold the
same nodes at the same step (bit-exact after every window and across a
resync), folding must leave G unchanged at the folded node and above, the
pool must never pass max_nodes, and a folded stream must keep splitting
where the unfolded one is refused."""
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from edgesynth.agent.errors import ConfigError
from edgesynth.agent.phdstream import PHDStream, pool
from edgesynth.errors import InputError, SchemaError
from edgesynth.firmware_shims.drbg import seeded_source
from edgesynth.mechanisms.phdstream import mirror, tree, wire

sys.path.insert(0, str(Path(__file__).resolve().parent))
from phd_reference import DensePHD  # noqa: E402
from test_phdstream_mirror import _device, _device_payload, _feed, _windows, check_resync_after_gaps  # noqa: E402

SPEC = {"lo": [0, 0], "hi": [1000, 600], "depth": 12, "eps": [1, 1], "counter": "simple", "max_nodes": 81,
        "batch_max": 2000, "snap": 5, "fold": 2}


def _live(dev):
    """Ids reachable from the root, in canonical BFS order."""
    order = [0]
    for v in order:
        if dev.kid[v]:
            order += [dev.kid[v], dev.kid[v] + 1]
    return order


def _device_canonical(dev):
    order = _live(dev)
    return (np.array([dev.kid[v] != 0 for v in order]),) + tuple(
        np.array([a[v] for v in order], dtype=np.int64) for a in (dev.cn, dev.cd, dev.off, dev.idle))


def _free_pairs(dev):
    n, c = 0, dev.free
    while c:
        n, c = n + 1, dev.kid[c]
    return n


@pytest.mark.parametrize("counter, extra, fold, max_nodes", [
    ("simple", {}, 1, 81), ("simple", {}, 3, 4001), ("block", {"block": 4}, 2, 81), ("tree", {"horizon": 4}, 2, 121),
])
def test_mirror_folds_as_the_device_after_every_window(counter, extra, fold, max_nodes):
    spec = dict(SPEC, counter=counter, fold=fold, max_nodes=max_nodes, **extra)
    dev, m = _device(spec, b"fold"), mirror.Mirror()
    folded = 0
    for events in _windows(3, 16, 120):
        _feed(dev, events)
        before = dev.used - 2 * _free_pairs(dev)
        dev.step()
        w = wire.decode(_device_payload(dev))
        assert m.apply(w) and m.t == dev.t
        got, want = m.canonical(fold=True), _device_canonical(dev)
        assert all(np.array_equal(a, b) for a, b in zip(got, want))
        live = dev.used - 2 * _free_pairs(dev)
        assert m.nodes == live == len(_live(dev)) <= max_nodes
        folded += live < before
        blo, bhi, mass = m.generator()
        assert np.array_equal(m.cells()[2], mass)
        assert mass.sum() == pytest.approx(int(want[1].sum() + want[3].sum()))
    assert folded and np.any(want[3] != 0)


def test_mirror_resyncs_with_folds_from_a_snapshot():
    """Windows lost in a folding stream: the mirror waits for the next
    snapshot (tree, Cn, Off and streaks) and then folds in step again."""
    check_resync_after_gaps(dict(SPEC, max_nodes=101, snap=4), b"fold-gap", 15, _device_canonical, fold=True)


def test_a_snapshot_with_other_streaks_is_refused():
    spec = dict(SPEC, snap=2)
    dev, m = _device(spec, b"fold-bad"), mirror.Mirror()
    for events in _windows(5, 4, 100):
        _feed(dev, events)
        dev.step()
        w = wire.decode(_device_payload(dev))
        if dev.t == 4:
            w.snap.idle = w.snap.idle.copy()
            w.snap.idle[np.argmax(w.snap.kids)] ^= 1
            before = m.canonical(fold=True)
            with pytest.raises(SchemaError, match="snapshot differs"):
                m.apply(w)
            assert m.t == 3 and all(np.array_equal(a, b) for a, b in zip(m.canonical(fold=True), before))
        else:
            m.apply(w)


def test_folding_keeps_g_at_the_node_and_its_ancestors():
    """Ext_T(Cn + Off) over the union tree, before and after each fold: equal
    (exactly, in integers below saturation) at the folded node and every
    ancestor; the freed descendants' mass is all in Off."""
    spec = dict(SPEC, fold=0, max_nodes=4001)
    dev = _device(spec, b"fold-g")
    for events in _windows(6, 6, 150):
        _feed(dev, events)
        dev.step()
    # folding is a pure function of the state: fold white-box on a copy with Off
    dev2 = PHDStream(dict(spec, fold=3))
    for name in ("cn", "cd", "kid"):
        getattr(dev2, name)[:] = getattr(dev, name)
    dev2.used = dev.used

    def g_of(d):
        order = _live(d)
        index = {v: i for i, v in enumerate(order)}
        children = np.array([[index[d.kid[v]], index[d.kid[v] + 1]] if d.kid[v] else [-1, -1] for v in order])
        own = np.array([d.cn[v] + d.off[v] for v in order], dtype=float)
        return {v: g for v, g in zip(order, tree.ext(children, own))}

    inner = [v for v in _live(dev2) if v and dev2.kid[v]]
    assert len(inner) >= 3
    parent = {dev2.kid[v] + i: v for v in _live(dev2) if dev2.kid[v] for i in (0, 1)}
    for v in inner[-3:] + inner[:1]:
        if v not in _live(dev2):
            continue
        before = g_of(dev2)
        gone = _live_below(dev2, v)
        mass = sum(dev2.cn[u] + dev2.off[u] for u in gone)
        off = dev2.off[v]
        pool.fold(dev2, v)
        after = g_of(dev2)
        assert dev2.kid[v] == 0 and dev2.off[v] == off + mass and dev2.cd[v] == 0
        u = v
        while True:
            assert after[u] == before[u]
            if u == 0:
                break
            u = parent[u]
        heads, c = set(), dev2.free
        while c:
            heads.add(c)
            c = dev2.kid[c]
        # freed: zeroed, and each pair's first node links the free list
        assert all(dev2.cn[u] == dev2.cd[u] == dev2.off[u] == 0 and (dev2.kid[u] == 0 or u in heads) for u in gone)
        assert {u for u in gone if u % 2 == 1} <= heads


def _live_below(d, v):
    out = []
    stack = [d.kid[v], d.kid[v] + 1]
    while stack:
        u = stack.pop()
        out.append(u)
        if d.kid[u]:
            stack += [d.kid[u], d.kid[u] + 1]
    return out


def test_a_folding_pool_keeps_splitting_where_the_plain_one_refuses():
    """Moving hot spots on a pool of 201 nodes: without folding the pool
    fills with the old spots' subtrees and splits are refused from then on;
    with K = 2 freed pairs are reused, the pool stays within max_nodes, no
    split is refused and T(t) stays larger."""
    runs = {}
    for fold in (0, 2):
        dev = _device(dict(SPEC, fold=fold, max_nodes=201), b"fold-cap")
        refused, visited = [], 0
        for t, events in enumerate(_windows(8, 30, 120)):
            _feed(dev, events)
            dev.step()
            assert dev.used <= 201 and len(_live(dev)) <= 201
            refused.append(dev.refused_splits)
            visited += dev.nv if t >= 15 else 0
        runs[fold] = refused, visited
    (plain, plain_nv), (folded, folded_nv) = runs[0], runs[2]
    assert plain[-1] > plain[14] > 0  # refusals go on to the end
    assert folded[-1] < plain[-1] / 4 and folded_nv > 1.2 * plain_nv


def test_fold_spec_range():
    for bad in (-1, 256, "2", True):
        with pytest.raises(ConfigError):
            PHDStream(dict(SPEC, fold=bad))
    assert PHDStream(dict(SPEC, fold=0)).off is None
    a, b = PHDStream(dict(SPEC, fold=0)), PHDStream(dict(SPEC, fold=4))
    assert b.counter_bytes() - a.counter_bytes() == 5 * SPEC["max_nodes"]


@pytest.mark.parametrize("counter, extra", [("simple", {}), ("block", {"block": 3}), ("tree", {"horizon": 4})])
def test_folding_device_equals_the_dense_reference(counter, extra):
    """The dense Algorithm 1/3 with the fold rule (tests/phd_reference.py,
    exact fractions over the full tree) under the device's DRBG draws: the
    same split bits and increments every step, and the host mirror's G from
    the frames equals the dense G at every union node."""
    spec = dict({"lo": [0, 0], "hi": [64, 64], "depth": 6, "eps": [4, 1], "counter": counter, "max_nodes": 31,
                 "batch_max": 1000, "snap": 3, "fold": 1}, **extra)
    dev, m = _device(spec, b"fold-dense"), mirror.Mirror()
    ref = DensePHD(spec["lo"], spec["hi"], 6, 4, 1, counter=counter, block=extra.get("block", 8),
                   horizon=extra.get("horizon", 128), max_nodes=31, fold=1)
    rng_ref = seeded_source(b"fold-dense")
    rng = np.random.default_rng(11)
    live, folds = [], 0
    for t in range(14):
        events = []
        for p in np.clip(rng.normal([8 + 4 * t, 50 - 3 * t], 5, size=(40, 2)), 0, 64).astype(int).tolist():
            events.append((p, 1))
            live.append(p)
        for i in sorted(rng.choice(len(live), size=len(live) // 3, replace=False).tolist(), reverse=True):
            events.append((live.pop(i), -1))
        _feed(dev, events)
        dev.step()
        before = set(ref.union)
        bits, ys = ref.step(rng_ref, events)
        folds += bool(before - ref.union)  # nodes left the union: a fold
        assert [dev.bits[i >> 3] >> (i & 7) & 1 for i in range(dev.nv)] == bits
        assert list(dev.ys[:dev.nl]) == ys
        assert m.apply(wire.decode(_device_payload(dev)))
        assert m.nodes == len(ref.union)
        depth, path, mass = m.cells()
        assert all(ref.G[(k, p)] == g for k, p, g in zip(depth.tolist(), path.tolist(), mass.tolist()))
    assert folds >= 3


def test_the_planner_folds_when_the_pool_cannot_hold_the_tree():
    """Default: fold on (DEFAULT_FOLD) when the pool is smaller than the whole
    depth-D tree, off when it holds it; --fold 0 gives the 5 B/node back to
    the pool; the agent takes every plan and its RAM is the plan's."""
    from edgesynth import agent
    from edgesynth.mechanisms.phdstream.plan import DEFAULT_FOLD, plan_phdstream

    def plan(**kw):
        cfg = plan_phdstream([0, 0], [1 << 10, 1 << 10], Fraction(1), kw.pop("ram", 64 * 1024), max_events=500, **kw)
        a = agent.Agent(cfg, seed=b"fold-plan-seed00")
        assert a.counter_bytes() == cfg["plan"]["counter_bytes"]
        return cfg["mechanisms"][0]

    on, off, k3 = plan(), plan(fold=0), plan(fold=3)
    assert on["fold"] == DEFAULT_FOLD and off["fold"] == 0 and k3["fold"] == 3
    assert off["max_nodes"] > on["max_nodes"] == k3["max_nodes"]
    small = plan(depth=6, ram=256 * 1024)  # 127 nodes hold the depth-6 tree
    assert small["fold"] == 0 and small["max_nodes"] >= 127
    with pytest.raises(InputError, match="--fold"):
        plan(fold=256)


@pytest.mark.parametrize("seed", range(4))
def test_mirror_folds_as_the_device_when_counts_saturate(monkeypatch, seed):
    """With counts saturating (SAT patched down to 6 on both sides), the
    device folds before its Cd pass, so every ancestor of a folded node gets
    its Cd from the folded masses and the mirror (which recomputes Cd level by
    level) stays equal to it over many windows; the snapshots check it too."""
    from edgesynth.agent.phdstream import counters
    monkeypatch.setattr(counters, "SAT", 6)
    monkeypatch.setattr(mirror, "SATURATE", 6)
    spec = dict(SPEC, hi=[1000, 600], depth=10, eps=[8, 1], max_nodes=201, snap=3, fold=1)
    dev, m = _device(spec, b"sf%d" % seed), mirror.Mirror()
    folded = 0
    for events in _windows(seed, 20, 200):
        _feed(dev, events)
        before = _free_pairs(dev)
        dev.step()
        folded += _free_pairs(dev) > before
        assert m.apply(wire.decode(_device_payload(dev)))
        got, want = m.canonical(fold=True), _device_canonical(dev)
        for a, b in zip(got, want):
            assert np.array_equal(a, b), "step %d" % dev.t
    assert folded > 0 and np.abs(want[1]).max() == 6  # folds happened and counts saturated
