"""``edgesynth plan``: pick PrivHP's public parameters for a device's RAM budget.

The counters are counted exactly: 4 bytes per int32 counter of the tree
(2**(L+1) - 1) and of the sketches ((r - L) * j * w), plus 2 bytes per hash
parameter (4 per sketch row, 8 for a count sketch). On top of that the device
needs heap for the agent's bytecode (.mpy), its objects, the config and the
interpreter's own baseline: heap_need, a base and shape terms measured on the
MicroPython unix port by benchmarks/bench_memory.py (docs/deployment.md) and
converted to a 32-bit MCU (counters are the same bytes there, everything else
half), or the C core's measured state and stack.

Among all (r, k, w, j) that fit, the planner picks the one with the smallest
predicted W1 (predicted_w1: an error model under a public prior on the data's
shape, constants fitted to measured sweeps). The depth is searched in a window
of +-DEPTH_WINDOW levels around choose_depth's rule, unless the caller fixes it.

The RAM model all planners share (heap_need, ram_notes, require_fit;
docs/deployment.md) and the host's memory limit that every planner and
`assemble` apply (require_host_memory: a config whose assembly would need more
is refused by both) are in host_tools/ram.py.
"""
import math
import os
from fractions import Fraction

from edgesynth.agent.hashing import MAX_WIDTH
from edgesynth.agent.privhp.build import MAX_COUNTERS, MAX_DEPTH
from edgesynth.agent.spec import MAX_CHANNELS, MAX_SCALE
from edgesynth.agent.wire import RELATIONS
from edgesynth.budget import level_weights, privhp_budget
from edgesynth.config import device_config
from edgesynth.errors import InputError
from edgesynth.mechanisms.integers import finest
from edgesynth.mechanisms.privhp.growth import privhp_host_need
from edgesynth.noise import dlap_variance
from edgesynth.ram import heap_need, host_memory, ram_notes

PRIOR_SKEW = 0.8       # public data-shape assumption: multifractal skew B (never read off the data)
# (noise, collide, prune, res) weights per sketch kind, fitted: see predicted_w1; only collide differs
FIT = {"cms": (0.1186, 0.0339, 0.3763, 0.4342), "cs": (0.1186, 0.0411, 0.3763, 0.4342)}
ROW_GAIN = {"cms": 1.0, "cs": 1.5}   # collisions fall as j**ROW_GAIN (host recovery fits all j rows jointly)
DEPTH_WINDOW = 2       # depths searched either side of choose_depth's rule
DEFAULT_N_MAX = 10 ** 6   # es.plan's and the CLI's default n_max
# sketch rows searched; the fit measured cms j = 1, 2, 4 and cs j = 1, 3 (cms j = 3 is interpolated)
ROWS = {"cms": (1, 2, 3, 4), "cs": (1, 3)}
# most candidates per sketch cell (2k / w) searched: 2 of the fit's 1138 runs reach 64, none more; beyond
# that the collision term saturates at the parents' mass, and a plan at load 128 measured 1.30x worse
# than one at 8 (privhp.md, Planner step 2)
MAX_LOAD = 32


def counter_bytes(r, k, w, j, sketch="cms"):
    """Exact bytes of counters and hash parameters for one PrivHP state."""
    L = min(k.bit_length() - 1, r)
    counters = (1 << (L + 1)) - 1 + (r - L) * j * w
    per_row = 4 * (2 if sketch == "cs" else 1)
    return 4 * counters + 2 * per_row * (r - L) * j


def error_terms(d, r, k, w, j, eps, n, skew=PRIOR_SKEW, factor=1, clamp_share=0, uniform=False, sketch="cms"):
    """The four unweighted terms of predicted_w1: (noise, collide, prune, res),
    each the mass (a fraction of n) a step of the mechanism moves times the
    l-infinity distance gamma it moves in [0,1)^d, under the prior.

    The noise is the one the device draws: level l's budget is
    eps (1 - clamp_share) times its share of level_weights(..., uniform), and
    its discrete Laplace scale is factor (2 under the replace relation, else
    1) times j (sketch levels) over that budget.

    The prior is a multifractal of skew ``skew`` in (0.5, 1): a level-l cell
    with z of its l path bits set to the heavy side holds mass
    skew**z (1-skew)**(l-z), and C(l, z) cells share that mass. Classes of
    cells, not cells, are summed, so a term costs O(r**2).
    noise_l    sum over split parents of min(sd_l / n, parent mass) * gamma_{l-1}: consistency
               clips every child into [0, parent], so noise moves at most the parent's mass;
               every parent on tree levels, the k hot ones on sketch levels, where sd_l is the
               sd of scale j/sigma_l over sqrt(j) (the host's least-squares recovery averages
               the j rows' noisy counters)
    collide_l  sum over hot parents of min(1 / w, parent mass) / j**ROW_GAIN[sketch] * gamma_{l-1}
               (a row's collision load per candidate, cut by the joint fit of the j rows)
    prune      sum over sketch levels of the mass among the 2k candidates that is not kept * gamma_l
    res        gamma_r, the finest cell's width
    """
    L = min(k.bit_length() - 1, r)
    a = level_weights(d, k, r, j, uniform)
    s = sum(a)
    sigma = [float(eps) * (1 - float(clamp_share)) * x / s for x in a]

    def gamma(l):
        return 2.0 ** -(max(l, 0) // d)

    def mass(l, z):
        return skew ** z * (1 - skew) ** (l - z)

    noise = collide = prune = 0.0
    for l in range(1, L + 1):
        sd = math.sqrt(dlap_variance(factor, sigma[l])) / n
        noise += gamma(l - 1) * sum(math.comb(l - 1, z) * min(sd, mass(l - 1, z)) for z in range(l))
    hot = {z: math.comb(L, z) for z in range(L + 1)}   # heavy bits -> hot cells at the last level
    gain = j ** ROW_GAIN[sketch]
    for l in range(L + 1, r + 1):
        sd = math.sqrt(dlap_variance(factor * j, sigma[l]) / j) / n
        for z, c in hot.items():
            pm = mass(l - 1, z)
            noise += gamma(l - 1) * c * min(sd, pm)
            collide += gamma(l - 1) * c * min(1.0 / w, pm) / gain
        if l == r:
            break
        cand = {}
        for z, c in hot.items():
            cand[z + 1] = cand.get(z + 1, 0) + c
            cand[z] = cand.get(z, 0) + c
        left, hot = k, {}
        for z in sorted(cand, reverse=True):   # heavier classes first: mass grows with z
            keep = min(cand[z], left)
            left -= keep
            if keep:
                hot[z] = keep
            prune += gamma(l) * (cand[z] - keep) * mass(l, z)
    return noise, collide, prune, gamma(r)


def weighted_terms(terms, sketch="cms"):
    """error_terms' four terms times their FIT[sketch] weights."""
    return tuple(a * t for a, t in zip(FIT[sketch], terms))


def fit_score(terms, sketch="cms"):
    """FIT[sketch] . terms: the uncapped predicted W1 of error_terms' four terms."""
    return sum(weighted_terms(terms, sketch))


def predicted_w1(d, r, k, w, j, eps, n, skew=PRIOR_SKEW, sketch="cms", **noise):
    """Predicted E W1 (l-infinity, [0,1)^d, range 0..1) of a PrivHP state of
    depth r, k hot nodes, sketch width w and j rows at budget eps and n
    readings, when the data follow the public prior (error_terms).

    W1 = FIT[sketch] . error_terms, capped at 1 (the box's diameter). FIT was
    fitted to 1138 measured runs with the host's least-squares recovery
    (multifractal skew 0.8, d = 1..4, n = 1e3..1e6, eps = 0.1..4, C-core RAM
    budgets 32 and 64 KiB, depths choose_depth +- 2, count-min j = 1, 2, 4 and
    count sketch j = 1, 3; the metric is the tree-metric upper bound on the
    joint W1, the exact W1 for d = 1): non-negative least squares on relative
    error, then scaled to minimise the groups' mean log(pick / best swept)
    plus half the log misfit. Geometric rms misfit 1.33x; the pick among
    each group's swept configs is within 1.15x of the best in 25 of 30 groups,
    an in-sample figure (the weights were tuned on those 30 groups, one seed
    per run; held-out scoring: docs/mechanisms/privhp.md, Planner).
    benchmarks/bench_planner_fit.py measures such runs and reproduces the fit.
    ``noise``: error_terms' factor, clamp_share and uniform (the device's noise).
    """
    return min(1.0, fit_score(error_terms(d, r, k, w, j, eps, n, skew, sketch=sketch, **noise), sketch))


def depth_cap(d, lo, hi):
    """The deepest useful tree: MAX_DEPTH, or when every channel is integer
    (bounds are ints, as declared with ``integer``) the depth at which all of
    them reach one unit: deeper cells would hold at most one integer. One
    real-valued channel lifts the cap, since it gains from every level; so
    does a wide integer channel beside a narrow one (a cap from the narrow one
    would coarsen them all).

    Level l splits channel (l-1) mod d, so channel i gets
    floor((r-1-i)/d) + 1 bits; that reaches bits_i exactly when
    r >= d*(bits_i - 1) + i + 1.
    """
    if all(isinstance(hi[i] - lo[i], int) for i in range(d)):
        return min(MAX_DEPTH, max(d * (max(math.ceil(math.log2(hi[i] - lo[i])), 1) - 1) + i + 1
                                  for i in range(d)))
    return MAX_DEPTH


def choose_depth(d, eps, n_max, lo, hi):
    """The depth rule: r = round(log2(eps * n_max) - 2 - log2 d), at least d,
    capped by depth_cap. Measured on the multifractal family (d = 1..4,
    n = 1e4..1e6, eps = 0.3..4) it is within 1.15x of the best depth in 26 of
    30 groups. Data clustered on atoms (values on a coarse grid) gain from a
    deeper tree: the planner's ``depth`` option sets it."""
    r = max(d, round(math.log2(max(float(eps) * n_max, 2)) - 2 - math.log2(d)))
    return min(r, depth_cap(d, lo, hi))   # depth_cap >= d >= 1


def channel_bits(d, r):
    """Levels of a depth-``r`` tree that split each of ``d`` channels: level
    l splits channel (l-1) mod d, so channel i gets floor((r-1-i)/d) + 1."""
    return [(r - 1 - i) // d + 1 if r > i else 0 for i in range(d)]


def resolution(lo, hi, r):
    """Width of a finest cell per channel, in the channel's units (at least
    one on an integer channel)."""
    return [finest(l, h, (h - l) / 2 ** b) for l, h, b in zip(lo, hi, channel_bits(len(lo), r))]


def _depth_window(d, eps, n_max, lo, hi):
    """The depths searched around choose_depth's rule: +-DEPTH_WINDOW, within [d, depth_cap]."""
    r0 = choose_depth(d, eps, n_max, lo, hi)
    return range(max(d, r0 - DEPTH_WINDOW), max(r0, min(depth_cap(d, lo, hi), r0 + DEPTH_WINDOW)) + 1)


def state_need(d, r, k, w, j, sketch, runtime):
    """Bytes the device needs for one PrivHP state: counters plus the runtime's overhead (heap_need)."""
    return heap_need(counter_bytes(r, k, w, j, sketch), runtime, sketch, d, privhp_arrays(r, k, j))


def widest(d, r, k, j, ram, sketch="cms", runtime="micropython"):
    """The widest power-of-two w <= MAX_WIDTH for (r, k, j) whose state fits
    ``ram`` bytes and the device's MAX_COUNTERS (w = 1 for the complete tree,
    k >= 2**r), or None: the model's error falls with w."""
    L = min(k.bit_length() - 1, r)

    def fits(w, jj):
        return ((1 << (L + 1)) - 1 + (r - L) * jj * w <= MAX_COUNTERS
                and state_need(d, r, k, w, jj, sketch, runtime) <= ram)
    if k >= 1 << r:
        return 1 if fits(1, 1) else None
    return next((1 << b for b in range(MAX_WIDTH.bit_length() - 1, 1, -1) if fits(1 << b, j)), None)


def device_takes_noise(q, sigma, clamp_p, L, j, factor):
    """True when every level's noise scale (and the clamp counter's) is one the
    device draws: factor * q (times j on sketch levels) <= sigma * MAX_SCALE,
    the check of agent/privhp/build.py's draw_noise."""
    return (all(s >= 1 and (j if lvl > L else 1) * q * factor <= s * MAX_SCALE for lvl, s in enumerate(sigma))
            and not (clamp_p and q * factor > clamp_p * MAX_SCALE))


def plan_privhp(lo, hi, eps, ram, names=None, n_max=DEFAULT_N_MAX, sketch="cms", j=None,
                clamp_share=Fraction(1, 50), uniform_split=False, skew=PRIOR_SKEW, depth=None,
                hash_seed=None, relation="add-remove", runtime="micropython"):
    """Return the public device config (a JSON-ready dict) for PrivHP.

    ``ram`` bytes is the whole budget for the agent on the device; the counters
    get ``ram`` minus the ``runtime``'s overhead (heap_need). Candidates are
    every depth within DEPTH_WINDOW of choose_depth at ``n_max`` and at
    DEFAULT_N_MAX (so a truthful n_max never picks a plan the model predicts
    worse at that n than the default's pick; or only ``depth``, d..depth_cap,
    when given), every k = 2**b up to 2**r, every j of ROWS[sketch] (or
    ``j``) and for each the widest w = 2**b <= MAX_WIDTH that fits ``ram`` and
    the device's MAX_COUNTERS. Excluded: sketch shapes with more than
    MAX_LOAD candidates per cell (2k > MAX_LOAD * w), states with a noise
    scale the device does not draw (> 2**22) and states whose assembly
    exceeds host_memory(). The pick minimises predicted_w1 at ``n_max`` under
    the prior ``skew``, at the noise the device draws (relation, clamp_share,
    uniform_split). A large ``ram`` need not be used up: the depth window,
    the load cap (k <= MAX_LOAD * MAX_WIDTH / 2 on sketches) and the model's
    preference bound the pick (d = 4 at the default n_max picks the 512 KiB
    complete r = 16 tree from 768 KiB to 16 MiB). Raises InputError when
    nothing fits.
    """
    d = len(lo)
    if not 1 <= d <= MAX_CHANNELS:
        raise InputError("privhp takes 1..%d channels (the device's limit), got %d" % (MAX_CHANNELS, d))
    names = names or ["x%d" % i for i in range(d)]
    if len(names) != d:
        raise InputError("%d names given for %d channels" % (len(names), d))
    overhead = heap_need(0, runtime, sketch, channels=d)
    if ram <= overhead:
        raise InputError("a %d-byte budget is below the agent's measured runtime overhead of %d bytes "
                         "(bytecode, objects, interpreter); give the agent more RAM" % (ram, overhead))
    cap = depth_cap(d, lo, hi)
    if depth is None:
        depths = sorted(set(_depth_window(d, eps, n_max, lo, hi)) | set(_depth_window(d, eps, DEFAULT_N_MAX, lo, hi)))
    elif not d <= depth <= cap:
        raise InputError("--depth must be %d..%d for %d channels (at least one level per channel; %s)"
                         % (d, cap, d, "every integer channel reaches one unit at %d" % cap if cap < MAX_DEPTH
                                       else "the device's deepest tree is %d" % MAX_DEPTH))
    else:
        depths = [depth]
    if not depths:   # cannot happen for 1 <= d <= MAX_CHANNELS (depth_cap >= d); a clear refusal if it does
        raise InputError("no tree depth fits %d channels" % d)
    js = [j] if j else ROWS[sketch]
    factor = RELATIONS[relation]
    noise = {"factor": factor, "clamp_share": clamp_share, "uniform": uniform_split}

    best, limit, fits_ram = None, host_memory(), False
    for r in depths:
        for kb in range(0, r + 1):
            k = 1 << kb
            for jj in (js if kb < r else [1]):
                w = widest(d, r, k, jj, ram, sketch, runtime)
                if w is None or privhp_host_need(kb, r, k, jj, d) > limit:
                    continue
                if k < 1 << r and 2 * k > MAX_LOAD * w:   # beyond the load the model is trusted at
                    continue
                fits_ram = True
                if not device_takes_noise(*privhp_budget(eps, d, k, r, jj, clamp_share, uniform_split),
                                          min(kb, r), jj, factor):
                    continue
                score = fit_score(error_terms(d, r, k, w, jj, eps, n_max, skew, sketch=sketch, **noise), sketch)
                if best is None or score < best[0]:
                    best = (score, r, k, w, jj)
    if best is None and fits_ram:
        raise InputError("epsilon %s is too small for the device: every plan's noise scale exceeds 2**22 "
                         "(raise epsilon)" % eps)
    if best is None:
        r = depths[0]
        raise InputError("a %d-byte budget cannot hold a depth-%d PrivHP state; it needs at least %d bytes"
                         % (ram, r, state_need(d, r, 1, 4, js[0], sketch, runtime)))
    score, r, k, w, jj = best
    size = counter_bytes(r, k, w, jj, sketch)
    q, sigma, clamp_p = privhp_budget(eps, d, k, r, jj, clamp_share, uniform_split)
    seed = hash_seed or os.urandom(8).hex()
    if not isinstance(seed, str) or not 0 < len(seed) <= 64:
        raise InputError("--hash-seed must have 1..64 characters")
    mech = {"kind": "privhp", "names": list(names), "lo": lo, "hi": hi, "r": r, "k": k, "w": w,
            "j": jj, "sketch": sketch, "hash_seed": seed, "q": q, "sigma": sigma, "clamp_p": clamp_p}
    L = min(k.bit_length() - 1, r)
    return device_config(eps, relation, mech, {
        **ram_notes(ram, size, state_need(d, r, k, w, jj, sketch, runtime), runtime),
        "tree_levels": L + 1,
        "sketch_levels": r - L,
        "n_max": n_max,
        "predicted_w1": min(1.0, score),
        "prior_skew": skew,
        "resolution": dict(zip(names, resolution(lo, hi, r))),
        "epsilon": str(eps),
    })


def privhp_arrays(r, k, j):
    """Counter arrays of a PrivHP state: one per tree level 0..L, one per sketch row."""
    L = min(k.bit_length() - 1, r)
    return L + 1 + (r - L) * j
