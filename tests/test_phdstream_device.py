"""Device PHDStream (agent/phdstream): the efficient Algorithms 6/7 against the
dense Algorithm 1/3 under shared noise, the counters' variances against their
formulas, the pool-full and batch-full rules, the per-window payload, and the
same frames under the MicroPython unix port.
"""
import math
import os
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import msgpack
import pytest

from edgesynth.agent.errors import ConfigError, ReadingError, SealedError
from edgesynth.agent.msgpack_out import Encoder
from edgesynth.agent.phdstream import PHDStream, counters
from edgesynth.firmware_shims.drbg import seeded_source

sys.path.insert(0, str(Path(__file__).resolve().parent))
from phd_helpers import encoded as frame  # noqa: E402
from phd_reference import DensePHD  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
VECTOR = REPO / "tests" / "mp" / "phd_vector.py"
PAYLOAD_KEYS = {"bits", "d", "kind", "nv", "p", "snap", "t", "v"}
PARAM_KEYS = {"beta", "block", "counter", "delta", "depth", "eps", "fold", "hi", "horizon", "lam", "lo",
              "max_nodes", "names", "noise", "snap", "theta"}


def spec(**kw):
    s = {"kind": "phdstream", "lo": [0, 0], "hi": [64, 64], "depth": 6, "eps": [4, 1],
         "counter": "simple", "max_nodes": 200, "batch_max": 1000, "snap": 3}
    s.update(kw)
    return s


def make(s, seed, factor=1):
    m = PHDStream(s, factor)
    m.draw_noise(seeded_source(seed))
    return m


def feed(m, events):
    for x, sgn in events:
        m.update(tuple(x) + (sgn,))


def stream(steps, seed=5):
    """Windows of signed events: a cluster that drifts, deletions of earlier points."""
    import random
    r = random.Random(seed)
    live = []
    out = []
    for t in range(steps):
        ev = []
        cx, cy = 10 + 5 * t, 50 - 4 * t
        for _ in range(120 if t == 0 else 40):
            if live and r.random() < 0.3:
                ev.append((live.pop(r.randrange(len(live))), -1))
            else:
                x = (min(64, max(0, int(r.gauss(cx, 6)))), min(64, max(0, int(r.gauss(cy, 6)))))
                ev.append((x, 1))
                live.append(x)
        out.append(ev)
    return out


def union_nodes(m):
    """(pool index, depth, path) of every union node, canonical BFS order."""
    out = [(0, 0, 0)]
    i = 0
    while i < len(out):
        v, k, p = out[i]
        c = m.kid[v]
        if c:
            out.append((c, k + 1, 2 * p))
            out.append((c + 1, k + 1, 2 * p + 1))
        i += 1
    return out


def exact_g(m):
    """G(v) = Ca + Cn + Cd from the device pool, exactly; also checks Cd."""
    nodes = union_nodes(m)
    ca = {0: Fraction(0)}
    below = {v: 0 for v, _, _ in nodes}
    for v, _, _ in reversed(nodes):
        c = m.kid[v]
        if c:
            below[v] = below[c] + m.cn[c] + below[c + 1] + m.cn[c + 1]
    g = {}
    for v, k, p in nodes:
        assert m.cd[v] == below[v], "Cd must be the Cn sum over strict descendants"
        c = m.kid[v]
        if c:
            ca[c] = ca[c + 1] = (ca[v] + m.cn[v]) / 2
        g[(k, p)] = ca[v] + m.cn[v] + m.cd[v]
    return g


@pytest.mark.parametrize("counter,extra,max_nodes", [
    ("simple", {}, 200), ("block", {"block": 3}, 200), ("tree", {"horizon": 4}, 200),
    ("simple", {}, 15),
])
def test_dense_equals_efficient_under_shared_noise(counter, extra, max_nodes):
    s = spec(counter=counter, max_nodes=max_nodes, **extra)
    m = make(s, b"shared")
    ref = DensePHD(s["lo"], s["hi"], s["depth"], 4, 1, counter=counter, block=extra.get("block", 8),
                   horizon=extra.get("horizon", 128), max_nodes=max_nodes)
    rng_ref = seeded_source(b"shared")
    assert m.delta == ref.delta
    grew = 0
    for events in stream(12):
        feed(m, events)
        assert m.nb == len(events)
        m.step()
        bits, ys = ref.step(rng_ref, events)
        got_bits = [m.bits[i >> 3] >> (i & 7) & 1 for i in range(m.nv)]
        assert got_bits == bits
        assert list(m.ys[:m.nl]) == ys
        for v, k, p in union_nodes(m):
            assert m.cn[v] == ref.cn[(k, p)]
        g = exact_g(m)
        masses = ref.masses()
        for v, val in g.items():
            assert val == ref.G[v]
            assert math.floor(val) == masses[v]         # no saturation: floor(Ext_T) = floor(Ca) + Cn + Cd
        # consistency of the dense G (Ext_T keeps it in C(T))
        for (k, p), val in ref.G.items():
            if k < s["depth"]:
                assert val == ref.G[(k + 1, 2 * p)] + ref.G[(k + 1, 2 * p + 1)]
        grew = max(grew, m.nv)
    assert grew >= 9, "the test stream should grow a real tree"
    assert m.used <= max_nodes
    if max_nodes == 15:
        assert m.used == 15 and m.refused_splits > 0


def test_pool_full_refuses_splits_without_allocating():
    m = make(spec(max_nodes=5, eps=[8, 1]), b"pool")
    cn, kid = m.cn, m.kid
    for events in stream(6):
        feed(m, events)
        m.step()
        assert m.cn is cn and m.kid is kid and len(m.cn) == 5
        frame(m)
    assert m.used == 5 and m.refused_splits > 0
    # a full batch refuses, storing nothing, and takes events again after the step
    m2 = make(spec(batch_max=3), b"b")
    for n in range(5):
        m2.update((1, 1, 1))
    assert m2.nb == 3 and m2.refused_events == 2
    m2.step()
    assert m2.nb == 0 and list(m2.codes) == [0, 0, 0] and list(m2.signs) == [0, 0, 0]
    m2.update((1, 1, -1))
    assert m2.nb == 1 and m2.refused_events == 2


def dlap_var(num, den):
    """Variance of discrete Laplace of scale num/den: 2a/(1-a)^2, a = e^(-den/num)."""
    a = math.exp(-den / num)
    return 2 * a / (1 - a) ** 2


@pytest.mark.parametrize("counter,extra,n,noises,scale", [
    ("simple", {}, 20, 20, (2, 1)),                       # Var = n·V(1/ε_c)
    ("block", {"block": 8}, 20, 2 + 4, (4, 1)),            # n = 2·8 + 4: (q + r)·V(2/ε_c)
    ("block", {"block": 8}, 48, 6 + 0, (4, 1)),            # n = 48: Block-8 beats Simple from here
    ("tree", {"horizon": 16}, 11, 3, (2 * 5, 1)),         # popcount(11)·V((log2 16 + 1)/ε_c)
    ("tree", {"horizon": 16}, 16, 1, (2 * 5, 1)),
])
def test_counter_variance_matches_formula(counter, extra, n, noises, scale):
    nodes = 3000
    m = make(spec(counter=counter, max_nodes=nodes, eps=[1, 1], **extra), b"var" + counter.encode())
    total = [0] * nodes
    for _ in range(n):
        for v in range(nodes):
            y = counters.count(m, v, 1)        # one event per activation: the output tracks n
            m.cn[v] += y
            total[v] += y
    mean = sum(total) / nodes
    var = sum((x - mean) ** 2 for x in total) / (nodes - 1)
    want = noises * dlap_var(*scale)
    # sample variance of a sum of k Laplace-like draws: relative sd
    # sqrt((2 + κ)/N) with excess kurtosis κ <= 3; 5 sd
    assert abs(var / want - 1) < 5 * math.sqrt(5 / nodes)
    assert abs(mean - n) < 5 * math.sqrt(want / nodes)
    if counter == "block" and n == 48:
        assert want < n * dlap_var(2, 1)


def test_payload_fields_and_snapshots():
    m = make(spec(counter="block", block=4, snap=3, names=["lon", "lat"], op="ev"), b"wire")
    for events in stream(7):
        feed(m, events)
        m.step()
        p = msgpack.unpackb(frame(m), raw=False)
        assert set(p) == PAYLOAD_KEYS and set(p["p"]) == PARAM_KEYS
        assert p["p"]["names"] == ["lon", "lat"]  # the channels', never the op column's
        assert p["kind"] == "phdstream" and p["v"] == 1 and p["t"] == m.t
        assert p["p"]["lam"] == [6, 4] and p["p"]["noise"] == "dlap" and p["p"]["delta"] >= 6 / 4 * math.log(2)
        bits = p["bits"]
        # parse the bitmap alone: a FIFO from the root, one bit per node
        n, pending, zeros = 0, 1, 0
        while pending:
            b = bits[n >> 3] >> (n & 7) & 1
            pending += 2 * b - 1
            zeros += 1 - b
            n += 1
        assert n == p["nv"] and len(bits) == (n + 7) // 8 and len(p["d"]) == 4 * zeros
        if p["t"] == 1 or p["t"] % 3 == 0:
            snap = p["snap"]
            assert set(snap) == {"cn", "kids", "n"} and snap["n"] == m.used
            order = union_nodes(m)
            assert [int.from_bytes(snap["cn"][4 * i:4 * i + 4], "little", signed=True)
                    for i in range(snap["n"])] == [m.cn[v] for v, _, _ in order]
        else:
            assert p["snap"] is None


def test_config_refused():
    for bad in ({"depth": 29}, {"eps": [1, 0]}, {"counter": "fast"}, {"counter": "tree", "horizon": 12},
                {"max_nodes": 2}, {"skecth": 1}, {"hi": [64, 0]}, {"names": ["a", "a"]}, {"names": ["a", ""]},
                {"names": ["a", "b"], "op": "b"}):
        with pytest.raises(ConfigError):
            PHDStream(spec(**bad))


def test_micropython_frames_equal_cpython():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO)
    cp = subprocess.run([sys.executable, str(VECTOR)], cwd=REPO, env=env, capture_output=True, text=True,
                        timeout=120)
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    assert len(lines) == 56 and len(set(lines)) == 56
    exe = shutil.which("micropython")
    if exe is None:
        pytest.skip("no `micropython` on PATH")
    env = dict(os.environ)
    env["MICROPYPATH"] = str(REPO)
    mp = subprocess.run([exe, "-X", "heapsize=256wK", str(VECTOR)], cwd=REPO, env=env, capture_output=True,
                        text=True, timeout=300)
    assert mp.returncode == 0, mp.stderr + mp.stdout
    assert mp.stdout.splitlines() == lines


@pytest.mark.parametrize("counter,extra,per_node", [
    ("simple", {}, 40), ("block", {"block": 8}, 56), ("tree", {"horizon": 16}, 40 + 4 + 8 * 5),
])
def test_state_bytes_per_node(counter, extra, per_node):
    """RAM is fixed at construction: linear in max_nodes (plus 5 B per batch slot)."""
    sizes = [PHDStream(spec(counter=counter, max_nodes=n, batch_max=100, **extra)).counter_bytes()
             for n in (800, 1600)]
    assert abs((sizes[1] - sizes[0]) / 800 - per_node) <= 0.25
    assert sizes[0] >= 800 * per_node + 500


def test_floor_split_rate():
    """An empty node at the floor splits with P[Z > delta] = a^(delta+1)/(1+a),
    a = e^(-1/λ): at most the continuous 1/(2β) since delta >= λ ln 2."""
    rng = seeded_source(b"floor")
    visits = splits = 0
    for _ in range(1500):
        m = PHDStream(spec(eps=[1, 1], depth=2, max_nodes=7))
        m.draw_noise(rng)
        m.step()                      # empty window: depth-1 nodes sit at the floor
        if m.nv > 1:
            for i in (1, 2):
                visits += 1
                splits += m.bits[0] >> i & 1
    a = math.exp(-1 / 6)
    want = a ** (m.delta + 1) / (1 + a)
    assert m.delta == 5 and want < 0.25
    assert abs(splits / visits - want) < 5 * math.sqrt(want * (1 - want) / visits)


def test_saturation_matches_reference(monkeypatch):
    """Cn and Cd saturate at ±SAT (2**27 on the device; 30 here so that the
    test stream reaches it): trees and increments still equal the dense
    reference that saturates Cn and Cd the same way."""
    monkeypatch.setattr(counters, "SAT", 30)
    s = spec(eps=[8, 1])
    m = make(s, b"sat")
    ref = DensePHD(s["lo"], s["hi"], s["depth"], 8, 1, sat=30)
    rng_ref = seeded_source(b"sat")
    hit = False
    for events in stream(10):
        feed(m, events)
        m.step()
        bits, ys = ref.step(rng_ref, events)
        assert [m.bits[i >> 3] >> (i & 7) & 1 for i in range(m.nv)] == bits
        assert list(m.ys[:m.nl]) == ys
        for v, k, p in union_nodes(m):
            assert m.cn[v] == ref.cn[(k, p)] and -30 <= m.cn[v] <= 30 and -30 <= m.cd[v] <= 30
            hit = hit or abs(m.cd[v]) == 30 or abs(m.cn[v]) == 30
    assert hit, "the stream must saturate some node"
    assert ref.masses() != {v: math.floor(val) for v, val in ref.G.items()}, "saturation changes the masses"


def test_counters_saturate_without_overflow():
    """Counter internals fed counts near the limits stay within ±SAT and the
    output increment within int32."""
    for counter, extra in (("block", {"block": 4}), ("tree", {"horizon": 8})):
        m = make(spec(counter=counter, max_nodes=3, **extra), b"satc")
        for _ in range(40):
            y = counters.count(m, 1, 1 << 22)
            m.cn[1] = counters.sat(m.cn[1] + y)
            assert abs(y) < 1 << 30
        assert m.cn[1] == counters.SAT
        internals = (m.ba, m.bs, m.bsl) if counter == "block" else (m.alpha, m.ahat)
        assert all(abs(a) <= counters.SAT for arr in internals for a in arr)


def test_update_refuses_malformed_readings():
    m = make(spec(), b"r")
    for bad in ((1, 2, 0), (1, 2, 2), (1, 2, True), (1, 2, 1.0), (1, 2, "+1"), (1.5, 2, 1),
                (float("nan"), 2, 1), (True, 2, 1), (1, None, 1), (1, 2), (1, 2, 1, 1)):
        with pytest.raises(ReadingError):
            m.update(bad)
    assert m.nb == 0
    m.update((-10 ** 20, 10 ** 20, -1))   # outside the box: clamped into the corner cells
    m.update((64, 64, 1))                 # the closed top face
    assert m.nb == 2 and m.signs[0] == 0 and m.signs[1] == 1
    assert m.codes[0] == 0b010101 and m.codes[1] == 0b111111
    m.sealed = True
    with pytest.raises(SealedError):
        m.update((1, 2, 1))


def test_top_face_at_the_largest_span():
    """hi - lo = 2**29 - 1 is the largest span (2 * remainder < 2**30); 2**29 is refused."""
    m = make(spec(lo=[0], hi=[(1 << 29) - 1], depth=28, names=["a"]), b"f")
    m.update(((1 << 29) - 1, 1))
    m.update((0, 1))
    assert m.codes[0] == (1 << 28) - 1 and m.codes[1] == 0
    with pytest.raises(ConfigError):
        PHDStream(spec(lo=[0], hi=[1 << 29], names=["a"]))
    with pytest.raises(ConfigError):
        PHDStream(spec(lo=[0.0, 0], hi=[64.0, 64]))


def test_protocol_names_budget_scales():
    m = PHDStream(spec())
    assert m.names == ["x0", "x1", "op"] and m.kind == "phdstream" and not m.sealed
    assert PHDStream(spec(names=["lon", "lat"], op="ev")).names == ["lon", "lat", "ev"]
    with pytest.raises(ConfigError):
        PHDStream(spec(names=["lon", "op"]))
    assert m.budget() == (8, 1)                                  # 2 eps: a refused event can swap
    assert PHDStream(spec(rate_bound=True)).budget() == (4, 1)
    two = PHDStream(spec(), 2)
    assert two.budget() == (8, 1) and PHDStream(spec(rate_bound=True), 2).budget() == (4, 1)  # replace too
    assert (two.lam_num, two.lam_den, two.c_num) == (2 * m.lam_num, m.lam_den, 2 * m.c_num)
    assert two.delta == -(-(two.lam_num * 1143) // (two.lam_den * 1649))
    with pytest.raises(ConfigError):
        PHDStream(spec(rate_bound=1))
    with pytest.raises(ConfigError):
        make(spec(), b"e").encode(Encoder())                     # nothing to release before a step
    with pytest.raises(ConfigError):
        PHDStream(spec()).step()                                 # no DRBG yet


@pytest.mark.parametrize("eps,factor,counter,extra,ok", [
    ([2, 10 ** 6], 1, "simple", {}, True),           # λ = 3e6 <= 2**22
    ([1, 10 ** 6], 1, "simple", {}, False),          # λ = 6e6 > 2**22
    ([2, 10 ** 6], 2, "simple", {}, False),          # factor 2 doubles λ
    ([10, 10 ** 6], 1, "tree", {"horizon": 1 << 16}, True),    # counter scale 17·2e5 = 3.4e6
    ([5, 10 ** 6], 1, "tree", {"horizon": 1 << 16}, False),    # 6.8e6 (λ = 1.2e6 is fine)
])
def test_noise_scales_capped(eps, factor, counter, extra, ok):
    """Every noise scale (times factor) goes through spec.check_scale: <= 2**22."""
    s = spec(eps=eps, counter=counter, **extra)
    if ok:
        PHDStream(s, factor)
    else:
        with pytest.raises(ConfigError, match="2\\*\\*22"):
            PHDStream(s, factor)


def test_split_statistic_is_path_monotone_and_moves_on_one_path():
    """PrivTree's proof conditions on reachable states (reference, noisy G with
    deletions): c(child) <= c(parent); a neighbour with one more insert moves
    c by exactly +1 on that event's path and nowhere else; one more delete
    moves no c. The printed statistic floor(G(t-1) + ∇F(t)) fails the first
    condition on the same states."""
    s = spec(eps=[1, 1])
    ref = DensePHD(s["lo"], s["hi"], s["depth"], 1, 1)
    rng = seeded_source(b"mono")
    D = s["depth"]
    probe = [(3, 60), (33, 33), (64, 0)]
    old_violations = 0
    for t, events in enumerate(stream(10)):
        c = ref.statistic(events)
        grad = ref.counts(events, signed=True)
        for (k, p), val in c.items():
            if k:
                assert val <= c[(k - 1, p >> 1)]
                old = math.floor(ref.G[(k, p)] + grad[(k, p)])
                old_violations += old > math.floor(ref.G[(k - 1, p >> 1)] + grad[(k - 1, p >> 1)])
        for x in probe:
            code = ref.code(x)
            on_path = {(k, code >> (D - k)) for k in range(D)}
            plus = ref.statistic(events + [(x, 1)])
            assert {v: plus[v] - c[v] for v in c} == {v: int(v in on_path) for v in c}
            assert ref.statistic(events + [(x, -1)]) == c
        ref.step(rng, events)
    assert old_violations > 0, "the printed statistic should break monotonicity on this stream"


def test_a_step_keeps_no_segment_of_the_batch_in_its_queue():
    """q_hi[i] - q_lo[i] is the window's true count in node i (q_hi[0] the
    batch size): the step clears them with the batch, for every visited node."""
    m = make(spec(snap=1000), b"queue")
    for events in stream(4):
        feed(m, events)
        m.step()
        assert m.nv > 1 and m.nb == 0
        assert not any(m.q_lo) and not any(m.q_hi)
        assert not any(m.codes) and not any(m.signs)


def _flaky_draw(monkeypatch, module, fail_at):
    """Patch ``module.draw`` to raise EntropyError at its ``fail_at``-th call, once."""
    from edgesynth.firmware_shims import EntropyError
    real = module.draw
    calls = [0]

    def draw(rng, num, den):
        calls[0] += 1
        if calls[0] == fail_at:
            raise EntropyError("DRBG reseed interval reached")
        return real(rng, num, den)
    monkeypatch.setattr(module, "draw", draw)
    return EntropyError


@pytest.mark.parametrize("where", ["split", "counter"])
def test_a_step_that_raises_part_way_fails_closed(monkeypatch, where):
    """An exception mid-step (here the DRBG's reseed limit, once) leaves the
    state broken: the batch is wiped, and update, step and encode raise
    StateError, so a retry cannot apply the half-done step twice."""
    from edgesynth.agent import phdstream
    from edgesynth.agent.errors import StateError
    m = make(spec(), b"broken")
    feed(m, stream(1)[0])
    m.step()
    feed(m, stream(2)[1])
    assert m.nb > 0
    err = _flaky_draw(monkeypatch, phdstream if where == "split" else counters, 3)
    with pytest.raises(err):
        m.step()
    assert m.broken and m.nb == 0 and not any(m.codes) and not any(m.signs)
    assert not any(m.q_lo) and not any(m.q_hi)
    for call in (m.step, lambda: m.update((1, 2, 1)), lambda: m.encode(Encoder())):
        with pytest.raises(StateError, match="failed part way"):
            call()
    assert m.t == 1


def test_an_agent_whose_step_raised_refuses_to_release(monkeypatch):
    """Agent.release runs the window's step: after it raised, a retry raises
    StateError (no frame with a double-counted step) and next_window refuses."""
    from edgesynth import agent
    from edgesynth.agent import phdstream
    from edgesynth.agent.errors import StateError
    s = spec(names=["x", "y"])
    cfg = {"format": 1, "epsilon": list(PHDStream(s).budget()), "relation": "add-remove", "mechanisms": [s]}
    a = agent.Agent(cfg, seed=b"agent-broken")
    for x, sgn in stream(1)[0]:
        a.update(tuple(x) + (sgn,))
    err = _flaky_draw(monkeypatch, phdstream, 2)
    with pytest.raises(err):
        a.release()
    with pytest.raises(StateError):
        a.release()
    with pytest.raises(ConfigError):
        a.next_window()
    with pytest.raises(StateError):
        a.update((1, 2, 1))


def test_small_int_limits():
    """MicroPython small ints (< 2**30): the bias delta is computed exactly
    without the products λ_num·1143 and λ_den·1649 (both past 2**30 at the
    largest eps terms); snap stops at 2**30 - 1; the diagnostics saturate;
    bounds outside the C core's int32 range are refused."""
    from fractions import Fraction

    from edgesynth.agent import phdstream
    for eps, factor in (([4, 1], 1), ([1, 10 ** 6], 1), ([10 ** 8, 10 ** 6], 2), ([99999989, 999983], 2),
                        ([3, 7], 2)):
        if Fraction(6 * eps[1] * factor, eps[0]) > 1 << 22:
            continue
        m = PHDStream(spec(eps=eps), factor)
        lam = Fraction(m.lam_num, m.lam_den)
        assert m.delta == math.ceil(lam * Fraction(1143, 1649)) and m.delta >= lam * Fraction(math.log(2))
    assert max(6 * 10 ** 6 * 2, 100 * 10 ** 6) < 1 << 27  # _bias's inputs stay small
    assert PHDStream(spec(snap=(1 << 30) - 1)).snap_every == (1 << 30) - 1
    with pytest.raises(ConfigError):
        PHDStream(spec(snap=1 << 30))
    m = make(spec(batch_max=1), b"cap")
    m.refused_events = phdstream.MAX_COUNT - 1
    feed(m, [((1, 1), 1)] * 4)
    assert m.refused_events == phdstream.MAX_COUNT == (1 << 30) - 1
    for lo, hi in (([-(1 << 31) + 1, 0], [-(1 << 31) + 65, 64]), ([0, (1 << 31) - 64], [64, (1 << 31) - 1])):
        with pytest.raises(ConfigError, match="2\\*\\*31 - 2"):
            PHDStream(spec(lo=lo, hi=hi))
    PHDStream(spec(lo=[-(1 << 31) + 2, (1 << 31) - 66], hi=[-(1 << 31) + 66, (1 << 31) - 2]))
