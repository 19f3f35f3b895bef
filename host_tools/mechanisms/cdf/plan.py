"""``edgesynth plan --mechanism cdf``: choose the tree and the level budgets.

The tree search (integer branching factors, the CDF tree paper's Sec. V;
padding and the search are this project's, docs/mechanisms/cdf.md) looks at integer
branching vectors (n_1..n_m) with factors in [2, MAX_FACTOR] (plus the flat
histogram) whose product K-bar lies in [K, PAD * K], padding on the right, and
minimises the exact error of the plain estimator with equal level budgets,
m**2 * sum_i level_use(K, P_i, n_i) (host_tools/mechanisms/cdf/estimate.py). It is a
branch and bound from the leaves up; a subtree is cut when its cost plus an
AM-GM bound on the levels still to come (5% slack: padding lets the top level
act like a fractional branching) exceeds the best tree so far. It does not use
the paper's nearest-prime-power rule, which turns K = 997 into a histogram.

A padded tree (K-bar > K) is chosen only when it beats the best exact
factorisation of K by more than PAD_GAIN: padding stores extra nodes and the
gain is usually a few per cent (2048: padded (13,13,13) is 5.4% below
(8,16,16) at equal budgets and 1.8% with the Thm IV.2 budgets actually used),
while for a prime K such as 997 it is fourfold ((10,10,10) on 1000 leaves).

For the chosen tree the budgets follow Thm IV.2 generalised to padding:
epsilon_i proportional to level_use_i**(1/3), the KKT optimum of
sum_i level_use_i / epsilon_i**2 under sum_i epsilon_i = epsilon.

With a RAM budget (``ram``) the device needs its counters, 4 * d * sum_i
ceil(K / P_i) bytes, plus the runtime's charge (ram.heap_need). A
given K that does not fit is refused; without K the planner takes the
largest K that fits among the 3-smooth numbers 2**a 3**b (choose_bins):
they factor exactly into branching factors in [2, 64] (no padding), the
tree search on them takes milliseconds up to K ~ 10**5 where an awkward K
takes seconds (65521: 18 s), and from 1024 up consecutive ones are at most
12.5% apart (18.5% from 64 up), so at most about a ninth of the counter
budget goes unused. Any integer K would need a tree search per integer,
and the counters of the chosen tree do not grow monotonically with K, so
no bisection could replace the scan. When every channel is integer
(declared with ``integer``; their bounds are ints) K is capped at the widest
integer span (bins narrower than one unit of an integer reading stay
empty), and that span itself is a candidate: one bin per integer value is
the finest a CDF of those readings can be. A narrow integer channel beside
a wider or real-valued one caps nothing: K is shared.
"""
import math

from edgesynth.agent.cdf.build import MAX_BINS, MAX_INT_SPAN
from edgesynth.budget import Q_BITS, split_integer
from edgesynth.config import device_config
from edgesynth.errors import InputError
from edgesynth.mechanisms.cdf.estimate import cdf_what, gls_need, level_use, plain_error, stored_widths, suffix_products
from edgesynth.mechanisms.integers import finest
from edgesynth.ram import heap_need, host_memory, ram_notes, require_fit, require_host_memory

MAX_FACTOR = 64
PAD = 1.5
PAD_GAIN = 0.10
SLACK = 0.95


def choose_tree(K):
    """The planner's tree for K bins: the best exact factorisation, unless a
    padded tree is more than PAD_GAIN better."""
    exact, cost = search_tree(K, pad=1.0)
    padded, pcost = search_tree(K, pad=PAD)
    return padded if pcost < (1 - PAD_GAIN) * cost else exact


def search_tree(K, max_factor=MAX_FACTOR, pad=PAD):
    """Best branching vector (root first) for K bins, and its cost
    (sum over L of plain variances, in units of one level's variance at
    equal budgets times m**2)."""
    best = [K * (K - 1) // 2, (K,)]  # the histogram: level_use(K, 1, K) = K(K-1)/2
    top = int(K * pad)
    for m in range(2, max(2, math.ceil(math.log2(K))) + 1):
        _descend(K, top, m, m, 1, 0, [], best, max_factor)
    return tuple(best[1]), best[0]


def _descend(K, top, m, left, P, partial, chosen, best, max_factor):
    """Choose the next factor up from the leaves: ``P`` leaves under a node of
    the level being chosen, ``left`` levels still to choose."""
    if left == 0:
        if P >= K:
            cost = m * m * partial
            tree = tuple(reversed(chosen))
            # ties (the order of exact factors is free) go to the
            # lexicographically smallest, i.e. non-decreasing from the root
            if cost < best[0] or (cost == best[0] and tree < best[1]):
                best[0], best[1] = cost, tree
        return
    for n in range(2, max_factor + 1):
        Pn = P * n
        if Pn > top or Pn * 2 ** (left - 1) > top:
            break
        if Pn * max_factor ** (left - 1) < K:
            continue
        cost = partial + level_use(K, P, n)
        rest = left - 1
        bound = 0.0
        if rest and Pn < K:
            bound = SLACK * rest * ((K / Pn) ** (1.0 / rest) - 1) * K / 2
        if m * m * (cost + bound) > best[0]:
            continue
        chosen.append(n)
        _descend(K, top, m, rest, Pn, cost, chosen, best, max_factor)
        chosen.pop()


def level_budgets(eps, K, branching):
    """(q, sigma): integer level budgets over q = 2**20 * den(eps) adding up to
    eps * q exactly, proportional to level_use**(1/3)."""
    P = suffix_products(branching)
    uses = [level_use(K, P[i + 1], branching[i]) for i in range(len(branching))]
    weights = [max(u, 1) ** (1.0 / 3.0) for u in uses]
    q = (1 << Q_BITS) * eps.denominator
    return q, split_integer(eps.numerator << Q_BITS, weights)


def plan_cdf(lo, hi, eps, bins, names=None, branching=None, relation="add-remove", ram=None,
             runtime="micropython"):
    """Public device config (JSON-ready dict) for a CDF mechanism over
    ``bins`` bins per channel; ``branching`` overrides the search.

    ``ram`` (bytes, optional): refuse a state that does not fit on the
    ``runtime`` ("micropython" or "c"); with ``bins`` None, take the largest
    K that fits (choose_bins).
    """
    d = len(lo)
    names = names or ["x%d" % i for i in range(d)]
    if len(names) != d:
        raise InputError("%d names given for %d channels" % (len(names), d))
    for i in range(d):
        if isinstance(lo[i], int) and isinstance(hi[i], int) and hi[i] - lo[i] > MAX_INT_SPAN:
            raise InputError("bound %d (%s): integer span above 2**28 - 1; do not declare it integer"
                             % (i + 1, names[i]))
    choice = "given"
    if bins is None:
        if ram is None:
            raise InputError("--mechanism cdf needs --bins, or --ram to choose them")
        if branching is not None:
            raise InputError("--branching needs --bins")
        bins, branching, choice = choose_bins(d, span_cap(lo, hi), ram, runtime)
    if not 2 <= bins <= MAX_BINS:
        raise InputError("--bins must be in [2, %d]" % MAX_BINS)
    if branching is None:
        branching = choose_tree(bins)
    elif any(n < 2 for n in branching) or math.prod(branching) < bins:
        raise InputError("--branching factors must be >= 2 and multiply to at least --bins")
    branching = list(branching)
    counters, need = cdf_heap_need(d, bins, branching, runtime)
    require_fit(ram, need, counters, runtime, "a cdf of %d bins over %d channel(s), tree %s,"
                % (bins, d, "x".join(map(str, branching))))
    require_host_memory(gls_need(bins, branching, d), "assembling " + cdf_what(bins, branching, d))
    q, sigma = level_budgets(eps, bins, branching)
    factor = 2 if relation == "replace" else 1
    widths = stored_widths(bins, branching)
    # per-level variance of exact discrete Laplace with scale d * factor * q / sigma_i
    var = [_dlap_var(d * factor * q / s) for s in sigma]
    mech = {"kind": "cdf", "names": list(names), "lo": lo, "hi": hi, "bins": bins,
            "branching": branching, "q": q, "sigma": sigma}
    return device_config(eps, relation, mech, {
        "mechanism": "cdf",
        "bins_choice": choice,
        "padded_leaves": math.prod(branching),
        **ram_notes(ram, counters, need, runtime),
        "nodes_per_channel": sum(widths),
        "plain_error_counts2": plain_error(bins, branching, var),
        "resolution": {n: finest(l, h, (h - l) / bins) for n, l, h in zip(names, lo, hi)},
        "epsilon": str(eps),
    })


def cdf_heap_need(d, K, branching, runtime):
    """(counter bytes, device RAM bytes) of d channels of K bins on the tree
    ``branching``: one int32 per stored node, one array per channel and level."""
    counters = 4 * d * sum(stored_widths(K, branching))
    return counters, heap_need(counters, runtime, "cdf", channels=d, arrays=d * len(branching))


def span_cap(lo, hi):
    """The largest integer span, at least 2, when every channel is integer
    (bounds are ints), else None: one bin per integer value of the widest
    channel is the finest K worth planning (finer bins stay empty). The K is
    shared, so a narrow integer channel must not cap it for the others."""
    if not all(isinstance(l, int) and isinstance(h, int) for l, h in zip(lo, hi)):
        return None
    return max(2, max(h - l for l, h in zip(lo, hi)))


def smooth_bins(top):
    """Every 2**a 3**b in [2, top], largest first."""
    out = []
    p3 = 1
    while p3 <= top:
        p = p3
        while p <= top:
            out.append(p)
            p *= 2
        p3 *= 3
    return sorted((k for k in out if k >= 2), reverse=True)


def choose_bins(d, span, ram, runtime):
    """(K, branching, how K was chosen) of the largest K that fits ``ram``
    bytes (and whose assembly fits plan.host_memory()): the integer ``span``
    (span_cap; None for float bounds) or a 2**a 3**b below it and MAX_BINS,
    each with the tree choose_tree picks.
    Raises InputError when K = 2 does not fit.

    A K whose d * K leaves and d arrays alone exceed the budget is skipped
    without a tree search: every tree stores at least that much.
    """
    top = min(span or MAX_BINS, MAX_BINS)
    limit = host_memory()
    candidates = smooth_bins(top)
    if candidates[0] != top:
        candidates.insert(0, top)  # only an integer span can be off the 2**a 3**b grid
    for K in candidates:
        if heap_need(4 * d * K, runtime, "cdf", channels=d, arrays=d) > ram:
            continue
        branching = choose_tree(K)
        if cdf_heap_need(d, K, branching, runtime)[1] <= ram and gls_need(K, branching, d) <= limit:
            return K, branching, "integer span" if K == span else "largest 2**a 3**b that fits"
    need = cdf_heap_need(d, 2, (2,), runtime)[1]
    raise InputError("a %d-byte budget cannot hold a 2-bin cdf over %d channel(s) on the %s runtime: "
                     "it needs %d bytes" % (ram, d, runtime, need))


def _dlap_var(scale):
    a = math.exp(-1.0 / scale)
    return 2 * a / (1 - a) ** 2
