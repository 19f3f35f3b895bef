"""Empirical DP audit of the device PHDStream on neighbouring streams, with planted mutants.

As tests/test_dp_audit.py: every run is the real device (agent/phdstream) with
its own fixed seed, the two streams draw from disjoint seeds, and the released
output (split bits, leaf increments) is bucketed by events fixed in advance.
ε-DP says P_hi(E) <= e^ε P_lo(E) for every event E; an audit rejects when the
Clopper-Pearson lower bound of P_hi(E) exceeds e^ε times the upper bound of
P_lo(E), each bound at level α/4 (two events, two bounds each, α = 1e-6), so a
correct mechanism is rejected with probability at most α whatever the seed.

The bound audited is the one the privacy argument gives for that neighbour
(docs/mechanisms/phdstream.md, "Privacy argument"): a deletion enters
no split test, so the tree's distribution is the same under both streams and
the whole release must be ε/2-DP (the counters' share); an insertion costs ε
(tree ε/2 + counters ε/2); the tree alone must be ε/2-DP.

Scenarios (1-D box [0, 64), one event at x = 10, in window 2 of 3):

* deletion: the leaf count moves by 1, ratio exactly e^(ε/2) (the audit is as
  sharp as the guarantee); mutant "counter noise halved" (ratio e^ε) rejected;
* insertion: E_up = {root splits, the leaf holding x has y >= 1}, E_down =
  {root does not split, y <= -1}; ratio up to e^(ε/6 + ε/2) against e^ε
  (PrivTree's bound is not tight at depth 1);
* refused event (``batch_max`` = 1, no ``rate_bound``): the neighbour that adds
  an event before a full batch's last one swaps which event is counted; the
  split statistic is the same, two leaf counts move: ratio exactly e^ε, twice
  the counters' share. The audit rejects "refused events are free" (e^(ε/2))
  and accepts the 2ε accounting (budget() without rate_bound);
* the tree on a reachable leaking state (G rising along a path: noisy masses
  with deletions make it reachable): the printed statistic floor(G + ∇F)
  (planted in the dense reference) makes all six path nodes' tests move, ratio
  e^(6/λ) = e^ε for the tree alone, rejected against its share e^(ε/2); on
  the same state and the event "the whole path to x splits", the device
  without the min over P(parent) (P = max(g, 0), planted by editing its
  source) is rejected too, and the device's path-monotone statistic passes.
"""
import math
import sys
from pathlib import Path

import pytest
from scipy.stats import beta

import edgesynth.agent.dlap as dlap
from edgesynth.agent.phdstream import PHDStream
from edgesynth.firmware_shims.drbg import seeded_source

sys.path.insert(0, str(Path(__file__).resolve().parent))
from phd_reference import DensePHD  # noqa: E402

ALPHA = 1e-6
X = 10                     # the neighbour's event: left half at every level


def spec(eps, depth=1, **kw):
    s = {"kind": "phdstream", "lo": [0], "hi": [64], "names": ["x"], "depth": depth, "eps": [eps, 1],
         "counter": "simple", "max_nodes": (2 << depth) + 1, "batch_max": 4, "rate_bound": True,
         "snap": 1000}
    s.update(kw)
    return s


def cp_low(k, n, a):
    return beta.ppf(a, k, n - k + 1) if k > 0 else 0.0


def cp_high(k, n, a):
    return beta.ppf(1 - a, k + 1, n - k) if k < n else 1.0


def ratio_bounds(counts_hi, counts_lo, n):
    """Lower bounds of P_hi(E)/P_lo(E) for each event, every bound at level α/(2·events)."""
    a = ALPHA / (2 * len(counts_hi))
    return [cp_low(h, n, a) / cp_high(lo, n, a) for h, lo in zip(counts_hi, counts_lo)]


def run(s, windows, seed, prepare=None, at=1, cls=PHDStream):
    """The device (class ``cls``) over ``windows`` (lists of (x, op)); the released (bits, ys) of window ``at``."""
    m = cls(s)
    if prepare:
        prepare(m)
    m.draw_noise(seeded_source(seed))
    out = None
    for w, events in enumerate(windows):
        for x, op in events:
            m.update((x, op))
        m.step()
        if w == at:
            out = ([m.bits[i >> 3] >> (i & 7) & 1 for i in range(m.nv)], list(m.ys[:m.nl]))
    return out


def leaves(bits, depth):
    """(depth, path) of the leaves of T(t) in BFS order, and the set of split nodes."""
    queue, split, out = [(0, 0)], set(), []
    for b in bits:
        k, p = queue.pop(0)
        if b:
            split.add((k, p))
            queue += [(k + 1, 2 * p), (k + 1, 2 * p + 1)]
        else:
            out.append((k, p))
    return out, split


def leaf_y(bits, ys, depth, x):
    """The increment of the leaf of T(t) that holds reading x (box [0, 64))."""
    for (k, p), y in zip(leaves(bits, depth)[0], ys):
        if x * (1 << k) // 64 == p:
            return y
    raise AssertionError("no leaf holds %d" % x)


def tally(s, windows, tag, n, events, prepare=None, at=1, cls=PHDStream):
    counts = [0] * len(events)
    for i in range(n):
        bits, ys = run(s, windows, b"phd-audit-%s-%d" % (tag, i), prepare, at, cls)
        for j, e in enumerate(events):
            counts[j] += e(bits, ys)
    return counts


@pytest.fixture
def halve_counter_noise(monkeypatch):
    """Plant the mutant: the leaf counters draw at half their scale."""
    calls = [0]

    def plant(scale):
        real = dlap.discrete_laplace

        def sampler(rng, num, den):
            if (num, den) == scale:
                calls[0] += 1
                return real(rng, num, 2 * den)
            return real(rng, num, den)
        monkeypatch.setattr(dlap, "discrete_laplace", sampler)
        return calls
    return plant


def deletion_audit(n, eps=2):
    s = spec(eps)
    with_x = [[(X, 1)], [(X, -1)], []]
    without = [[(X, 1)], [], []]
    low = [lambda b, y: leaf_y(b, y, 1, X) <= -1, lambda b, y: leaf_y(b, y, 1, X) >= 0]
    hi_del = tally(s, with_x, b"del1", n, low[:1])
    lo_del = tally(s, without, b"del0", n, low[:1])
    hi_keep = tally(s, without, b"del0b", n, low[1:])
    lo_keep = tally(s, with_x, b"del1b", n, low[1:])
    return ratio_bounds(hi_del + hi_keep, lo_del + lo_keep, n), math.exp(eps / 2)


def test_deletion_costs_the_counters_share_only():
    lower, bound = deletion_audit(3000)
    assert max(lower) <= bound, (lower, bound)
    assert min(lower) > 1.5, "the events should see the shift (exact ratio e^(ε/2) = 2.72)"


def test_counter_noise_halved_mutant_fails(halve_counter_noise):
    calls = halve_counter_noise((2, 2))           # 1/ε_c = 2/ε at ε = 2
    lower, bound = deletion_audit(3000)
    assert calls[0] > 0 and max(lower) > bound, (lower, bound)


@pytest.mark.slow
def test_insertion_costs_at_most_eps():
    eps = 3
    s = spec(eps)
    with_x = [[], [(X, 1)], []]
    without = [[], [], []]
    up = lambda b, y: b[0] == 1 and leaf_y(b, y, 1, X) >= 1                  # noqa: E731
    down = lambda b, y: b[0] == 0 and y[0] <= -1                              # noqa: E731
    n = 15000
    hi = tally(s, with_x, b"ins1", n, [up]) + tally(s, without, b"ins0b", n, [down])
    lo = tally(s, without, b"ins0", n, [up]) + tally(s, with_x, b"ins1b", n, [down])
    lower = ratio_bounds(hi, lo, n)
    assert max(lower) <= math.exp(eps), lower
    assert min(h / max(lo_, 1) for h, lo_ in zip(hi, lo)) > math.exp(eps / 2), (hi, lo)


def test_refused_event_counts_twice():
    eps = 2
    s = spec(eps, batch_max=1, rate_bound=False)
    assert PHDStream(s).budget() == (2 * eps, 1)
    # D: the window holds x = 50 only; D': x = 10 arrives first and the full batch refuses 50
    d1 = [[], [(X, 1), (50, 1)], []]
    d0 = [[], [(50, 1)], []]
    swap = lambda b, y: b[0] == 1 and y[0] >= 1 and y[1] <= 0               # noqa: E731
    n = 3000
    hi = tally(s, d1, b"full1", n, [swap])
    lo = tally(s, d0, b"full0", n, [swap])
    lower = ratio_bounds(hi, lo, n)
    assert lower[0] > math.exp(eps / 2), "a refused event is not free: %s" % lower
    assert lower[0] <= math.exp(eps), lower                 # the counters' share under 2ε


# ------------------------------------------------------------------ the tree on a leaking state
DEPTH, TREE_EPS = 6, 4


def caterpillar_masses(delta):
    """Cn on the leaves of the caterpillar along path 0 (x = 0): G((k, 0)) = k·delta."""
    cn = {(DEPTH, 0): DEPTH * delta}
    for k in range(1, DEPTH + 1):
        cn[(k, 1)] = -delta
    return cn


def device_state(m):
    """Put the caterpillar into the device pool: (k, 0) is node 2k - 1, (k, 1) node 2k."""
    cn = caterpillar_masses(m.delta)
    m.kid[0] = 1
    for k in range(1, DEPTH):
        m.kid[2 * k - 1] = 2 * k + 1
    m.used = 2 * DEPTH + 1
    for (k, p), v in cn.items():
        m.cn[2 * k - 1 + p] = v
    below = 0
    for k in range(DEPTH - 1, -1, -1):               # Cd of (k, 0): everything under it
        below += m.cn[2 * k + 1] + m.cn[2 * k + 2]
        m.cd[0 if k == 0 else 2 * k - 1] = below


class PrintedStatistic(DensePHD):
    """The dense reference with the paper's printed split statistic floor(G(t-1) + ∇F(t)) on a
    fixed state (the mutant); one step per run, so Ext_T of the increments is not needed."""

    def statistic(self, events):
        grad = self.counts(events, signed=True)
        return {v: math.floor(self.G[v] + grad[v]) for v in self.G if v[0] < self.depth}

    def add_ext(self, v, y):
        pass


def path_splits(bits):
    split = leaves(bits, DEPTH)[1]
    return all((k, 0) in split for k in range(DEPTH))


def printed_run(ref, events, seed):
    ref.counters = {}
    bits, _ = ref.step(seeded_source(seed), events)
    return bits


def printed_reference():
    ref = PrintedStatistic([0], [64], DEPTH, TREE_EPS, 1)
    for (k, p), v in caterpillar_masses(ref.delta).items():
        DensePHD.add_ext(ref, (k, p), v)
        ref.cn[(k, p)] = v
    assert [ref.G[(k, 0)] for k in range(DEPTH + 1)] == [k * ref.delta for k in range(DEPTH + 1)]
    return ref


def test_printed_statistic_mutant_fails_on_a_leaking_state():
    ref = printed_reference()
    n = 10000
    hi = [sum(path_splits(printed_run(ref, [((0,), 1)], b"tree1-%d" % i)) for i in range(n))]
    lo = [sum(path_splits(printed_run(ref, [], b"tree0-%d" % i)) for i in range(n))]
    lower = ratio_bounds(hi, lo, n)
    assert lower[0] > math.exp(TREE_EPS / 2), "the printed statistic should leak: %s" % lower


def tree_audit(cls):
    """Lower bound of P_hi(E) / P_lo(E) for E = {the whole path to x splits},
    the device class ``cls`` run on the leaking state with and without the
    inserted event: under the path-monotone statistic the inserted event moves
    each test on the path, but P never exceeds the root's, so E stays rare."""
    s = spec(TREE_EPS, depth=DEPTH)
    n = 10000
    hi = tally(s, [[(0, 1)], []], b"tdev1", n, [lambda b, y: path_splits(b)], device_state, at=0, cls=cls)
    lo = tally(s, [[], []], b"tdev0", n, [lambda b, y: path_splits(b)], device_state, at=0, cls=cls)
    return ratio_bounds(hi, lo, n)


def without_the_parent_min():
    """The device with the mutant P(v) = max(g(v), 0): no min over P(parent),
    so on the leaking state the statistic grows along the path."""
    import types

    import edgesynth.agent.phdstream as pkg
    src = Path(pkg.__file__).read_text()
    line = "            if p > qp[head]:\n                p = qp[head]\n"
    assert src.count(line) == 1
    mod = types.ModuleType("edgesynth.agent.phdstream._mutant")
    mod.__package__ = "edgesynth.agent.phdstream"
    exec(compile(src.replace(line, ""), "phdstream-mutant", "exec"), mod.__dict__)
    return mod.PHDStream


def test_device_tree_passes_on_the_same_state_and_the_unclamped_mutant_fails():
    """The same leaking state and the path event: the device without the min
    over P(parent) is rejected against the tree's share e^(ε/2); the real
    device passes."""
    assert tree_audit(without_the_parent_min())[0] > math.exp(TREE_EPS / 2)
    assert tree_audit(PHDStream)[0] <= math.exp(TREE_EPS / 2)
