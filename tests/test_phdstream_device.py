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

from edgesynth.agent.errors import ConfigError
from edgesynth.agent.msgpack_out import Encoder
from edgesynth.agent.phdstream import PHDStream
from edgesynth.firmware_shims.drbg import seeded_source

sys.path.insert(0, str(Path(__file__).resolve().parent))
from phd_reference import DensePHD  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
VECTOR = REPO / "tests" / "mp" / "phd_vector.py"
PAYLOAD_KEYS = {"bits", "d", "kind", "nv", "p", "snap", "t", "v"}
PARAM_KEYS = {"beta", "block", "counter", "delta", "depth", "eps", "hi", "horizon", "lam", "lo",
              "max_nodes", "noise", "snap", "theta"}


def spec(**kw):
    s = {"kind": "phdstream", "lo": [0, 0], "hi": [64, 64], "depth": 6, "eps": [4, 1],
         "counter": "simple", "max_nodes": 200, "batch_max": 1000, "snap": 3}
    s.update(kw)
    return s


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


def frame(m):
    chunks = []
    enc = Encoder()
    enc.reset(lambda buf, n: chunks.append(bytes(buf[:n])))
    m.encode(enc)
    data = b"".join(chunks)
    assert len(data) == enc.n
    return data


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
    m = PHDStream(s, seeded_source(b"shared"))
    ref = DensePHD(s["lo"], s["hi"], s["depth"], 4, 1, counter=counter, block=extra.get("block", 8),
                   horizon=extra.get("horizon", 128), max_nodes=max_nodes)
    rng_ref = seeded_source(b"shared")
    assert m.delta == ref.delta
    grew = 0
    for events in stream(12):
        for x, sgn in events:
            assert m.add(x, sgn)
        m.step()
        bits, ys = ref.step(rng_ref, events)
        got_bits = [m.bits[i >> 3] >> (i & 7) & 1 for i in range(m.nv)]
        assert got_bits == bits
        assert list(m.ys[:m.nl]) == ys
        g = exact_g(m)
        for v, val in g.items():
            assert val == ref.G[v]
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
    m = PHDStream(spec(max_nodes=5, eps=[8, 1]), seeded_source(b"pool"))
    cn, kid = m.cn, m.kid
    for events in stream(6):
        for x, sgn in events:
            m.add(x, sgn)
        m.step()
        assert m.cn is cn and m.kid is kid and len(m.cn) == 5
        frame(m)
    assert m.used == 5 and m.refused_splits > 0
    # a full batch refuses, storing nothing, and takes events again after the step
    m2 = PHDStream(spec(batch_max=3), seeded_source(b"b"))
    assert [m2.add((1, 1), 1) for _ in range(4)] == [True, True, True, False]
    m2.step()
    assert m2.nb == 0 and list(m2.codes) == [0, 0, 0] and m2.add((1, 1), -1)


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
    m = PHDStream(spec(counter=counter, max_nodes=nodes, eps=[1, 1], **extra), seeded_source(b"var" + counter.encode()))
    total = [0] * nodes
    for _ in range(n):
        for v in range(nodes):
            y = m._count(v, 1)        # one event per activation: the output tracks n
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
    m = PHDStream(spec(counter="block", block=4, snap=3), seeded_source(b"wire"))
    for events in stream(7):
        for x, sgn in events:
            m.add(x, sgn)
        m.step()
        p = msgpack.unpackb(frame(m), raw=False)
        assert set(p) == PAYLOAD_KEYS and set(p["p"]) == PARAM_KEYS
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
                {"max_nodes": 2}, {"skecth": 1}, {"hi": [64, 0]}):
        with pytest.raises(ConfigError):
            PHDStream(spec(**bad), seeded_source(b"c"))


def test_micropython_frames_equal_cpython():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO)
    cp = subprocess.run([sys.executable, str(VECTOR)], cwd=REPO, env=env, capture_output=True, text=True,
                        timeout=120)
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    assert len(lines) == 30 and len(set(lines)) == 30
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
    ("simple", {}, 36), ("block", {"block": 8}, 52), ("tree", {"horizon": 16}, 36 + 4 + 8 * 5),
])
def test_state_bytes_per_node(counter, extra, per_node):
    """RAM is fixed at construction: linear in max_nodes (plus 5 B per batch slot)."""
    sizes = [PHDStream(spec(counter=counter, max_nodes=n, batch_max=100, **extra), seeded_source(b"m")).state_bytes()
             for n in (800, 1600)]
    assert abs((sizes[1] - sizes[0]) / 800 - per_node) <= 0.25
    assert sizes[0] >= 800 * per_node + 500


def test_floor_split_rate():
    """An empty node at the floor splits with P[Z > delta] = a^(delta+1)/(1+a),
    a = e^(-1/λ): at most the continuous 1/(2β) since delta >= λ ln 2."""
    rng = seeded_source(b"floor")
    visits = splits = 0
    for _ in range(1500):
        m = PHDStream(spec(eps=[1, 1], depth=2, max_nodes=7), rng)
        m.step()                      # empty window: depth-1 nodes sit at the floor
        if m.nv > 1:
            for i in (1, 2):
                visits += 1
                splits += m.bits[0] >> i & 1
    a = math.exp(-1 / 6)
    want = a ** (m.delta + 1) / (1 + a)
    assert m.delta == 5 and want < 0.25
    assert abs(splits / visits - want) < 5 * math.sqrt(want * (1 - want) / visits)
