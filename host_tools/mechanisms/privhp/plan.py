"""``edgesynth plan``: pick PrivHP's public parameters for a device's RAM budget.

The counters are counted exactly: 4 bytes per int32 counter of the tree
(2**(L+1) - 1) and of the sketches ((r - L) * j * w), plus 2 bytes per hash
parameter (4 per sketch row, 8 for a count sketch). On top of that the device
needs heap for the agent's bytecode (.mpy), its objects, the config and the
interpreter's own baseline: heap_need, a base and shape terms measured on the
MicroPython unix port by benchmarks/bench_memory.py (docs/deployment.md) and
converted to a 32-bit MCU (counters are the same bytes there, everything else
half), or the C core's measured state and stack.

Among all (k, w, j) that fit, the planner picks the one with the smallest
predicted W1 (the shape of Theorem 3 of the PrivHP paper, with the noise term
Gamma_{l-1} / sigma_l of its proof and an assumed pruning-loss fraction ``skew``). The proof's constant on the
noise term, 10 sqrt(2), overstates it about tenfold in measurements
(benchmarks/bench_target.py: with the proof's constant the planner's pick at
32 KiB ranked 18th of the sweep; with NOISE_CONSTANT it ranks first), so the
planner uses the calibrated constant.

The RAM model all planners share (heap_need, ram_notes, require_fit;
docs/deployment.md) and the host's memory limit that every planner and
`assemble` apply (require_host_memory: a config whose assembly would need more
is refused by both) are in host_tools/ram.py.
"""
import math
import os
from fractions import Fraction

from edgesynth.agent.privhp.build import MAX_DEPTH
from edgesynth.budget import level_weights, privhp_budget
from edgesynth.config import device_config
from edgesynth.errors import InputError
from edgesynth.mechanisms.integers import finest
from edgesynth.mechanisms.privhp.growth import privhp_host_need
from edgesynth.ram import heap_need, host_memory, ram_notes

NOISE_CONSTANT = math.sqrt(2)  # per-counter noise sd in units of the scale; calibrated, see above


def counter_bytes(r, k, w, j, sketch="cms"):
    """Exact bytes of counters and hash parameters for one PrivHP state."""
    L = min(k.bit_length() - 1, r)
    counters = (1 << (L + 1)) - 1 + (r - L) * j * w
    per_row = 4 * (2 if sketch == "cs" else 1)
    return 4 * counters + 2 * per_row * (r - L) * j


def predicted_w1(d, r, k, w, j, eps, n, skew=0.5):
    """Predicted E W1 in [0,1)^d (l-infinity): Theorem 3's terms.

    noise  (C / n) [sum_{l<=L} Gamma_{l-1}/sigma_l + sum_{l>L} j k gamma_{l-1}/sigma_l], C = NOISE_CONSTANT
    hash   sum_{l>L} (5/w) gamma_{l-1}
    prune  sum_{L<l<r} gamma_l * skew * 2**-(l-L)      (Lemma 11 shape)
    depth  gamma_r
    """
    L = min(k.bit_length() - 1, r)
    a = level_weights(d, k, r, j)
    s = sum(a)
    sigma = [float(eps) * x / s for x in a]

    def gamma(l):
        return 2.0 ** -(max(l, 0) // d)

    noise = 0.0
    for l in range(r + 1):
        c = (2.0 ** max(l - 1, 0) * gamma(l - 1)) if l <= L else j * k * gamma(l - 1)
        noise += c / sigma[l]
    noise *= NOISE_CONSTANT / n
    hashing = sum(5.0 / w * gamma(l - 1) for l in range(L + 1, r + 1))
    prune = sum(gamma(l) * skew * 2.0 ** -(l - L) for l in range(L + 1, r))
    return noise + hashing + prune + gamma(r)


def choose_depth(d, eps, n_max, lo, hi):
    """r = ceil(log2(eps * n_max)), rounded up to a multiple of d, capped by 29
    and, when every channel is integer (bounds are ints, as declared with
    ``integer``), by the depth at which all of them reach one unit: deeper
    cells would hold at most one integer. One real-valued channel lifts the
    cap, since it gains from every level; so does a wide integer channel
    beside a narrow one (a cap from the narrow one would coarsen them all).

    Level l splits channel (l-1) mod d, so channel i gets
    floor((r-1-i)/d) + 1 bits; that reaches bits_i exactly when
    r >= d*(bits_i - 1) + i + 1.
    """
    r = max(d, math.ceil(math.log2(max(float(eps) * n_max, 2))))
    r = min(-(-r // d) * d, MAX_DEPTH)
    if all(isinstance(hi[i] - lo[i], int) for i in range(d)):
        r = min(r, max(d * (max(math.ceil(math.log2(hi[i] - lo[i])), 1) - 1) + i + 1 for i in range(d)))
    return max(1, r)


def channel_bits(d, r):
    """Levels of a depth-``r`` tree that split each of ``d`` channels: level
    l splits channel (l-1) mod d, so channel i gets floor((r-1-i)/d) + 1."""
    return [(r - 1 - i) // d + 1 if r > i else 0 for i in range(d)]


def resolution(lo, hi, r):
    """Width of a finest cell per channel, in the channel's units (at least
    one on an integer channel)."""
    return [finest(l, h, (h - l) / 2 ** b) for l, h, b in zip(lo, hi, channel_bits(len(lo), r))]


def plan_privhp(lo, hi, eps, ram, names=None, n_max=10 ** 6, sketch="cms", j=None,
                clamp_share=Fraction(1, 50), uniform_split=False, skew=0.5,
                hash_seed=None, relation="add-remove", runtime="micropython"):
    """Return the public device config (a JSON-ready dict) for PrivHP.

    ``ram`` bytes is the whole budget for the agent on the device; the counters
    get ``ram`` minus the ``runtime``'s overhead (RUNTIME_OVERHEAD). Only
    states whose assembly fits host_memory() are candidates. Raises InputError
    when nothing fits.
    """
    d = len(lo)
    names = names or ["x%d" % i for i in range(d)]
    if len(names) != d:
        raise InputError("%d names given for %d channels" % (len(names), d))
    overhead = heap_need(0, runtime, sketch, channels=d)
    if ram <= overhead:
        raise InputError("a %d-byte budget is below the agent's measured runtime overhead of %d bytes "
                         "(bytecode, objects, interpreter); give the agent more RAM" % (ram, overhead))
    r = choose_depth(d, eps, n_max, lo, hi)
    js = [j] if j else ([1, 3] if sketch == "cs" else [1, 2])

    def need(k, w, jj):
        return heap_need(counter_bytes(r, k, w, jj, sketch), runtime, sketch, d, privhp_arrays(r, k, jj))
    best, limit = None, host_memory()
    for jj in js:
        for kb in range(0, r + 1):
            k = 1 << kb
            widths = [1 << b for b in range(2, 13)] if kb < r else [1]
            for w in widths:
                if need(k, w, jj) > ram or privhp_host_need(min(kb, r), r, k, jj, d) > limit:
                    continue
                score = predicted_w1(d, r, k, w, jj, eps, n_max, skew)
                if best is None or score < best[0]:
                    best = (score, k, w, jj)
    if best is None:
        raise InputError("a %d-byte budget cannot hold a depth-%d PrivHP state; it needs at least %d bytes"
                         % (ram, r, need(1, 4, js[0])))
    score, k, w, jj = best
    size = counter_bytes(r, k, w, jj, sketch)
    q, sigma, clamp_p = privhp_budget(eps, d, k, r, jj, clamp_share, uniform_split)
    seed = hash_seed or os.urandom(8).hex()
    if not isinstance(seed, str) or not 0 < len(seed) <= 64:
        raise InputError("--hash-seed must have 1..64 characters")
    mech = {"kind": "privhp", "names": list(names), "lo": lo, "hi": hi, "r": r, "k": k, "w": w,
            "j": jj, "sketch": sketch, "hash_seed": seed, "q": q, "sigma": sigma, "clamp_p": clamp_p}
    L = min(k.bit_length() - 1, r)
    return device_config(eps, relation, mech, {
        **ram_notes(ram, size, need(k, w, jj), runtime),
        "tree_levels": L + 1,
        "sketch_levels": r - L,
        "n_max": n_max,
        "predicted_w1_bound": score,
        "resolution": dict(zip(names, resolution(lo, hi, r))),
        "epsilon": str(eps),
    })


def privhp_arrays(r, k, j):
    """Counter arrays of a PrivHP state: one per tree level 0..L, one per sketch row."""
    L = min(k.bit_length() - 1, r)
    return L + 1 + (r - L) * j
