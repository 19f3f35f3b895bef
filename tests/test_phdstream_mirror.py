"""PHDStream's host decoder and mirror (edgesynth.mechanisms.phdstream.wire,
.mirror) against payloads written to the Wire map of
docs/mechanisms/phdstream.md by an independent stand-in device: a tree
keyed by path strings with random split decisions, a capped pool and
random leaf increments. The mirror must equal the stand-in's tree after
every window, resync from a snapshot after a gap, and refuse payloads that
contradict the tree."""
import sys
from pathlib import Path

import msgpack
import numpy as np
import pytest

from edgesynth.agent.msgpack_out import Encoder
from edgesynth.agent.phdstream import PHDStream
from edgesynth.errors import SchemaError
from edgesynth.firmware_shims.drbg import seeded_source
from edgesynth.mechanisms.phdstream import mirror, tree, wire

sys.path.insert(0, str(Path(__file__).resolve().parent))
from phd_reference import DensePHD  # noqa: E402

SAT = 1 << 27
PARAMS = {"beta": 2, "block": 0, "counter": "simple", "delta": 5, "depth": 6, "eps": [1, 1], "hi": [1024, 512],
          "fold": 0, "horizon": 0, "lam": [6, 1], "lo": [0, 0], "max_nodes": 41, "names": ["x0", "x1"], "noise": "dlap",
          "snap": 4, "theta": 0}


def _bitmap(bits):
    return np.packbits(np.array(bits, dtype=np.uint8), bitorder="little").tobytes()


class StandIn:
    """A device's release logic without its privacy: nodes are path strings
    ("" the root, "0"/"1" appended for the children), splits are coin flips
    that fail at the maximum depth or when the pool has no two free slots."""

    def __init__(self, params, seed, spread=(-40, 60)):
        self.p = params
        self.spread = spread
        self.rng = np.random.default_rng(seed)
        self.cn = {"": 0}
        self.kids = set()
        self.t = 0

    def step(self):
        self.t += 1
        bits, ys, queue = [], [], [""]
        for v in queue:  # grows while read: a BFS in canonical order
            split = len(v) < self.p["depth"] and self.rng.random() < 0.8 ** len(v)
            if split and v not in self.kids:
                if len(self.cn) + 2 > self.p["max_nodes"]:
                    split = False  # cap-and-refuse: a leaf of T(t)
                else:
                    self.kids.add(v)
                    self.cn[v + "0"] = self.cn[v + "1"] = 0
            bits.append(int(split))
            if split:
                queue += [v + "0", v + "1"]
            else:
                y = int(self.rng.integers(*self.spread))
                self.cn[v] = min(max(self.cn[v] + y, -SAT), SAT)  # the device saturates
                ys.append(y)
        snap = None
        if self.t == 1 or self.t % self.p["snap"] == 0:
            kids, cn, _ = self.canonical()
            snap = {"cn": cn.astype("<i4").tobytes(), "kids": _bitmap(kids), "n": len(kids)}
        return msgpack.packb({"bits": _bitmap(bits), "d": np.array(ys, "<i4").tobytes(), "kind": "phdstream",
                              "nv": len(bits), "p": self.p, "snap": snap, "t": self.t, "v": 1})

    def canonical(self):
        order = [""]
        for v in order:
            if v in self.kids:
                order += [v + "0", v + "1"]
        cd = {}
        for v in reversed(order):
            s = sum(cd[w] + self.cn[w] for w in (v + "0", v + "1")) if v in self.kids else 0
            cd[v] = min(max(s, -SAT), SAT)
        return (np.array([v in self.kids for v in order]), np.array([self.cn[v] for v in order], dtype=np.int64),
                np.array([cd[v] for v in order], dtype=np.int64))


def _equal(m, dev):
    got, want = m.canonical(), dev.canonical()
    return all(np.array_equal(a, b) for a, b in zip(got, want))


def test_mirror_equals_the_device_after_every_window():
    dev, m = StandIn(PARAMS, 1), mirror.Mirror()
    full = False
    for _ in range(30):
        w = wire.decode(dev.step())
        assert m.apply(w)
        assert m.t == dev.t and _equal(m, dev)
        full = full or m.nodes + 2 > PARAMS["max_nodes"]
        # the per-step generator carries the whole noisy mass
        blo, bhi, mass = m.generator()
        assert mass.size == w.leaves and mass.sum() == pytest.approx(sum(dev.cn.values()))
    assert full  # the pool cap was reached and the stream went on


def test_mirror_saturates_cn_and_cd_as_the_device():
    # increments up to 2**28 in magnitude drive Cn and Cd into both bounds
    dev, m = StandIn(PARAMS, 11, spread=(-(1 << 28), 1 << 28)), mirror.Mirror()
    hit = set()
    for _ in range(25):
        assert m.apply(wire.decode(dev.step()))
        assert _equal(m, dev)
        assert np.array_equal(m.cells()[2], m.generator()[2])
        kids, cn, cd = m.canonical()
        assert np.abs(cn).max() <= SAT and np.abs(cd).max() <= SAT
        hit |= {int(x) for x in np.concatenate([cn, cd]) if abs(x) == SAT}
    assert hit == {SAT, -SAT}


def test_a_refused_window_leaves_the_mirror_unchanged():
    dev, m = StandIn(PARAMS, 12), mirror.Mirror()
    for _ in range(3):
        m.apply(wire.decode(dev.step()))
    before = m.canonical()
    raw = msgpack.unpackb(dev.step())  # step 4, with a snapshot
    bad = dict(raw, snap=dict(raw["snap"], cn=(np.frombuffer(raw["snap"]["cn"], "<i4") + 1).tobytes()))
    with pytest.raises(SchemaError, match="differs"):
        m.apply(wire.decode(msgpack.packb(bad)))
    assert m.t == 3 and all(np.array_equal(a, b) for a, b in zip(m.canonical(), before))
    assert np.array_equal(m.cells()[2], m.generator()[2])  # the exact Cd was rolled back too
    # the true step 4 still applies in sync after the refused one
    assert m.apply(wire.decode(msgpack.packb(raw))) and _equal(m, dev)
    # a split past the pool, found after earlier nodes of the step grew: nothing kept
    tiny = dict(PARAMS, max_nodes=9)
    mm = mirror.Mirror()
    shape = _bitmap([1, 1, 0, 0, 1, 0, 0])  # root, a, b, aa, ab, aba, abb: 7 of 9 nodes
    first = _payload(p=tiny, bits=shape, nv=7, d=np.zeros(4, "<i4").tobytes(), t=1,
                     snap={"cn": np.zeros(7, "<i4").tobytes(), "kids": shape, "n": 7})
    assert mm.apply(wire.decode(first))
    before = mm.canonical()
    # b splits (nodes 8, 9), then its child bb splits past the pool
    over = wire.decode(_payload(p=tiny, bits=_bitmap([1, 0, 1, 0, 1, 0, 0]), nv=7,
                                d=np.arange(1, 5, dtype="<i4").tobytes(), snap=None, t=2))
    with pytest.raises(SchemaError, match="past the pool"):
        mm.apply(over)
    assert mm.nodes == 7 and mm.t == 1 and all(np.array_equal(a, b) for a, b in zip(mm.canonical(), before))


def test_mirror_resyncs_from_the_next_snapshot_after_a_gap():
    dev, m = StandIn(PARAMS, 2), mirror.Mirror()
    payloads = [dev.step() for _ in range(13)]  # snapshots at steps 1, 4, 8, 12
    states = []
    replay = StandIn(PARAMS, 2)
    for _ in range(13):
        replay.step()
        states.append(replay.canonical())
    applied = [m.apply(wire.decode(payloads[i])) for i in (0, 1, 4, 5, 6, 7, 8, 9, 10, 11, 12)]
    # steps 1, 2 in sync; 3 and 4 lost; 5-7 wait; 8 (snapshot) resyncs; 9-13 in sync
    assert applied == [True, True, False, False, False, True, True, True, True, True, True]
    assert m.skipped == 3 and m.t == 13
    assert all(np.array_equal(a, b) for a, b in zip(m.canonical(), states[-1]))


def test_a_late_joiner_starts_at_a_snapshot():
    dev, m = StandIn(PARAMS, 3), mirror.Mirror()
    dev.step()  # step 1 (with a snapshot) is missed
    for _ in range(6):
        w = wire.decode(dev.step())
        assert m.apply(w) == (w.t >= 4)
        if w.t >= 4:
            assert _equal(m, dev)
    assert m.skipped == 2


def test_leaves_of_a_snapshot_step_are_found_in_the_snapshot():
    dev = StandIn(PARAMS, 4)
    for _ in range(3):
        dev.step()
    w = wire.decode(dev.step())  # step 4 carries a snapshot
    a, b = mirror.Mirror(), mirror.Mirror()
    a.apply(w)
    dev2 = StandIn(PARAMS, 4)
    for _ in range(4):
        b.apply(wire.decode(dev2.step()))
    assert a.t == b.t == 4
    kids_a, cn_a, _ = a.canonical()
    assert np.array_equal(kids_a, b.canonical()[0]) and np.array_equal(cn_a, b.canonical()[1])
    ga, gb = a.generator(), b.generator()
    for x, y in zip(ga, gb):
        assert np.array_equal(x, y)


def _payload(**change):
    m = msgpack.unpackb(StandIn(PARAMS, 5).step())
    m.update(change)
    return msgpack.packb(m)


@pytest.mark.parametrize("change, match", [
    ({"h": 3}, "keys"),
    ({"kind": "privhp"}, "kind"),
    ({"v": 2}, "v must be"),
    ({"bits": b"\x01"}, "bitmap|tree"),
    ({"nv": 2}, "bitmap|tree"),
    ({"d": b"\x00" * 3}, "int32"),
    ({"p": dict(PARAMS, counter="fancy")}, "counter"),
    ({"p": dict(PARAMS, counter="block")}, "block"),
    ({"p": dict(PARAMS, lo=[0, 600])}, "lo"),
    ({"p": dict(PARAMS, noise="laplace")}, "noise"),
    ({"p": dict(PARAMS, lam=[3, 1])}, "lam"),
    ({"p": dict(PARAMS, delta=4)}, "delta"),
    ({"snap": {"cn": b"", "kids": b"", "n": 0}}, "snap.n"),
])
def test_decode_refuses_malformed_payloads(change, match):
    with pytest.raises(SchemaError, match=match):
        wire.decode(_payload(**change))
    with pytest.raises(SchemaError, match="msgpack"):
        wire.decode(b"\xc1")


def test_bitmap_that_runs_out_of_nodes_is_refused():
    # 0 then 1: the root is a leaf, so a second node cannot exist
    bits = _bitmap([0, 1, 0, 0])
    with pytest.raises(SchemaError, match="tree"):
        wire.decode(_payload(bits=bits, nv=4, d=np.zeros(3, "<i4").tobytes(), snap=None))


def test_mirror_refuses_a_stream_that_contradicts_the_tree():
    # a split below the maximum depth: the root and its child 0 split with depth 1
    deep = wire.decode(_payload(p=dict(PARAMS, depth=1), bits=_bitmap([1, 1, 0, 0, 0]), nv=5,
                                d=np.zeros(3, "<i4").tobytes(), snap=None, t=1))
    mm = mirror.Mirror()
    mm.params, mm.t = deep.params, 0
    with pytest.raises(SchemaError, match="maximum depth"):
        mm.apply(deep)
    # a split past the pool of 5 nodes: step 1 fills it, step 2 splits another leaf
    small = dict(PARAMS, max_nodes=5)
    mm = mirror.Mirror()
    assert mm.apply(wire.decode(_payload(p=small, bits=_bitmap([1, 1, 0, 0, 0]), nv=5, d=np.zeros(3, "<i4").tobytes(),
                                         snap={"cn": np.zeros(5, "<i4").tobytes(), "kids": _bitmap([1, 1, 0, 0, 0]),
                                               "n": 5}, t=1)))
    over = wire.decode(_payload(p=small, bits=_bitmap([1, 0, 1, 0, 0]), nv=5, d=np.zeros(3, "<i4").tobytes(),
                                snap=None, t=2))
    with pytest.raises(SchemaError, match="past the pool"):
        mm.apply(over)
    with pytest.raises(SchemaError, match="nv must be"):  # T(t) larger than the pool
        wire.decode(_payload(p=small, bits=_bitmap([1, 1, 1, 0, 0, 0, 0]), nv=7, d=np.zeros(4, "<i4").tobytes()))
    # a snapshot that disagrees with the rebuilt tree
    dev, mm = StandIn(PARAMS, 7), mirror.Mirror()
    for _ in range(3):
        mm.apply(wire.decode(dev.step()))
    m = msgpack.unpackb(dev.step())
    cn = np.frombuffer(m["snap"]["cn"], "<i4").copy()
    cn[0] += 1
    m["snap"]["cn"] = cn.tobytes()
    with pytest.raises(SchemaError, match="differs"):
        mm.apply(wire.decode(msgpack.packb(m)))


def _device(spec, seed):
    """A device PHDStream (the agent protocol: PHDStream(spec), draw_noise)
    drawing from the house DRBG seeded with ``seed``."""
    dev = PHDStream(spec)
    dev.draw_noise(seeded_source(seed))
    return dev


def _feed(dev, events):
    for x, sign in events:
        dev.update(list(x) + [sign])


def _device_payload(dev):
    out = bytearray()
    enc = Encoder()
    enc.reset(lambda buf, n: out.extend(bytes(buf[:n])))
    dev.encode(enc)
    return bytes(out)


def _device_canonical(dev):
    """(kids, cn, cd) of the device's pool in canonical BFS order (kid 0 =
    no children; a node's children are kid, kid + 1)."""
    order = [0]
    for v in order:
        if dev.kid[v]:
            order += [dev.kid[v], dev.kid[v] + 1]
    return (np.array([dev.kid[v] != 0 for v in order]), np.array([dev.cn[v] for v in order], dtype=np.int64),
            np.array([dev.cd[v] for v in order], dtype=np.int64))


def _windows(seed, steps, per_window):
    """A synthetic stream over the box [0, 1000) x [0, 600): each window
    inserts points around two moving hot spots and deletes a share of the
    live points (a delete always names a live point). Yields a list of
    (x, sign) per window."""
    rng = np.random.default_rng(seed)
    live = []
    for t in range(steps):
        events = []
        centre = np.array([200 + 20 * t, 300]), np.array([800 - 15 * t, 150])
        for c in centre:
            for p in np.clip(rng.normal(c, 40, size=(per_window // 2, 2)), 0, [999, 599]).astype(int):
                events.append(([int(p[0]), int(p[1])], 1))
                live.append([int(p[0]), int(p[1])])
        for i in sorted(rng.choice(len(live), size=len(live) // 5, replace=False), reverse=True):
            events.append((live.pop(i), -1))
        yield events


@pytest.mark.parametrize("counter, extra, max_nodes", [
    ("simple", {}, 4001),
    ("block", {"block": 4}, 4001),
    ("tree", {"horizon": 8}, 4001),
    ("simple", {}, 61),  # a small pool: splits are refused and the stream goes on
])
def test_mirror_equals_the_device_pool_after_every_window(counter, extra, max_nodes):
    spec = dict({"lo": [0, 0], "hi": [1000, 600], "depth": 12, "eps": [1, 1], "counter": counter,
                 "max_nodes": max_nodes, "batch_max": 2000, "snap": 5}, **extra)
    dev, m = _device(spec, b"mirror"), mirror.Mirror()
    for events in _windows(3, 14, 120):
        _feed(dev, events)
        dev.step()
        w = wire.decode(_device_payload(dev))
        assert m.apply(w) and m.t == dev.t
        got, want = m.canonical(), _device_canonical(dev)
        assert all(np.array_equal(a, b) for a, b in zip(got, want))
        assert m.nodes == dev.used
        blo, bhi, mass = m.generator()
        assert np.array_equal(m.cells()[2], mass)  # the incremental G is Ext_T over the whole tree, to the bit
        assert mass.size == w.leaves == dev.nl
        assert mass.sum() == pytest.approx(int(want[1].sum()))
    if max_nodes == 61:
        assert dev.refused_splits > 0 and m.nodes + 2 > max_nodes


def test_mirror_resyncs_on_device_frames_after_a_gap():
    spec = {"lo": [0, 0], "hi": [1000, 600], "depth": 10, "eps": [1, 2], "counter": "simple",
            "max_nodes": 3001, "batch_max": 2000, "snap": 4}
    check_resync_after_gaps(spec, b"gap", 13, _device_canonical)


def check_resync_after_gaps(spec, seed, steps, canonical, fold=False):
    """Device frames 3 and 6 lost (snap 4): the mirror is in sync through 2,
    4 resyncs (a snapshot) after 3; after 6, 7 waits and 8 resyncs. Every
    applied frame leaves m.canonical(fold) equal to canonical(dev) and G the
    same from the cells as from the generator."""
    dev, m = _device(spec, seed), mirror.Mirror()
    lost = {3, 6}
    for events in _windows(4, steps, 100):
        _feed(dev, events)
        dev.step()
        if dev.t in lost:
            continue
        applied = m.apply(wire.decode(_device_payload(dev)))
        assert applied == (dev.t != 7)
        if applied:
            assert all(np.array_equal(a, b) for a, b in zip(m.canonical(fold=fold), canonical(dev)))
            assert np.array_equal(m.cells()[2], m.generator()[2])  # after a resync too
    assert m.t == steps and m.skipped == 1


def test_host_g_from_the_frames_equals_the_dense_reference():
    """Device frames -> decoder -> mirror -> Ext_T on the host give, at every
    union node and every step, the G that the dense Algorithm 1/3 (exact
    fractions over the full tree, tests/phd_reference.py) computes under the
    same DRBG draws."""
    spec = {"lo": [0, 0], "hi": [64, 64], "depth": 6, "eps": [4, 1], "counter": "simple", "max_nodes": 200,
            "batch_max": 1000, "snap": 3}
    dev, m = _device(spec, b"dense"), mirror.Mirror()
    ref, rng_ref = DensePHD(spec["lo"], spec["hi"], 6, 4, 1), seeded_source(b"dense")
    rng = np.random.default_rng(9)
    live = []
    for t in range(10):
        events = []
        for p in np.clip(rng.normal([8 + 5 * t, 50 - 4 * t], 6, size=(40, 2)), 0, 64).astype(int).tolist():
            events.append((p, 1))
            live.append(p)
        for i in sorted(rng.choice(len(live), size=len(live) // 4, replace=False).tolist(), reverse=True):
            events.append((live.pop(i), -1))
        _feed(dev, events)
        dev.step()
        ref.step(rng_ref, events)
        assert m.apply(wire.decode(_device_payload(dev)))
        children = m.children()
        g = tree.ext(children, m.counts().astype(float))
        # (depth, path) of each mirror node, from the root down
        where = {0: (0, 0)}
        for v in tree.structure(children)[2].tolist():
            if children[v, 0] >= 0:
                k, p = where[v]
                where[children[v, 0]], where[children[v, 1]] = (k + 1, 2 * p), (k + 1, 2 * p + 1)
        for v, (k, p) in where.items():
            assert g[v] == pytest.approx(float(ref.G[(k, p)]), abs=1e-9)
        blo, bhi, mass = m.generator()
        assert mass.sum() == pytest.approx(float(ref.G[(0, 0)]), abs=1e-9)
        assert m.leaves and all(ref.G[where[v]] == mass[i] for i, v in enumerate(m.leaves))


def test_mirror_equals_a_saturating_device_with_deletions():
    """The device's own saturation (Cn and Cd clamped to +-2**27 at every
    update) reproduced by the mirror bit for bit. Counts that large need
    ~2**27 events, so the device's pool is set white-box after step 3 to
    counts near the bounds (Cd recomputed by the device's rule); the mirror
    joins at the next snapshot and must equal the device after every later
    window of inserts and deletes."""
    spec = {"lo": [0, 0], "hi": [1000, 600], "depth": 8, "eps": [1, 1], "counter": "simple",
            "max_nodes": 201, "batch_max": 2000, "snap": 2}
    dev, m = _device(spec, b"saturate"), mirror.Mirror()
    rng = np.random.default_rng(5)
    windows = list(_windows(6, 12, 80))
    seen = set()
    for t, events in enumerate(windows, 1):
        _feed(dev, events)
        dev.step()
        if t < 3:
            continue
        if t == 3:
            order = [0]
            for v in order:
                if dev.kid[v]:
                    order += [dev.kid[v], dev.kid[v] + 1]
            for v in order:  # near both bounds: leaf increments and Cd sums overflow them
                dev.cn[v] = int(rng.choice([SAT - 3, -(SAT - 3), 1 << 26, -(1 << 26)]))
            for v in reversed(order):
                if dev.kid[v]:
                    c = dev.kid[v]
                    dev.cd[v] = min(max(dev.cd[c] + dev.cn[c] + dev.cd[c + 1] + dev.cn[c + 1], -SAT), SAT)
            continue
        applied = m.apply(wire.decode(_device_payload(dev)))
        assert applied  # step 4 carries a snapshot (every 2nd step), then in sync
        got, want = m.canonical(), _device_canonical(dev)
        assert all(np.array_equal(a, b) for a, b in zip(got, want))
        seen |= {int(x) for x in np.concatenate(got[1:]) if abs(x) == SAT}
    assert seen == {SAT, -SAT}
