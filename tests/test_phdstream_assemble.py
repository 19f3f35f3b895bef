"""PHDStream frames -> assemble -> stream generator -> sample (the host side
of docs/mechanisms/phdstream.md, "Host algorithms"): frames from the continual agent,
the generator's steps equal a mirror fed the same payloads, ceil(G) points
per positive leaf at the default n, resync after dropped frames, several
devices, the generator file, the CLI's --step/--all-steps, and refusals."""
import sys
from pathlib import Path

import msgpack
import numpy as np
import pytest
from click.testing import CliRunner

import edgesynth as es
from edgesynth import agent
from edgesynth.cli import main
from edgesynth.errors import EdgesynthError, FrameError, InputError, MergeError, SchemaError
from edgesynth.fleet.store import Store
from edgesynth.frames import parse_frame, split_envelope
from edgesynth.mechanisms.phdstream import metric, mirror, wire
from edgesynth.mechanisms.phdstream.tree import point_counts
from edgesynth.mechanisms.privhp.growth import Leaves, leaf_cells
from edgesynth.merge import Merge

sys.path.insert(0, str(Path(__file__).resolve().parent))
from phd_helpers import agent_frames  # noqa: E402

SEED = b"phd-assemble-0001"
BOX = [0, 0], [255, 127]


def config(rate_bound=False, **kw):
    spec = {"kind": "phdstream", "names": ["x", "y"], "lo": BOX[0], "hi": BOX[1], "depth": 10, "eps": [2, 1],
            "max_nodes": 511, "batch_max": 400, "snap": 4, "rate_bound": rate_bound}
    spec.update(kw)
    eps = spec["eps"] if rate_bound else [2 * spec["eps"][0], spec["eps"][1]]
    return {"format": 1, "epsilon": eps, "relation": "add-remove", "mechanisms": [spec]}


def stream(seed, windows=10, per=60):
    """Events (x, y, op) per window: inserts around a hot spot moving right,
    about a quarter of the live points deleted each window."""
    rng = np.random.default_rng(seed)
    live, out = [], []
    for t in range(windows):
        ev = []
        for p in np.clip(rng.normal([40 + 15 * t, 60], 12, size=(per, 2)), 0, [255, 127]).astype(int).tolist():
            ev.append((p[0], p[1], 1))
            live.append(p)
        for i in sorted(rng.choice(len(live), size=len(live) // 4, replace=False).tolist(), reverse=True):
            x = live.pop(i)
            ev.append((x[0], x[1], -1))
        out.append(ev)
    return out


def run(cfg, windows, device="cam-1", seed=SEED):
    """One continual agent over ``windows``: a list of frame bytes, epoch = window index."""
    return agent_frames(agent.Agent(cfg, seed=seed, device_id=device, epoch=0, seq=0), windows)


def entry(frame):
    _, a, b, _, _ = split_envelope(frame)
    return msgpack.unpackb(frame[a:b], raw=False)["mechs"][0]


@pytest.fixture(scope="module")
def frames():
    return run(config(), stream(1))


def test_steps_equal_a_mirror_fed_the_same_payloads(frames):
    gen = es.assemble(b"".join(frames))
    assert gen.kind == "phdstream" and gen.steps == list(range(1, 11))
    m = mirror.Mirror()
    for k, f in enumerate(frames, 1):
        assert m.apply(wire.decode(entry(f)))
        level, path, mass = gen.model.cells(k)
        want = m.cells()
        assert all(np.array_equal(a, b) for a, b in zip((level, path, mass), want))
        assert gen.population(k) == int(point_counts(mass).sum())
    s = gen.summary()
    assert s["mechanism"] == "phdstream" and s["frames"] == 10 and s["skipped_windows"] == 0
    assert s["epsilon"] == "4" and s["noise_epsilon"] == "2" and s["rate_bound"] is False
    assert [p for _, p in s["population"]] == [gen.population(k) for k in gen.steps]


def test_default_sample_puts_ceil_g_integer_points_in_each_positive_leaf(frames):
    gen = es.assemble(frames)
    for k in (1, 6, 10):
        rows = gen.sample(step=k, seed=3)
        assert list(rows.columns) == ["x", "y"] and all(rows.dtypes == np.int64)
        level, path, mass = gen.model.cells(k)
        assert len(rows) == gen.population(k) > 0
        # the leaf cell of every point: its depth-10 path code, read against each leaf's prefix
        q, bits = leaf_cells(Leaves(level, path, mass), 2)
        x = rows.to_numpy()
        assert np.all(x >= BOX[0]) and np.all(x <= BOX[1])
        inside = np.ones((len(x), level.size), dtype=bool)
        for c, (lo, hi) in enumerate(zip(*BOX)):
            cell = np.minimum((x[:, c:c + 1] - lo) * (1 << bits[:, c]) // (hi - lo), (1 << bits[:, c]) - 1)
            inside &= cell == q[:, c]
        assert np.all(inside.sum(axis=1) == 1)  # the leaves of T(t) partition the box
        assert np.array_equal(inside.sum(axis=0), point_counts(mass))
    # another n is apportioned in proportion to ceil(G); the same seed, the same rows
    a, b = gen.sample(37, seed=5, step=10), gen.sample(37, seed=5, step=10)
    assert len(a) == 37 and a.equals(b)


def test_the_generator_file_round_trips(frames, tmp_path):
    gen = es.assemble(frames)
    gen.save(tmp_path / "g.gen")
    back = es.load(tmp_path / "g.gen")
    assert back.steps == gen.steps and back.summary() == gen.summary()
    assert back.sample(step=4, seed=9).equals(gen.sample(step=4, seed=9))
    assert back.sample_steps(seed=2).equals(gen.sample_steps(seed=2))
    assert es.inspect(tmp_path / "g.gen")["steps"] == 10


def test_resync_after_dropped_frames(frames):
    # step 3 lost: 4 carries a snapshot; step 6 lost: 7 waits (no snapshot), 8 resyncs
    kept = [f for k, f in enumerate(frames, 1) if k not in (3, 6)]
    gen = es.assemble(kept)
    assert gen.steps == [1, 2, 4, 5, 8, 9, 10]
    st, = gen.summary()["streams"]
    assert st["absent_ranges"] == [[3, 3], [6, 7]] and st["absent_steps"] == 3 and st["skipped_windows"] == 1
    full = es.assemble(frames)
    for k in gen.steps:  # what resynced equals the unbroken stream
        assert all(np.array_equal(a, b) for a, b in zip(gen.model.cells(k), full.model.cells(k)))
    with pytest.raises(InputError, match="no step 6"):
        gen.sample(step=6)


def test_several_devices_give_the_union_per_step(frames):
    other = run(config(), stream(2, windows=6), device="cam-2", seed=b"phd-assemble-0002")
    gen = es.assemble(frames + other)
    one, two = es.assemble(frames), es.assemble(other)
    assert gen.steps == list(range(1, 11)) and gen.summary()["devices"] == ["cam-1", "cam-2"]
    for k in (3, 6, 8):
        assert gen.population(k) == one.population(k) + (two.population(k) if k <= 6 else 0)
        assert len(gen.sample(step=k, seed=1)) == gen.population(k)


def test_all_steps_via_the_cli(frames, tmp_path):
    (tmp_path / "f.bin").write_bytes(b"".join(frames))
    r = CliRunner()
    out = r.invoke(main, ["assemble", str(tmp_path / "f.bin"), "-o", str(tmp_path / "g.gen")])
    assert out.exit_code == 0 and "phdstream generator from 10 frame(s)" in out.output
    out = r.invoke(main, ["sample", str(tmp_path / "g.gen"), "--all-steps", "--seed", "1", "-o", "-"])
    assert out.exit_code == 0
    lines = out.stdout.splitlines()
    assert lines[0] == "step,x,y"
    steps = np.array([int(x.split(",")[0]) for x in lines[1:]])
    gen = es.load(tmp_path / "g.gen")
    assert np.array_equal(np.bincount(steps)[1:], [gen.population(k) for k in gen.steps])
    out = r.invoke(main, ["sample", str(tmp_path / "g.gen"), "--step", "4", "-o", "-"])
    assert out.exit_code == 0 and len(out.stdout.splitlines()) == 1 + gen.population(4)
    for args, msg in ((["--all-steps", "-n", "5"], "neither -n nor --step"), (["--step", "11"], "no step 11"),
                      (["-n", "5"], "one step at a time"), ([], "give -n")):
        out = r.invoke(main, ["sample", str(tmp_path / "g.gen"), "-o", "-"] + args)
        assert out.exit_code == 2 and msg in out.output and "Traceback" not in out.output


def test_step_options_on_another_kind_are_refused(tmp_path):
    cfg = es.plan({"t": (0, 50)}, epsilon=1, ram="32K", n_max=10 ** 4)
    gen = es.assemble(es.simulate(cfg, np.linspace(0, 50, 300).reshape(-1, 1), seed=1, runtime="numpy"))
    assert gen.steps is None
    with pytest.raises(InputError, match="stream generator"):
        gen.sample(10, step=1)
    with pytest.raises(InputError, match="stream generator"):
        gen.sample_steps()


def test_rate_bound_budget_and_config_ids(frames):
    bound = run(config(rate_bound=True), stream(1, windows=3), device="cam-9")
    gen = es.assemble(bound)
    assert gen.summary()["epsilon"] == "2" and gen.summary()["rate_bound"] is True
    # the two budgets are two configurations: never combined
    with pytest.raises(MergeError, match="different public configurations"):
        es.assemble(frames + bound)
    with pytest.raises(MergeError, match="force-sum"):
        es.assemble(frames, force_sum=True)
    with pytest.raises(MergeError, match="never summed"):
        Merge("phdstream").add([parse_frame(frames[0])[0].mechs[0]])


def test_replace_neighbours_double_lam_and_spend_twice_p_eps():
    cfg = config()
    cfg["relation"] = "replace"  # a replaced reading may move between two full windows: 2 p.eps
    fr = run(cfg, stream(1, windows=3), device="cam-r")
    assert entry(fr[0])["p"]["lam"] == [12, 2]  # 6 factor / eps
    s = es.assemble(fr).summary()
    assert s["epsilon"] == "4" and s["relation"] == "replace" and s["rate_bound"] is False
    with pytest.raises(SchemaError, match="neither p.eps"):
        parse_frame(_reframe(fr[0], lambda p: p.update(eps=[6, 1])))


def test_a_restarted_device_stream_is_refused(frames):
    again = run(config(), stream(3, windows=2))
    # the same device starts over at step 1 (a snapshot) in later epochs
    relabelled = []
    for i, f in enumerate(again):
        rel = parse_frame(f)[0]
        relabelled.append(_with_epoch(rel, 20 + i))
    with pytest.raises(MergeError, match="restarted"):
        es.assemble(frames + relabelled)


def _with_epoch(rel, epoch):
    """An untagged copy of a frame with another epoch (payload re-encoded)."""
    _, a, b, _, _ = split_envelope(rel.raw)
    p = msgpack.unpackb(rel.raw[a:b], raw=False)
    p["epoch"] = epoch
    body = msgpack.packb(p)
    return rel.raw[:a - 5] + b"\xc6" + len(body).to_bytes(4, "big") + body + b"\xc0"


def _reframe(frame, change):
    """An untagged frame whose phdstream entry (or payload) ``change`` altered."""
    _, a, b, _, _ = split_envelope(frame)
    p = msgpack.unpackb(frame[a:b], raw=False)
    change(p)
    body = msgpack.packb(p)
    return frame[:a - 5] + b"\xc6" + len(body).to_bytes(4, "big") + body + b"\xc0"


@pytest.mark.parametrize("change, match", [
    (lambda p: p.update(eps=[3, 1]), "neither p.eps"),
    (lambda p: p["mechs"][0].update(nv=p["mechs"][0]["nv"] + 1), "bits|bitmap"),
    (lambda p: p["mechs"][0].update(d=p["mechs"][0]["d"][:-1]), "int32"),
    (lambda p: p["mechs"][0]["p"].update(lam=[1, 1]), "lam"),
    (lambda p: p["mechs"][0].update(extra=1), "keys"),
    (lambda p: p["mechs"][0]["p"].update(max_nodes=1 << 30), "max_nodes"),
    (lambda p: p["mechs"].append(dict(p["mechs"][0])), "only mechanism"),
    # values a device never sends (its spec check refuses them)
    (lambda p: p["mechs"][0]["p"].update(hi=[(1 << 29), 127]), "hi - lo <= 2\\*\\*29 - 1"),
    (lambda p: p["mechs"][0]["p"].update(max_nodes=2), "max_nodes must be an integer in \\[3,"),
    (lambda p: p["mechs"][0]["p"].update(theta=1), "theta must be an integer in \\[0, 0\\]"),
    (lambda p: p["mechs"][0]["p"].update(counter="tree", horizon=100), "power of 2"),
    (lambda p: p["mechs"][0]["p"].update(eps=[1, 10 ** 6 + 1], lam=[6 * 10 ** 6 + 6, 1], delta=1 << 30),
     "den <= 1000000"),
    # λ = 6/ε = 6e6 > 2**22 (the frame's eps is twice p.eps: an unbound stream)
    (lambda p: (p.update(eps=[2, 10 ** 6]), p["mechs"][0]["p"].update(eps=[1, 10 ** 6], lam=[6 * 10 ** 6, 1],
                                                                       delta=1 << 30)),
     "split test: noise scale 6000000/1 exceeds 2\\*\\*22"),
    # λ = 1.2e6 passes, the tree counter's (log2 T_h + 1)·2/ε = 17·2·2e5 = 6.8e6 does not
    (lambda p: (p.update(eps=[2, 200000]), p["mechs"][0]["p"].update(
        eps=[1, 200000], lam=[1200000, 1], delta=831777, counter="tree", horizon=1 << 16)),
     "counter: noise scale 6800000/1 exceeds 2\\*\\*22"),
])
def test_corrupt_entries_are_refused(frames, change, match):
    with pytest.raises(SchemaError, match=match) as e:
        parse_frame(_reframe(frames[0], change))
    assert "\n" not in str(e.value)  # one clear line


def test_a_store_keeps_what_it_accepted(frames, tmp_path):
    """A store holds the frames that verified; a corrupt one is refused at the
    door and the stream assembles from the store as from the files."""
    path = str(tmp_path / "s.db")
    with Store(path, create=True) as st:
        st.put_many([parse_frame(f)[0] for f in frames])
    for change in (lambda p: p["mechs"][0].update(nv=0), lambda p: p["mechs"][0]["p"].update(theta=1),
                   lambda p: p["mechs"][0]["p"].update(max_nodes=2)):
        with pytest.raises(FrameError):
            parse_frame(_reframe(frames[4], change))
    a, b = es.assemble(store=path), es.assemble(frames)
    assert a.to_bytes() == b.to_bytes()


def test_range_query_error_of_the_sample_is_small():
    """The §5.4 metric on a simple stream (one cluster, a quarter deleted per
    window) at a generous budget: the synthetic snapshot of the last step
    answers medium and large queries far better than a uniform sample of
    the same size (the answer of a generator that learnt nothing)."""
    cfg = config(eps=[8, 1], depth=12, max_nodes=2047, batch_max=2000, rate_bound=True)
    windows = stream(5, windows=6, per=300)
    gen = es.assemble(run(cfg, windows))
    live = {}
    for ev in windows:
        for x, y, op in ev:
            live[(x, y)] = live.get((x, y), 0) + op
    truth = np.array([k for k, n in live.items() for _ in range(n)], dtype=float)
    synth = gen.sample_array(step=6, seed=4).astype(float)
    rng = np.random.default_rng(0)
    hi = np.array(BOX[1], float) + 1
    uniform = rng.uniform([0, 0], hi, size=synth.shape)
    assert abs(len(synth) - len(truth)) < 0.25 * len(truth)
    for kind in ("medium", "large"):
        rects = metric.query_set(rng, [0, 0], hi, kind)
        t = metric.range_counts(truth, rects)
        r = metric.relative_error(t, metric.range_counts(synth, rects), len(truth))
        r_uniform = metric.relative_error(t, metric.range_counts(uniform, rects), len(truth))
        assert r < 0.25 * r_uniform, (kind, r, r_uniform)


def test_flipped_bytes_give_frame_errors_or_a_clean_assembly(frames):
    """Random byte flips anywhere in phdstream frames (untagged): each frame
    either parses or raises a FrameError; assembling the ones that parse
    either works or raises an edgesynth error, never anything else."""
    rng = np.random.default_rng(8)
    for _ in range(150):
        bad = []
        for f in frames[:5]:
            b = bytearray(f)
            for i in rng.integers(0, len(b), size=3):
                b[i] ^= 1 << int(rng.integers(8))
            bad.append(bytes(b))
        rels = []
        for b in bad:
            try:
                rels.append(parse_frame(b)[0])
            except FrameError:
                pass
        try:
            es.assemble(rels) if rels else None
        except (EdgesynthError, InputError):
            pass
