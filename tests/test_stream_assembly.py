"""Streaming assembly from a store: the same generator bytes as assembling the
list of frames, memory that does not grow with the number of frames, and the
store's read contract (frames, config_ids, device_ranges)."""
import tracemalloc

import numpy as np
import pytest

import edgesynth as es
from edgesynth.errors import InputError, MergeError, StoreError
from edgesynth.fleet import assembly
from edgesynth.fleet.store import Store
from edgesynth.frames import parse_frame, split_envelope
from edgesynth.mechanisms import REGISTRY
from edgesynth.merge import Merges, merge_releases, repeated_sum

RNG_SEED = 7


def plans():
    return {
        "privhp": (es.plan({"t": (0, 50), "h": (0, 100)}, epsilon=1, ram="32K", n_max=10 ** 4,
                           device_runtime="c"), 2),
        "cdf": (es.plan({"t": (0, 50)}, epsilon="1/2", mechanism="cdf", ram="32K", bins=256, device_runtime="c"), 1),
    }


def windows_frames(cfg, d, windows, seed=0):
    """Frame bytes of ``windows`` [(device, epoch)], each with its own readings and noise."""
    rng = np.random.default_rng(RNG_SEED + seed)
    return [es.simulate(cfg, rng.uniform(0, 50, size=(200, d)), seed=seed * 1000 + i, runtime="numpy",
                        device_id=dev, epoch=ep) for i, (dev, ep) in enumerate(windows)]


def profile_frames():
    """Sketches over disjoint id ranges, from three devices (they concatenate)."""
    rng = np.random.default_rng(RNG_SEED)
    out = []
    for i, lo in enumerate((2000, 0, 1000)):
        cfg = es.plan(epsilon=1, mechanism="profile", domain=(lo, lo + 1000), cap=20, ram="32K", device_runtime="c")
        out.append(es.simulate(cfg, rng.integers(lo, lo + 1000, size=(1500, 1)), seed=50 + i, runtime="numpy",
                               device_id="p%d" % i))
    return out


def make_store(path, frames):
    with Store(str(path), create=True) as st:
        st.put_many([parse_frame(f)[0] for f in frames])
    return str(path)


def clones(frame, n):
    """``n`` untagged copies of one frame, each from its own device "d%07d"
    (spliced in place: the template's id has the same length)."""
    device, start, end, _, _ = split_envelope(frame)
    assert device == "d0000000"
    payload = frame[start:end]
    at = payload.index(b"\xa6device\xa8d0000000") + 8
    head = frame[:start]
    out = []
    for i in range(n):
        dev = b"d%07d" % i
        out.append(head[:7] + dev + head[15:] + payload[:at] + dev + payload[at + 8:] + b"\xc0")
    return out


def old_fold(rels, kind):
    """The merge before streaming: a new state per step, ``a + b`` for every
    array (the reference the running fold must match byte for byte)."""
    states = [m for r in rels for m in r.mechs if m.kind == kind]
    acc = states[0]
    for s in states[1:]:
        out = type(s)()
        out.__dict__.update(acc.__dict__)
        if kind == "privhp":
            out.tree, out.sketches = acc.tree + s.tree, acc.sketches + s.sketches
            out.tree_var, out.sketch_var = acc.tree_var + s.tree_var, acc.sketch_var + s.sketch_var
            out.clamp_var = acc.clamp_var + s.clamp_var
            out.clamp = None if acc.clamp is None else acc.clamp + s.clamp
        else:
            out.levels = [[a + b for a, b in zip(la, lb)] for la, lb in zip(acc.levels, s.levels)]
            out.var = acc.var + s.var
        out.frames = acc.frames + s.frames
        out.integer = [a and b for a, b in zip(acc.integer, s.integer)]
        acc = out
    return acc


@pytest.mark.parametrize("kind", ["privhp", "cdf"])
def test_store_stream_is_byte_identical_to_the_frame_list(tmp_path, kind):
    cfg, d = plans()[kind]
    wins = [(dev, ep) for dev in ("c", "a", "b") for ep in (2, 0, 1)]
    frames = windows_frames(cfg, d, wins)
    db = make_store(tmp_path / "s.db", frames[::-1])          # stored in another order
    ordered = [f for _, f in sorted(zip(wins, frames))]      # the store's (device, epoch) order
    want = es.assemble(b"".join(ordered)).to_bytes()
    assert es.assemble(store=db).to_bytes() == want
    assert es.assemble(frames + frames[:2]).to_bytes() == want   # resends dropped, any order
    rels = [parse_frame(f)[0] for f in ordered]
    merges, state = merge_releases(rels, kind)
    assert REGISTRY[kind].build(merges, old_fold(rels, kind)).to_bytes() == want
    assert state.frames == len(frames) and merges.sorted_devices() == ["a", "b", "c"]
    # the frame list is not changed by the fold (its first state is copied before adding)
    again = [parse_frame(f)[0] for f in ordered]
    assert all(np.array_equal(a.mechs[0].tree if kind == "privhp" else a.mechs[0].levels[0][0],
                              b.mechs[0].tree if kind == "privhp" else b.mechs[0].levels[0][0])
               for a, b in zip(rels, again))


def test_profile_store_stream_is_byte_identical(tmp_path):
    frames = profile_frames()
    db = make_store(tmp_path / "p.db", frames)
    want = es.assemble(b"".join(sorted(frames, key=lambda f: split_envelope(f)[0]))).to_bytes()
    assert es.assemble(store=db).to_bytes() == want


def test_repeated_sum_is_the_left_fold():
    rng = np.random.default_rng(1)
    for n in (1, 2, 3, 10, 4097, 9000):
        v = rng.uniform(0.1, 100.0, size=3)
        acc = v.copy()
        for _ in range(n - 1):
            acc = acc + v
        assert np.array_equal(repeated_sum(v, n), acc), n
    assert repeated_sum(np.array([0.1]), 10)[0] == 0.9999999999999999 != 10 * 0.1


def test_partial_merges_combine_to_the_single_fold(tmp_path):
    """absorb (the Dask combine) of consecutive partial merges gives the bytes
    of one fold, the variances included (re-summed frame by frame)."""
    cfg, d = plans()["cdf"]
    wins = [("d%02d" % i, 0) for i in range(7)]
    rels = [parse_frame(f)[0] for f in windows_frames(cfg, d, wins, seed=3)]
    whole = Merges(unique=False)
    for r in rels:
        whole.add(r)
    parts = []
    for chunk in (rels[:3], rels[3:4], rels[4:]):
        m = Merges(unique=False)
        for r in chunk:
            m.add(r)
        parts.append(m)
    parts[1].absorb(parts[2])
    parts[0].absorb(parts[1])
    a, b = (REGISTRY["cdf"].build(m, m.select("cdf").result()).to_bytes() for m in (whole, parts[0]))
    assert a == b


def test_merge_faults(tmp_path):
    cfg, d = plans()["cdf"]
    other = es.plan({"t": (0, 99)}, epsilon="1/2", mechanism="cdf", ram="32K", bins=256, device_runtime="c")
    a = windows_frames(cfg, d, [("a", 0)])[0]
    b = windows_frames(other, d, [("b", 0)])[0]
    with pytest.raises(MergeError, match="different public configurations"):
        es.assemble([a, b])
    a2 = windows_frames(cfg, d, [("a", 0)], seed=5)[0]       # the same window noised again
    with pytest.raises(MergeError, match="released once"):
        es.assemble([a, a2])
    hp = windows_frames(*plans()["privhp"], [("c", 0)])[0]
    with pytest.raises(MergeError, match="several mechanisms"):
        es.assemble([a, hp])
    with pytest.raises(MergeError, match="1 of 2 releases carry no privhp"):
        es.assemble([a, hp], mechanism="privhp")
    # the store refuses several configurations unless one is chosen
    db = make_store(tmp_path / "s.db", [a, b])
    with pytest.raises(InputError, match="2 configurations"):
        es.assemble(store=db)
    cid = parse_frame(b)[0].mechs[0].config_id()
    assert es.assemble(store=db, config_id=cid).summary()["devices"] == ["b"]
    with pytest.raises(InputError, match="no stored frames match"):
        es.assemble(store=db, config_id="0" * 16)
    with pytest.raises(InputError, match="apply to a --store"):
        es.assemble([a], workers=2)


def test_store_read_contract(tmp_path):
    cfg, d = plans()["cdf"]
    frames = clones(es.simulate(cfg, np.ones((5, 1)), seed=1, runtime="numpy", device_id="d0000000"), 40)
    other = es.plan({"t": (0, 99)}, epsilon="1/2", mechanism="cdf", ram="32K", bins=256, device_runtime="c")
    extra = clones(es.simulate(other, np.ones((5, 1)), seed=2, runtime="numpy", device_id="d0000000"), 45)[40:]
    db = make_store(tmp_path / "s.db", frames[::-1] + extra)
    cid, oid = parse_frame(frames[0])[0].mechs[0].config_id(), parse_frame(extra[0])[0].mechs[0].config_id()
    with Store(db) as st:
        assert st.config_ids() == sorted([cid, oid])
        assert st.config_ids(device_range=(None, "d0000040")) == [cid]
        assert list(st.frames(config_id=cid)) == frames                 # (device, epoch) order
        assert list(st.frames(devices=["d0000003", "d0000001"])) == [frames[1], frames[3]]
        assert list(st.frames(device_range=("d0000010", "d0000012"))) == frames[10:12]
        for parts in (1, 2, 3, 7, 100):
            ranges = st.device_ranges(parts, cid)
            assert 1 <= len(ranges) <= parts and ranges[0][0] is None and ranges[-1][1] is None
            assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
            got = [list(st.frames(config_id=cid, device_range=r)) for r in ranges]
            assert sum(got, []) == frames and all(got)
            assert max(map(len, got)) - min(map(len, got)) <= 40 // len(ranges) + 1
        assert len(st.device_ranges(4)) == 4                             # all configurations
        for bad in (0, -1, True, 2.0, "2", None):
            with pytest.raises(InputError, match="parts must be a positive integer"):
                st.device_ranges(bad)


def test_memory_does_not_grow_with_the_frame_count(tmp_path):
    """tracemalloc peak of assemble --store over 200 and 2,000 one-frame
    devices (29 KB frames): the ten times longer stream adds less than one
    frame's worth of state, where the list of Releases took ~100 KiB a frame."""
    cfg = es.plan({"t": (0, 50), "h": (0, 100)}, epsilon=1, ram="32K", device_runtime="c")
    one = es.simulate(cfg, np.random.default_rng(0).uniform(0, 50, (500, 2)), seed=9, runtime="numpy",
                      device_id="d0000000")
    frames = clones(one, 2000)
    peaks = []
    for n in (200, 2000):
        db = make_store(tmp_path / ("s%d.db" % n), frames[:n])
        es.assemble(store=db)                                     # imports and caches outside the measure
        tracemalloc.start()
        gen = es.assemble(store=db)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert gen.summary()["frames"] == n
    assert peaks[1] - peaks[0] < len(one) + 200 * 1000, peaks   # + the 1,800 more device ids in the metadata


def test_frame_files_are_folded_one_frame_at_a_time(tmp_path):
    """assemble over a frame file reads it frame by frame: 2,000 frames of
    29 KB add only their de-duplication keys (~300 bytes a frame) over 200."""
    cfg = es.plan({"t": (0, 50), "h": (0, 100)}, epsilon=1, ram="32K", device_runtime="c")
    one = es.simulate(cfg, np.random.default_rng(0).uniform(0, 50, (500, 2)), seed=9, runtime="numpy",
                      device_id="d0000000")
    frames = clones(one, 2000)
    peaks = []
    for n in (200, 2000):
        path = tmp_path / ("f%d.bin" % n)
        path.write_bytes(b"".join(frames[:n]))
        es.assemble(str(path))
        tracemalloc.start()
        gen = es.assemble(str(path))
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert gen.summary()["frames"] == n
    assert peaks[1] - peaks[0] < len(one) + 1800 * 400, peaks


def test_a_damaged_stored_frame_names_the_store_and_where(tmp_path):
    """A stored frame that no longer decodes (a damaged disk or database) is a
    StoreError naming the store and the frame's place, not a bare frame error."""
    import sqlite3
    cfg, d = plans()["cdf"]
    db = make_store(tmp_path / "s.db", windows_frames(cfg, d, [("a", 0), ("b", 0), ("b", 1), ("c", 0)]))
    with sqlite3.connect(db) as con:
        con.execute("UPDATE frames SET raw = ? WHERE device = 'b' AND epoch = 1", (b"\x00garbage",))
    with pytest.raises(StoreError) as e:
        es.assemble(store=db)
    msg = str(e.value)
    assert msg.startswith(db + ": stored frame 3 of the selection (after device 'b' epoch 0")
    assert "bad magic" in msg and msg.endswith("(the store is damaged)") and "\n" not in msg
    with sqlite3.connect(db) as con:
        con.execute("UPDATE frames SET raw = ? WHERE device = 'a'", (b"\x00garbage",))
    with pytest.raises(StoreError, match=r"stored frame 1 of the selection \(the first, in device order\)"):
        es.assemble(store=db)
    with sqlite3.connect(db) as con:
        con.execute("UPDATE frames SET raw = ? WHERE device = 'c'", (b"\x00garbage",))
    with Store(db) as st, pytest.raises(StoreError, match=r"\(the first from device 'c', in device order\)"):
        assembly.merge_frames(st, device_range=("c", None))   # a Dask task's range


def test_the_dask_combine_leaves_its_inputs_unchanged():
    """_combine builds a new merge: Dask may run a combine again on the same inputs."""
    cfg, d = plans()["cdf"]
    rels = [parse_frame(f)[0] for f in windows_frames(cfg, d, [("a", 0), ("b", 0), ("c", 0)], seed=4)]
    left, right, whole = Merges(unique=False), Merges(unique=False), Merges(unique=False)
    for r in rels[:2]:
        left.add(r)
    right.add(rels[2])
    for r in rels:
        whole.add(r)
    def gen(m):
        return REGISTRY["cdf"].build(m, m.select("cdf").result()).to_bytes()

    before = [gen(m) for m in (left, right)]
    both = assembly._combine(left, right)
    again = assembly._combine(left, right)
    assert [gen(m) for m in (left, right)] == before
    assert (left.frames, left.devices, right.frames) == (2, ["a", "b"], 1)
    assert gen(both) == gen(again) == gen(whole)
    assert both.devices == ["a", "b", "c"] and both.frames == 3
