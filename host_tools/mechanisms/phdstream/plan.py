"""``edgesynth plan --mechanism phdstream``: the node pool, batch and tree of
a PHDStream device for a RAM budget (docs/mechanisms/phdstream.md, "Planner").

The device preallocates everything (agent/phdstream): per pool node 40 bytes
with the Simple counter (Cn, Cd, first child, the step's BFS queue of node,
segment, floor(Ca), depth and P(parent), the leaf increment buffer), 16 more
with Block-K, 4 + 8 per level with the binary-tree counter, and two bitmaps
of one bit per node; per batch slot 5 bytes (a path code and an op byte).
``state_bytes`` counts them exactly (tests check it against the device's
``counter_bytes()``). The runtime's charge beyond them is ram.heap_need
(the MicroPython overhead of PHDStream measured on the unix port by
benchmarks/bench_phdstream_memory.py, or the C core's).

Budget (docs/mechanisms/phdstream.md, "Privacy argument", 4):
with ``max_events`` N the deployment promises that no window holds more than
N events (e.g. a fixed sample rate), ``batch_max`` = N, ``rate_bound`` is
true and the mechanism's ε is the config's. Without it a window may
overflow its batch, which under add/remove neighbours costs twice, so the
mechanism runs at ε/2 and the batch gets BATCH_SHARE of the RAM beyond the
runtime's overhead.
The pool then gets the rest: ``max_nodes`` is the largest odd count (the
root plus pairs of children) that fits.

Fold-pruning (spec ``fold`` = K, agent/phdstream/pool.py): a node that stays
a leaf for K steps gives its subtree back to the pool, for 5 more bytes per
node (Off and the leaf streak). By default it is on with K = DEFAULT_FOLD
whenever the pool cannot hold the whole depth-D tree (the union tree of a
long stream would otherwise fill it and every later split would be refused;
benchmarks/RESULTS.md, "PHDStream fold-pruning"), and off when it can.

Depth: the paper's D = 20 (its experiments), capped so that an integer cell
is never split below one unit in total: D <= sum over channels of
floor(log2(hi - lo)).
"""
from fractions import Fraction

from edgesynth.agent.errors import ConfigError
from edgesynth.agent.phdstream import MAX_BATCH, MAX_DEPTH, MAX_EPS_DEN, MAX_NODES, PHDStream
from edgesynth.config import device_config
from edgesynth.errors import InputError
from edgesynth.mechanisms.integers import INT32_SAFE
from edgesynth.mechanisms.privhp.plan import channel_bits
from edgesynth.ram import heap_need, ram_notes

KIND = "phdstream"
PAPER_DEPTH = 20          # the paper's experiments (§5)
BATCH_SHARE = Fraction(1, 4)  # of the state's bytes, for the batch, without --max-events
DEFAULT_BLOCK = 8
DEFAULT_HORIZON = 128
DEFAULT_SNAP = 16
NODE_BYTES = 40           # Cn, Cd, kid, 6 queue slots, the leaf increment: 10 int32
BLOCK_NODE_BYTES = 16     # activation count, a, s, s_last
BATCH_SLOT_BYTES = 5      # int32 path code + op byte
FOLD_NODE_BYTES = 5       # Off (int32) and the leaf streak (byte)
DEFAULT_FOLD = 8          # K: visits as a leaf before its subtree folds (benchmarks/bench_phdstream_fold.py)


def tree_levels(horizon):
    """p-sums that hold each event in the binary-tree counter: log2 T_h + 1."""
    return horizon.bit_length()


def state_bytes(nodes, batch, counter="simple", horizon=0, fold=0):
    """Exact bytes of a PHDStream state's preallocated arrays (the device's
    ``counter_bytes()``): ``nodes`` pool nodes, ``batch`` batch slots,
    ``fold`` K (0: no fold-pruning arrays)."""
    per = NODE_BYTES + (FOLD_NODE_BYTES if fold else 0)
    if counter == "block":
        per += BLOCK_NODE_BYTES
    elif counter == "tree":
        per += 4 + 8 * tree_levels(horizon)
    return per * nodes + 2 * ((nodes + 7) >> 3) + BATCH_SLOT_BYTES * batch


def construction_transient(nodes, batch, counter="simple", horizon=0, fold=0):
    """Bytes the construction holds beside the arrays at its peak
    (ram.heap_need's ``transient``): the device builds each array from a zero
    buffer of its size, and on the unix port up to two such buffers of the
    largest arrays are live at once (benchmarks/bench_phdstream_memory.py)."""
    sizes = [4 * nodes, 4 * nodes, 4 * batch] + ([4 * nodes] if fold else [])
    if counter == "tree":
        sizes += [4 * nodes * tree_levels(horizon)] * 2   # alpha, alpha-hat
    sizes.sort()
    return sizes[-1] + sizes[-2]


def parse_counter(text):
    """(counter, block, horizon) of ``simple``, ``block[:K]`` or ``tree[:T]``."""
    name, _, arg = str(text).strip().partition(":")
    if name not in ("simple", "block", "tree") or (name == "simple" and arg):
        raise InputError("--counter must be simple, block:K or tree[:T], got %r" % (text,))
    if name == "simple":
        return "simple", 0, 0
    default = DEFAULT_BLOCK if name == "block" else DEFAULT_HORIZON
    try:
        v = int(arg) if arg else default
    except ValueError:
        raise InputError("--counter %s:N needs an integer N, got %r" % (name, arg))
    if name == "block":
        if not 2 <= v <= 1 << 16:
            raise InputError("--counter block:K needs K in [2, 65536], got %d" % v)
        return "block", v, 0
    if not 1 <= v <= 1 << 16 or v & (v - 1):
        raise InputError("--counter tree:T needs T a power of 2 up to 65536, got %d" % v)
    return "tree", 0, v


def depth_cap(lo, hi):
    """Deepest tree whose cells stay at least one unit wide in total:
    sum over channels of floor(log2(hi - lo)), at least 1, at most MAX_DEPTH."""
    return max(1, min(MAX_DEPTH, sum((h - l).bit_length() - 1 for l, h in zip(lo, hi))))


def plan_phdstream(lo, hi, eps, ram, names=None, op_name="op", depth=None, counter="simple", max_events=None,
                   snap=DEFAULT_SNAP, relation="add-remove", runtime="micropython", fold=None):
    """The public device config (a JSON-ready dict) of a PHDStream device.

    lo, hi: integer bounds per channel (1..8 channels; the box is integer).
    eps: the config's epsilon (Fraction), per event over the whole stream.
    ram: bytes the agent may use. depth: D (default min(20, depth_cap)).
    counter: "simple", "block:K" or "tree[:T]". max_events: the public
    per-window event bound N (rate_bound), or None. snap: snapshot period in
    steps. fold: K in 0..255 (0 off), or None: DEFAULT_FOLD when the pool
    cannot hold the whole depth-D tree, else off. Raises InputError when
    nothing fits or a parameter is refused.
    """
    d = len(lo)
    if not 1 <= d <= 8:
        raise InputError("phdstream takes 1..8 channels, got %d" % d)
    for v in list(lo) + list(hi):  # the C core's limit (ccore.validate), so every runtime takes the plan
        if not INT32_SAFE[0] <= v <= INT32_SAFE[1]:
            raise InputError("phdstream bounds must be within [-(2**31 - 1), 2**31 - 2] (int32), got %d" % v)
    names = list(names) if names else ["x%d" % i for i in range(d)]
    if len(names) != d:
        raise InputError("%d names given for %d channels" % (len(names), d))
    if op_name in names:
        raise InputError("--op-name %r is also a channel's name" % op_name)
    cap = depth_cap(lo, hi)
    if depth is None:
        depth = min(PAPER_DEPTH, cap)
    elif not 1 <= depth <= cap:
        raise InputError("--depth must be in [1, %d] for these bounds: deeper cells would be narrower than one "
                         "unit (the cap is the sum over channels of floor(log2(HI - LO)), at most %d)"
                         % (cap, MAX_DEPTH))
    kind, block, horizon = parse_counter(counter)
    rate_bound = max_events is not None
    if rate_bound and not 1 <= max_events <= MAX_BATCH:
        raise InputError("--max-events must be in [1, %d], got %d" % (MAX_BATCH, max_events))
    # the mechanism's eps: its budget() is 2 eps unless a rate bound rules out a
    # full batch (a refused event may swap for a displaced one)
    m_eps = eps if rate_bound else eps / 2
    if m_eps.denominator > MAX_EPS_DEN:
        raise InputError("epsilon %s halves to %s, whose denominator exceeds 10**6; round epsilon or give "
                         "--max-events" % (eps, m_eps))
    overhead = heap_need(0, runtime, KIND, channels=d, transient=4)
    if ram <= overhead:
        raise InputError("a %d-byte budget is below phdstream's measured runtime overhead of %d bytes on %s; "
                         "give the agent more RAM" % (ram, overhead, runtime))

    if fold is not None and not 0 <= fold <= 255:
        raise InputError("--fold must be in [0, 255] (0: off), got %d" % fold)
    k = DEFAULT_FOLD if fold is None else fold

    def need(nodes, batch):
        return heap_need(state_bytes(nodes, batch, kind, horizon, k), runtime, KIND, channels=d,
                         transient=construction_transient(nodes, batch, kind, horizon, k))
    if rate_bound:
        batch = max_events
    else:
        # the batch's share of the RAM beyond the runtime's overhead
        batch = min(MAX_BATCH, max(1, int((ram - overhead) * BATCH_SHARE) // BATCH_SLOT_BYTES))
    if need(3, batch) > ram:
        raise InputError("a %d-byte budget cannot hold a phdstream state with a %d-event batch: it needs at least "
                         "%d bytes (%d of arrays + the %s runtime's overhead)"
                         % (ram, batch, need(3, batch), state_bytes(3, batch, kind, horizon, k), runtime))
    nodes = _largest(lambda n: need(n, batch) <= ram, 3, MAX_NODES)
    if fold is None and nodes >= (2 << depth) - 1:
        k = 0  # the pool holds the whole tree: nothing to fold
        nodes = _largest(lambda n: need(n, batch) <= ram, 3, MAX_NODES)
    nodes -= 1 - nodes % 2   # the root and pairs of children: an even last slot is never used
    mech = {"kind": KIND, "names": names, "op": op_name, "lo": list(lo), "hi": list(hi), "depth": depth,
            "eps": [m_eps.numerator, m_eps.denominator], "counter": kind, "max_nodes": nodes, "batch_max": batch,
            "snap": snap, "rate_bound": rate_bound, "fold": k}
    if kind == "block":
        mech["block"] = block
    elif kind == "tree":
        mech["horizon"] = horizon
    try:  # the device's own checks (noise scales within 2**22, field ranges)
        PHDStream(mech, 2 if relation == "replace" else 1)
    except ConfigError as e:
        raise InputError("the device would refuse this plan: %s" % e)
    size = state_bytes(nodes, batch, kind, horizon, k)
    if rate_bound:
        guarantee = ("epsilon %s per event over the whole stream, for streams whose windows hold at most %d events "
                     "(--max-events)" % (eps, batch))
    else:
        guarantee = ("epsilon %s per event over the whole stream; a window past %d events refuses the rest, so the "
                     "mechanism runs at epsilon/2 (--max-events states a public bound instead)" % (eps, batch))
    return device_config(eps, relation, mech, {
        **ram_notes(ram, size, need(nodes, batch), runtime),
        "pool_nodes": nodes,
        "fold": k,
        "batch_max": batch,
        "depth": depth,
        "counter": counter if kind == "simple" else "%s:%d" % (kind, block or horizon),
        "rate_bound": rate_bound,
        "guarantee": guarantee,
        "resolution": dict(zip(names, resolution(lo, hi, depth))),
        "epsilon": str(eps),
    })


def resolution(lo, hi, depth):
    """Width of a depth-D cell per channel, in the channel's units (the
    device halves channel (l-1) mod d at level l)."""
    return [(h - l) / 2 ** b for l, h, b in zip(lo, hi, channel_bits(len(lo), depth))]


def _largest(fits, lo, hi):
    """The largest v in [lo, hi] with fits(v), fits monotone decreasing and
    fits(lo) assumed (bisection)."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo

