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
predicted W1 (the shape of Theorem 3 of the PrivHP paper, notes/privhp.md 4.3,
with an assumed pruning-loss fraction ``skew``). The proof's constant on the
noise term, 10 sqrt(2), overstates it about tenfold in measurements
(benchmarks/bench_target.py: with the proof's constant the planner's pick at
32 KiB ranked 18th of the sweep; with NOISE_CONSTANT it ranks first), so the
planner uses the calibrated constant.

The CDF and profile planners share this module's RAM model for their states
(heap_need, ram_notes, require_fit; docs/deployment.md), and every planner and
`assemble` share the host's memory limit (require_host_memory): a config whose
assembly would need more is refused by both.
"""
import math
import os
from fractions import Fraction

from agent.privhp_build import MAX_DEPTH, MAX_INT_SPAN
from host_tools.budget import level_weights, privhp_budget
from host_tools.errors import InputError
from host_tools.growth import privhp_host_need

# The C core beyond the counters, for every mechanism: es_agent_t (208 B), the
# largest mechanism state (es_privhp_t, 56 B), the DRBG of construction (136 B)
# and the worst stack chain (es_agent_init, 1056 B on Cortex-M4), measured by
# `edgesynth firmware build` (docs/native.md; tests/test_firmware.py checks it).
C_CORE_OVERHEAD = 1536
# RAM beyond the counters on a 32-bit MCU, per device runtime and mechanism
# (PrivHP: per sketch kind). micropython: the base of heap_need, in GC pool
# bytes: the largest remainder over benchmarks/bench_memory.py's grids after
# the shape terms, rounded up to 1 KiB (measured with the .mpy bundle).
RUNTIME_OVERHEAD = {
    "micropython": {"cms": 20 * 1024, "cs": 21 * 1024, "cdf": 20 * 1024, "profile": 20 * 1024},
    "c": {"cms": C_CORE_OVERHEAD, "cs": C_CORE_OVERHEAD, "cdf": C_CORE_OVERHEAD, "profile": C_CORE_OVERHEAD},
}
# MicroPython heap that grows with a state's shape, in 32-bit pool bytes:
# (per channel, per counter array). A channel brings its bounds, name and the
# reading's objects; a counter array its array object and the tuple the update
# unpacks (PrivHP: one per tree level and sketch row, the row's 4 or 8 hash
# parameters in it; CDF: one per channel and level). Linear upper fits, in
# multiples of 32 B, of bench_memory.py's grids.
SHAPE_BYTES = {"cms": (256, 96), "cs": (256, 96), "cdf": (512, 96), "profile": (0, 0)}
# MicroPython's GC keeps 2 allocation-table bits and 1 finaliser bit per
# 16-byte block of a 32-bit port's heap (32-byte blocks on the 64-bit unix
# port): the heap is 131/128 of the pool it can hand out.
GC_POOL_NUM, GC_POOL_DEN = 128, 131
MAX_WIDTH = 4096
NOISE_CONSTANT = math.sqrt(2)  # per-counter noise sd in units of the scale; calibrated, see above


def parse_size(text, what):
    """Bytes of a size written as 32768, 32K, 32KiB, 1.5M or 2G (binary
    units); InputError naming ``what`` otherwise."""
    t = str(text).strip().upper()
    mult = 1
    for suffix, m in (("KIB", 1 << 10), ("MIB", 1 << 20), ("GIB", 1 << 30),
                      ("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("B", 1)):
        if t.endswith(suffix):
            t, mult = t[:-len(suffix)], m
            break
    try:
        v = int(float(t) * mult)
    except (ValueError, OverflowError):
        raise InputError("%s must be a size like 32768 or 32K, got %r" % (what, text))
    if v <= 0:
        raise InputError("%s must be positive" % what)
    return v


# Bytes of host memory that assembling one configuration may take. The need
# comes from public parameters (growth.privhp_host_need, cdf_estimate.gls_need,
# profile_invert.inversion_need), so it is checked before anything is
# allocated: a tiny epsilon's noise radius, a heavily padded tree or millions
# of PrivHP leaves are refused, not attempted.
# EDGESYNTH_HOST_MEMORY (e.g. 16G) sets it for a bigger or smaller host.
HOST_MEMORY = 2 << 30


def host_memory():
    """Bytes: HOST_MEMORY, or EDGESYNTH_HOST_MEMORY where it is set."""
    env = os.environ.get("EDGESYNTH_HOST_MEMORY")
    return HOST_MEMORY if env is None else parse_size(env, "EDGESYNTH_HOST_MEMORY")


def parse_bounds(text):
    """'LO:HI[,LO:HI...]' -> (lo list, hi list); integers stay integers."""
    lo, hi = [], []
    for i, part in enumerate(str(text).split(",")):
        bits = part.strip().split(":")
        if len(bits) != 2:
            raise InputError("bound %d (%r) must look like LO:HI" % (i + 1, part))
        vals = []
        for b in bits:
            try:
                v = int(b)
            except ValueError:
                try:
                    v = float(b)
                except ValueError:
                    raise InputError("bound %d: %r is not a number" % (i + 1, b))
                if not math.isfinite(v):
                    raise InputError("bound %d: %r is not finite" % (i + 1, b))
            vals.append(v)
        if not vals[0] < vals[1]:
            raise InputError("bound %d: LO (%s) must be below HI (%s)" % (i + 1, bits[0], bits[1]))
        if isinstance(vals[0], int) and isinstance(vals[1], int) and vals[1] - vals[0] > MAX_INT_SPAN:
            raise InputError("bound %d: integer span exceeds 2**29 - 1; use float bounds" % (i + 1))
        lo.append(vals[0])
        hi.append(vals[1])
    return lo, hi


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
    and by the resolution of integer bounds (no cell narrower than one unit).

    Level l splits channel (l-1) mod d, so channel i gets
    floor((r-1-i)/d) + 1 bits; that is at most bits_i exactly when
    r <= d*bits_i + i.
    """
    r = max(d, math.ceil(math.log2(max(float(eps) * n_max, 2))))
    r = min(-(-r // d) * d, MAX_DEPTH)
    for i in range(d):
        span = hi[i] - lo[i]
        if isinstance(span, int):
            bits = max(math.ceil(math.log2(span)), 1)
            r = min(r, d * bits + i)
    return max(1, r)


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
    if not 0 < len(seed) <= 64:
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
        "epsilon": str(eps),
    })


def device_config(eps, relation, mech, notes):
    """The public device config of one mechanism (docs/config.md) with the
    planner's ``notes`` as its "plan" block, which the device ignores."""
    return {"format": 1, "epsilon": [eps.numerator, eps.denominator], "relation": relation,
            "mechanisms": [mech], "plan": notes}


def ram_notes(ram, counters, need, runtime):
    """The plan block's RAM entries (docs/config.md), in bytes: the budget
    (None when not given), the counters, the runtime's charge beyond them
    and the expected peak ``need``."""
    return {"ram_bytes": ram, "counter_bytes": counters, "device_runtime": runtime,
            "runtime_overhead_bytes": need - counters, "expected_peak_bytes": need}


def require_fit(ram, need, counters, runtime, what):
    """Refuse, in one line, a state ``what`` of ``need`` bytes (``counters`` of
    them counters) that exceeds the ``ram`` budget; ``ram`` None: no budget."""
    if ram is not None and need > ram:
        raise InputError("%s needs %d bytes (%d of counters + %d for the %s runtime); --ram gives %d"
                         % (what, need, counters, need - counters, runtime, ram))


def require_host_memory(need, what):
    """Refuse, in one line, the host work ``what`` ("assembling a profile of
    ...") when it needs ``need`` bytes above host_memory(): `plan` refuses such
    a config, `assemble` such frames, `sample` and `inspect` such a generator."""
    limit = host_memory()
    if need > limit:
        raise InputError("%s needs about %s of host memory, above the host limit of %s "
                         "(EDGESYNTH_HOST_MEMORY sets it)" % (what, _human(need), _human(limit)))


def _human(nbytes):
    return "%.3g GiB" % (nbytes / (1 << 30)) if nbytes >= 1 << 30 else "%.3g MiB" % (nbytes / (1 << 20))


def mcu_heap(pool):
    """Bytes of a 32-bit MicroPython heap whose GC pool holds ``pool`` bytes
    (the GC's own tables take the rest, GC_POOL_DEN / GC_POOL_NUM)."""
    return -(-pool * GC_POOL_DEN // GC_POOL_NUM)


def mp_pool_beyond_counters(raw, counters):
    """Pool bytes beyond the counters on a 32-bit port, estimated from ``raw``,
    the smallest heap (bytes) the agent ran in on the 64-bit unix port.

    That port's GC has 32-byte blocks, so its pool is 256/259 of the heap;
    pointers, object headers and blocks halve on 32 bits, counters do not.
    """
    return (raw * 256 // 259 - counters + 1) // 2


def heap_need(counters, runtime, kind, channels=0, arrays=0):
    """Device RAM in bytes for one state of mechanism ``kind`` ("cms", "cs"
    for PrivHP, "cdf", "profile") of ``counters`` bytes: what --ram is
    checked against.

    c: counters + C_CORE_OVERHEAD. micropython: the GC pool holds the
    counters, the measured base RUNTIME_OVERHEAD["micropython"][kind] and the
    shape terms (SHAPE_BYTES per channel and per counter array); the heap adds
    the GC's tables (2.3% of the heap, so of the counters too: a constant
    charge alone would fall short for large states).
    """
    base = RUNTIME_OVERHEAD[runtime][kind]
    if runtime == "c":
        return counters + base
    per_channel, per_array = SHAPE_BYTES[kind]
    return mcu_heap(counters + base + per_channel * channels + per_array * arrays)


def privhp_arrays(r, k, j):
    """Counter arrays of a PrivHP state: one per tree level 0..L, one per sketch row."""
    L = min(k.bit_length() - 1, r)
    return L + 1 + (r - L) * j
