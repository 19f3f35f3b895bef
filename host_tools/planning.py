"""Planning a device: the public config for a privacy budget and a RAM budget
(``edgesynth plan`` and ``edgesynth combine``; docs/config.md, docs/api.md).

Each mechanism's planner (edgesynth.mechanisms.<name>.plan) does the work;
this module turns the command line's values, or Python ones, into its
arguments, so the library and the command give the same config for the same
inputs. Error messages name options as the command line spells them.
"""
import json
import operator
import os
from collections.abc import Mapping
from fractions import Fraction

from edgesynth.agent.cdf.build import MAX_BINS
from edgesynth.agent.device import mechanism_class, routes
from edgesynth.agent.errors import ConfigError
from edgesynth.agent.privhp.build import MAX_DEPTH as PRIVHP_MAX_DEPTH
from edgesynth.agent.profile.build import MAX_CAP
from edgesynth.agent.wire import MECHANISMS, RELATIONS
from edgesynth.budget import MAX_EPS_DEN, parse_epsilon
from edgesynth.config import check_bounds, load_config, split_bounds
from edgesynth.config import combine as combine_configs
from edgesynth.errors import InputError
from edgesynth.mechanisms import load_generator
from edgesynth.mechanisms.cdf.plan import cdf_heap_need, choose_bins, choose_tree, plan_cdf, span_cap
from edgesynth.mechanisms.integers import positions
from edgesynth.mechanisms.marginals.adapt import plan_from_model
from edgesynth.mechanisms.marginals.generator import MarginalsGenerator
from edgesynth.mechanisms.marginals.plan import plan_marginals
from edgesynth.mechanisms.marginals.table import load_schema
from edgesynth.mechanisms.phdstream.plan import plan_phdstream
from edgesynth.mechanisms.privhp.plan import DEFAULT_N_MAX, plan_privhp
from edgesynth.mechanisms.profile.plan import parse_domain, plan_profile
from edgesynth.ram import TRANSPORT_SLOTS, frame_bound, parse_size, transport_heap
from edgesynth.stdio import label, read_input, read_once

DEVICE_RUNTIMES = ("micropython", "c")
TRANSPORTS = ("mqtt",)
BUDGET_STEP = 64  # bytes: precision of the agent's share of --ram beside a transport
SKETCHES = ("cms", "cs")
# cdf_share: the fewest cdf bins reserved before privhp plans, and the most the cdf takes
# (docs/mechanisms/privhp.md "Joined CDFs")
CDF_MIN_BINS = 64
CDF_MAX_BINS = 4096
# cdf_share's default (None): this share for AUTO_CDF_CHANNELS or more channels, none integer
AUTO_CDF_SHARE = Fraction(3, 10)
AUTO_CDF_CHANNELS = 3


def _one_of(value, choices, what):
    if value not in choices:
        raise InputError("%s must be one of %s, got %r" % (what, ", ".join(choices), value))
    return value


def _int_in(value, lo, hi, what):
    """``value`` (None passes) as an int, in [lo, hi] unless they are None."""
    if value is None:
        return None
    try:
        v = operator.index(value)
    except TypeError:
        raise InputError("%s must be an integer, got %r" % (what, value))
    if lo is not None and not lo <= v <= hi:
        raise InputError("%s must be in [%d, %d], got %d" % (what, lo, hi, v))
    return v


def _bounds(bounds, names, integer):
    """(lo, hi, names) of ``bounds``: 'LO:HI,...', a list of (lo, hi) pairs,
    or a dict {name: (lo, hi)} whose keys become the channel names; the
    channels ``integer`` names (integers.positions) keep integer bounds, the
    others get float bounds."""
    if isinstance(bounds, str):
        pairs = split_bounds(bounds)
    else:
        if isinstance(bounds, Mapping):
            if names is not None and list(names) != [str(k) for k in bounds]:
                raise InputError("the bounds' keys name the channels; leave out --names or give the same names")
            names = [str(k) for k in bounds]
            bounds = list(bounds.values())
        try:
            pairs = [tuple(p) for p in bounds]
        except TypeError:
            raise InputError("--bounds must be 'LO:HI,...', a list of (lo, hi) pairs or a dict of them")
    if names is not None and len(names) != len(pairs):
        raise InputError("%d names given for %d channels" % (len(names), len(pairs)))
    shown = names or ["x%d" % i for i in range(len(pairs))]
    lo, hi = check_bounds(pairs, positions(integer, shown), shown)
    return lo, hi, names


def _names(names):
    """A list of channel names from 'a,b' or a sequence (None passes)."""
    if names is None:
        return None
    if isinstance(names, str):
        cols = [c.strip() for c in names.split(",")]
    elif isinstance(names, (list, tuple)):
        cols = [str(c) for c in names]
    else:
        raise InputError("--names must be 'a,b' or a list of names, got %s" % type(names).__name__)
    cols = [c for c in cols if c]
    if not cols:
        raise InputError("--names needs at least one name")
    if len(set(cols)) != len(cols):
        raise InputError("--names names a channel twice")
    return cols


def _share(value):
    try:
        share = Fraction(str(value))
    except (ValueError, ZeroDivisionError):
        share = None
    if share is None or not 0 <= share < 1:
        raise InputError("--clamp-share must be a fraction in [0, 1), got %r" % (value,))
    return share


def _branching(value):
    if value is None:
        return None
    try:
        return [int(x) for x in (value if isinstance(value, (list, tuple)) else str(value).split(","))]
    except (TypeError, ValueError):
        raise InputError("--branching must list integers like 16,16, got %r" % value)


def _domain(value):
    if value is None:
        return None, None
    if not isinstance(value, str):
        try:
            lo, hi = value
        except (TypeError, ValueError):
            raise InputError("--domain must be 'LO:HI' or a (lo, hi) pair, got %r" % (value,))
        value = "%s:%s" % (lo, hi)
    return parse_domain(value)


def plan(bounds=None, *, epsilon, ram=None, mechanism="privhp", names=None, integer=None, bins=None,
         branching=None, domain=None, cap=None, sample_bits=None, n_max=DEFAULT_N_MAX, sketch="cms", rows=None,
         clamp_share="1/50", uniform_split=False, hash_seed=None, relation=None, device_runtime=None,
         transport=None, depth=None, counter="simple", max_events=None, snap=16, op_name="op", fold=None,
         schema=None, marginals=None, from_generator=None, cdf_share=None):
    """The public device config (a JSON-ready dict, as `edgesynth plan` writes it).

    bounds: the public range of each channel, never read off the data (privhp
        and cdf): a dict ``{"temp": (0, 110), ...}`` whose keys become the
        channel names, a list of (lo, hi) pairs or the command line's
        "0:110,0:100". How they are written does not matter: 0:1 and
        0.0:1.0 plan the same; a channel is integer only when ``integer``
        declares it.
    epsilon: privacy budget per reading, > 0 and at most 100: 1, 0.5, "1/3",
        Fraction(1, 3).
    ram: bytes the agent may use on the device (int, or "32K", "1.5M").
        privhp: required, it sets the shape. cdf: refuses bins that do not
        fit; without bins, the largest that fit. profile: refuses a domain
        that does not fit; with sample_bits and no domain, the largest
        sampled range [0, n) that fits.
    mechanism: "privhp" (joint distribution of up to a few channels), "cdf"
        (per-channel CDFs), "profile" (how many ids occur t times) or
        "phdstream" (a changing population released window after window:
        insertions and deletions, continual; docs/mechanisms/phdstream.md).
    names: channel names (list or "a,b"; default x0, x1, ...; profile: one).
    integer: the integer channels (privhp, cdf), e.g. ["count"] or
        "temp,count" (names, or 0-based positions): readings and synthetic
        values are whole numbers (ADC codes); their bounds must be too, the
        plan resolves no finer than one unit, and the config keeps their
        bounds as ints. Other channels are real-valued.
    bins: cdf bins per channel, 2..2**24. branching: cdf tree, e.g. [16, 16].
    domain: profile ids lo <= id < hi, (lo, hi) or "LO:HI". cap: profile's
        public cap on one id's count, 1..2**24. sample_bits: profile over
        hashed ids from [0, 2**B), B even; domain is then the kept range.
    n_max: a public estimate of the readings per release (2..2**29; rate
        x period, or a published count), never counted from the data: the
        PrivHP planner predicts the error at it and centres its depth search
        on round(log2(eps n_max) - 2 - log2 d).
        depth (privhp): fix the tree depth, d..29 (at most the depth where
        every integer channel reaches one unit), instead of searching
        (deeper suits data clustered on a coarse grid of values).
        sketch: "cms" or "cs". rows: sketch rows j, 1..16.
    clamp_share: part of epsilon for the noisy count of out-of-range
        readings, in [0, 1). uniform_split: split epsilon evenly over levels.
    cdf_share (privhp): F in [0, 1) (number, "1/5" or Fraction), or None
        (the default: AUTO_CDF_SHARE where it measured better, see below).
        With F > 0 the config also holds a cdf mechanism over the same
        channels (names, bounds, integer flags) with F * epsilon, privhp the
        rest (exact fractions; the device epsilon is their sum), and the
        host's default assembly joins the two (docs/mechanisms/privhp.md,
        "Joined CDFs"). privhp plans on ``ram`` minus the charge of a
        CDF_MIN_BINS-bin cdf; the cdf then takes the largest 2**a 3**b bins
        (at most CDF_MAX_BINS) that fit what privhp's plan leaves. The
        runtime overhead is charged for both parts (a combined device's is
        not measured). An explicit F > 0 that does not fit is refused in
        one line; 0 plans privhp alone. None: AUTO_CDF_SHARE for 3 or more
        channels, none of them integer, without bins/branching, when that
        plan fits (under ``transport`` too); privhp alone otherwise, and
        plan["cdf_share"] says when the default did not fit (a function of
        public parameters only: _auto_share_applies).
    hash_seed: public seed shared by devices that will be merged (privhp;
        the sample's seed for profile; default random, so pass one for a
        reproducible config).
    relation: "add-remove" or "replace" (neighbouring streams; replace
        doubles the noise); None: "add-remove", or with from_generator the
        generator's (a next window assembles with earlier ones only under
        one relation). device_runtime: "micropython" or "c", the RAM
        charged beyond the counters (default "micropython"; "c" for
        marginals).
    transport: None, or "mqtt": the device also publishes its frames
        (agent/transport/mqtt.py, micropython only, needs ram). Its heap,
        ram.transport_heap (the measured modules, client, 16-slot outbox,
        Publisher and a publish's transient, plus a resend buffer of the
        largest frame), comes off ``ram`` before the counters are chosen: the
        config is the plan of the largest budget that leaves room for the
        transport its frames need, ``plan["transport"]`` = {"kind",
        "heap_bytes" (the charge, also in the expected peak), "max_frame",
        "max_frames", "agent_ram_bytes" (that budget: the config equals
        plan(ram=agent_ram_bytes) without transport)}; the config's "device":
        {"mqtt": {...}} block sizes the device's Publisher and outbox (add
        "host" before deploying; docs/transport.md).

    phdstream (needs bounds, integer: the box is integer, and ram): depth
        D of the public binary tree (default min(20, the sum over channels
        of floor(log2(hi - lo))): no cell narrower than one unit); counter
        "simple", "block:K" or "tree[:T]"; max_events N: the public bound
        on events per window (batch_max = N, the mechanism runs at the full
        epsilon), or None (a quarter of the state's bytes for the batch, and
        epsilon/2 since an overflowing window costs twice); snap: snapshot
        period in steps; op_name: the op column of the device's readings;
        fold: K, the fold-pruning of subtrees idle K steps (0 off; None:
        on with K = 8 when the pool cannot hold the whole tree).
        The node pool takes the rest of ``ram``.

    marginals (docs/mechanisms/marginals.md; ram optional): schema, the
        public columns and domains (a path of a JSON schema file, a dict
        {"columns": [...]} or a Schema); marginals: the measured column sets
        (default every 1- and 2-way one), "a,b;b,c" or a list of lists of
        column names; from_generator: plan the next window from an earlier
        window's marginals generator (a path, or es.load's Generator): its
        model chooses the marginals and partitions (post-processing of
        released frames), its schema is the config's.

    Raises InputError (with what is needed and what is given) when the plan
    cannot fit ``ram`` or an option is malformed.
    """
    _one_of(mechanism, MECHANISMS, "--mechanism")
    if relation is not None:
        _one_of(relation, tuple(RELATIONS), "--relation")
    if device_runtime is None:
        device_runtime = "c" if mechanism == "marginals" else "micropython"
    _one_of(device_runtime, DEVICE_RUNTIMES, "--device-runtime")
    eps = parse_epsilon(epsilon)
    ram_bytes = parse_size(ram, "--ram") if ram is not None else None
    if mechanism == "marginals":
        given = [o for o, v in (("--bounds", bounds), ("--names", names), ("--integer", integer), ("--bins", bins),
                                ("--transport", transport)) if v is not None]
        if given:
            raise InputError("%s do(es) not apply to --mechanism marginals: its schema names the columns and "
                             "their domains" % ", ".join(given))
        return _plan_marginals(ram_bytes, eps, schema, marginals, from_generator, relation, device_runtime)
    if schema is not None or marginals is not None or from_generator is not None:
        raise InputError("--schema, --marginals and --from-generator apply to --mechanism marginals")
    relation = relation or "add-remove"
    args = dict(bounds=bounds, eps=eps, mechanism=mechanism, names=names, integer=integer, bins=bins,
                branching=branching, domain=domain, cap=cap, sample_bits=sample_bits, n_max=n_max, sketch=sketch,
                rows=rows, clamp_share=clamp_share, uniform_split=uniform_split, hash_seed=hash_seed,
                relation=relation, device_runtime=device_runtime, depth=depth, counter=counter,
                max_events=max_events, snap=snap, op_name=op_name, fold=fold,
                cdf_share=_cdf_share(cdf_share, mechanism))
    if args["cdf_share"] is not None:
        return _planned(ram_bytes, transport, args)
    # the default share is decided above the transport: its budget search assumes one kind of config
    if _auto_share_applies(ram_bytes, args):
        try:
            return _planned(ram_bytes, transport, dict(args, cdf_share=AUTO_CDF_SHARE))
        except InputError:
            pass  # the joined plan does not fit: privhp alone (an error in the arguments recurs below)
        cfg = _planned(ram_bytes, transport, dict(args, cdf_share=Fraction(0)))
        cfg["plan"]["cdf_share"] = "0 (the default 3/10 does not fit --ram)"
        return cfg
    return _planned(ram_bytes, transport, dict(args, cdf_share=Fraction(0)))


def _planned(ram_bytes, transport, args):
    """_plan, or with ``transport`` _with_transport after its checks."""
    if transport is None:
        return _plan(ram_bytes, **args)
    mechanism, device_runtime = args["mechanism"], args["device_runtime"]
    _one_of(transport, TRANSPORTS, "--transport")
    if mechanism == "phdstream":
        raise InputError("--transport is not planned for phdstream yet: its frames grow with the tree")
    if device_runtime != "micropython":
        raise InputError("--transport %s is the MicroPython device's (agent/transport); the C core has none"
                         % transport)
    if ram_bytes is None:
        raise InputError("--transport %s needs --ram: its heap is charged against it" % transport)
    return _with_transport(ram_bytes, transport, args)


def _with_transport(ram_bytes, transport, args):
    """The plan of the largest budget b (to BUDGET_STEP bytes) such that b
    plus the transport's heap for that plan's frames (transport_heap with a
    resend buffer of frame_bound) fits ``ram_bytes``. Frames grow with the
    counters, which grow with the budget, so the fit is monotone in b: a
    bisection finds it."""
    _plan(ram_bytes, **args)  # errors in the arguments (or a --ram too small for the agent alone) as they are
    frames = {}  # frame_bound by mechanisms: probes often plan the same shape
    lo, hi = 0, ram_bytes - transport_heap(transport, 0) + 1  # the agent's budget is below hi
    best, err = None, None
    while hi - lo > BUDGET_STEP:
        mid = (lo + hi) // 2
        try:
            cfg = _plan(mid, **args)
        except InputError as e:  # the arguments plan at the full budget: this one is too small for any plan
            lo, err = mid, e
            continue
        key = json.dumps(cfg["mechanisms"], sort_keys=True, default=str)
        if key not in frames:
            frames[key] = frame_bound(cfg)
        if mid + transport_heap(transport, frames[key]) > ram_bytes:
            hi = mid
        else:
            lo, best = mid, (mid, cfg, frames[key])
    if best is None:
        raise InputError("with --transport %s the heap also holds the transport (at least %d bytes of --ram %d)%s"
                         % (transport, transport_heap(transport, 0), ram_bytes, ": %s" % err if err else ""))
    budget, cfg, max_frame = best
    charge = transport_heap(transport, max_frame)
    p = cfg["plan"]
    p["ram_bytes"] = ram_bytes
    p["transport"] = {"kind": transport, "heap_bytes": charge, "max_frame": max_frame,
                      "max_frames": TRANSPORT_SLOTS, "agent_ram_bytes": budget}
    p["runtime_overhead_bytes"] += charge
    p["expected_peak_bytes"] += charge
    cfg["device"] = {transport: {"max_frame": max_frame, "max_frames": TRANSPORT_SLOTS,
                                 "max_bytes": TRANSPORT_SLOTS * max_frame}}
    return cfg


def _plan(ram_bytes, *, bounds, eps, mechanism, names, integer, bins, branching, domain, cap, sample_bits, n_max,
          sketch, rows, clamp_share, uniform_split, hash_seed, relation, device_runtime, depth, counter, max_events,
          snap, op_name, fold, cdf_share=0):
    names = _names(names)
    bins = _int_in(bins, 2, MAX_BINS, "--bins")
    cap = _int_in(cap, 1, MAX_CAP, "--cap")
    sample_bits = _int_in(sample_bits, None, None, "--sample-bits")  # the planner checks its range
    rows = _int_in(rows, 1, 16, "--rows")
    n_max = _int_in(n_max, 2, 2 ** 29, "--n-max")
    if cdf_share:
        if bins is not None or branching is not None:
            raise InputError("--bins and --branching apply to --mechanism cdf; with --cdf-share the cdf takes the "
                             "bins that fit what privhp's plan leaves")
        return _plan_joined(ram_bytes, cdf_share, bounds=bounds, eps=eps, names=names, integer=integer,
                            n_max=n_max, sketch=sketch, rows=rows, clamp_share=clamp_share,
                            uniform_split=uniform_split, hash_seed=hash_seed, relation=relation,
                            device_runtime=device_runtime, depth=depth)
    if mechanism == "phdstream":
        return _plan_phdstream(ram_bytes, bounds, eps, names, integer, relation, device_runtime, depth, counter,
                               max_events, snap, op_name, fold)
    if mechanism == "profile":
        if cap is None:
            raise InputError("--mechanism profile needs --cap")
        if integer:
            raise InputError("--integer applies to privhp and cdf channels; a profile's ids are integers already")
        lo, hi = _domain(domain)
        return plan_profile(lo, hi, cap, eps, names=names, relation=relation, sample_bits=sample_bits,
                            sample_seed=hash_seed, ram=ram_bytes, runtime=device_runtime)
    if mechanism == "cdf":
        if bounds is None:
            raise InputError("--mechanism cdf needs --bounds and --bins (or --ram to choose the bins)")
        lo, hi, names = _bounds(bounds, names, integer)
        return plan_cdf(lo, hi, eps, bins, names=names, branching=_branching(branching), relation=relation,
                        ram=ram_bytes, runtime=device_runtime)
    if bounds is None or ram_bytes is None:
        raise InputError("--mechanism privhp needs --bounds and --ram")
    lo, hi, names = _bounds(bounds, names, integer)
    return plan_privhp(lo, hi, eps, ram_bytes, names=names, n_max=n_max, sketch=_one_of(sketch, SKETCHES, "--sketch"),
                       j=rows, clamp_share=_share(clamp_share), uniform_split=bool(uniform_split),
                       depth=_int_in(depth, 1, PRIVHP_MAX_DEPTH, "--depth"), hash_seed=hash_seed,
                       relation=relation, runtime=device_runtime)


def _auto_share_applies(ram_bytes, args):
    """Whether cdf_share's default (None) tries AUTO_CDF_SHARE: privhp over
    AUTO_CDF_CHANNELS or more channels, none of them integer (the join
    leaves integer channels out), no --bins/--branching (a cdf plan's), and
    epsilon parts that keep 6 decimals. Joined CDFs measured better per
    column everywhere (0.04-0.6x) and on the joint error at d = 4 (0.09-0.5x,
    synthetic and real data); at d = 2 the joint error went both ways with
    the data (0.48-0.56x on flights, 0.96-1.20x on weather); d = 3 and
    d > 4 are extrapolated from d = 4 (benchmarks/RESULTS.md,
    bench_privhp_join and bench_utility_real). Public parameters only:
    the bounds' count, the integer flags and the other arguments."""
    if args["mechanism"] != "privhp" or args["bounds"] is None or ram_bytes is None \
            or args["bins"] is not None or args["branching"] is not None:
        return False
    lo, _, names = _bounds(args["bounds"], _names(args["names"]), args["integer"])
    cdf_eps = AUTO_CDF_SHARE * args["eps"]
    return len(lo) >= AUTO_CDF_CHANNELS and not positions(args["integer"], names or ["x%d" % i
                                                                                       for i in range(len(lo))]) \
        and cdf_eps.denominator <= MAX_EPS_DEN and (args["eps"] - cdf_eps).denominator <= MAX_EPS_DEN


def _cdf_share(value, mechanism):
    """``value`` as a Fraction in [0, 1) (0: no cdf), or None (the
    measured default, _auto_share_applies); InputError otherwise or when a
    share is given for another mechanism than privhp."""
    if value is None:
        return None
    try:
        share = Fraction(str(value))
    except (ValueError, ZeroDivisionError):
        share = None
    if share is None or not 0 <= share < 1:
        raise InputError("--cdf-share must be a fraction in [0, 1), got %r" % (value,))
    if share and mechanism != "privhp":
        raise InputError("--cdf-share applies to --mechanism privhp (it adds a cdf joined to the tree)")
    return share


def _plan_joined(ram_bytes, share, *, bounds, eps, names, integer, n_max, sketch, rows, clamp_share, uniform_split,
                 hash_seed, relation, device_runtime, depth):
    """privhp at (1 - share) epsilon and cdf at share * epsilon over the
    same channels, combined (plan's cdf_share)."""
    if bounds is None or ram_bytes is None:
        raise InputError("--mechanism privhp needs --bounds and --ram")
    lo, hi, names = _bounds(bounds, names, integer)
    names = names or ["x%d" % i for i in range(len(lo))]
    d = len(lo)
    if len(positions(integer, names)) == d:
        raise InputError("--cdf-share: every channel is integer, and the join leaves integer channels out (their "
                         "in-leaf draw stays a uniform integer): plan without --cdf-share")
    cdf_eps = share * eps
    if cdf_eps.denominator > MAX_EPS_DEN or (eps - cdf_eps).denominator > MAX_EPS_DEN:
        raise InputError("--cdf-share %s of epsilon %s gives a part that needs more than 6 decimal places; round "
                         "the share" % (share, eps))
    # privhp plans first, leaving the cdf its runtime charge and CDF_MIN_BINS bins; the cdf then takes all
    # that privhp's plan leaves (its widths are powers of 2, so a few KiB usually go unused)
    reserve = cdf_heap_need(d, CDF_MIN_BINS, choose_tree(CDF_MIN_BINS), device_runtime)[1]
    if ram_bytes <= reserve:
        raise InputError("--cdf-share %s: --ram %d B cannot hold the cdf part (%d B for %d bins on %s); give more "
                         "RAM or plan without --cdf-share" % (share, ram_bytes, reserve, CDF_MIN_BINS, device_runtime))
    try:
        p_cfg = plan_privhp(lo, hi, eps - cdf_eps, ram_bytes - reserve, names=names, n_max=n_max,
                            sketch=_one_of(sketch, SKETCHES, "--sketch"), j=rows, clamp_share=_share(clamp_share),
                            uniform_split=bool(uniform_split),
                            depth=_int_in(depth, 1, PRIVHP_MAX_DEPTH, "--depth"), hash_seed=hash_seed,
                            relation=relation, runtime=device_runtime)
    except InputError as e:
        raise InputError("--cdf-share %s: the cdf part takes at least %d B of --ram %d B, and privhp does not fit "
                         "the rest: %s" % (share, reserve, ram_bytes, e))
    cdf_ram = ram_bytes - p_cfg["plan"]["expected_peak_bytes"]
    bins = min(choose_bins(d, span_cap(lo, hi), cdf_ram, device_runtime)[0], CDF_MAX_BINS)
    c_cfg = plan_cdf(lo, hi, cdf_eps, bins, names=names, relation=relation, ram=cdf_ram, runtime=device_runtime)
    c_need = c_cfg["plan"]["expected_peak_bytes"]
    cfg = combine([p_cfg, c_cfg])
    p, c = p_cfg["plan"], c_cfg["plan"]
    # the privhp block's keys stay (the plan line and --json read them); the totals cover both parts
    cfg["plan"] = {**p, "combined": cfg["plan"]["combined"], "epsilon": cfg["plan"]["epsilon"],
                   "cdf_share": str(share), "ram_bytes": ram_bytes,
                   "counter_bytes": cfg["plan"]["counter_bytes"],
                   "runtime_overhead_bytes": p["runtime_overhead_bytes"] + c["runtime_overhead_bytes"],
                   "expected_peak_bytes": p["expected_peak_bytes"] + c_need,
                   "cdf": {"bins": c_cfg["mechanisms"][0]["bins"], "epsilon": str(cdf_eps),
                           "expected_peak_bytes": c_need}}
    return cfg


def _plan_phdstream(ram_bytes, bounds, eps, names, integer, relation, device_runtime, depth, counter, max_events,
                    snap, op_name, fold):
    if bounds is None or ram_bytes is None:
        raise InputError("--mechanism phdstream needs --bounds and --ram")
    if integer is not None:
        raise InputError("--integer is implied for phdstream: every channel is integer")
    try:  # every channel is integer: the device's box is integer (bounds in the channel's units, e.g. metres)
        n = len(split_bounds(bounds) if isinstance(bounds, str) else bounds)
    except TypeError:
        raise InputError("--bounds must be 'LO:HI,...', a list of (lo, hi) pairs or a dict of them")
    lo, hi, names = _bounds(bounds, names, list(range(n)))
    if not isinstance(op_name, str) or not 0 < len(op_name) <= 64 or "\x00" in op_name:
        raise InputError("--op-name must be a short column name")
    return plan_phdstream(lo, hi, eps, ram_bytes, names=names, op_name=op_name,
                          depth=_int_in(depth, 1, 28, "--depth"), counter=counter,
                          max_events=_int_in(max_events, 1, 2 ** 22, "--max-events"),
                          snap=_int_in(snap, 1, 2 ** 30, "--snap"), relation=relation, runtime=device_runtime,
                          fold=_int_in(fold, 0, 255, "--fold"))


def _marginal_sets(marginals, schema):
    """Column index tuples of ``marginals`` ("a,b;b,c", or a list of lists
    of column names) over ``schema``; None passes (the planner's default)."""
    if marginals is None:
        return None
    sets = [m.split(",") for m in marginals.split(";")] if isinstance(marginals, str) else marginals
    out = []
    try:
        for names in sets:
            names = [str(n).strip() for n in names if str(n).strip()]
            unknown = [n for n in names if n not in schema.names]
            if unknown:
                raise InputError("--marginals names column %r, not in the schema (%s)"
                                 % (unknown[0], ", ".join(schema.names)))
            idx = tuple(sorted({schema.names.index(n) for n in names}))
            if len(idx) != len(names) or not 1 <= len(idx) <= 3:
                raise InputError("--marginals: each marginal lists 1..3 distinct columns, got %r" % (names,))
            if idx in out:  # measuring it twice would only split its budget
                raise InputError("--marginals lists the marginal %s twice" % ",".join(schema.names[i] for i in idx))
            out.append(idx)
    except TypeError:
        raise InputError("--marginals must be 'a,b;b,c' or a list of lists of column names")
    return out


def _plan_marginals(ram_bytes, eps, schema, marginals, from_generator, relation, device_runtime):
    if from_generator is not None:
        if marginals is not None:
            raise InputError("--from-generator chooses the marginals; leave out --marginals")
        gen = from_generator
        if isinstance(gen, (str, os.PathLike)):
            gen = load_generator(read_input(os.fspath(gen), "a generator"), label(os.fspath(gen)))
        model = gen if isinstance(gen, MarginalsGenerator) else getattr(gen, "model", None)  # es.load's wraps it
        if not isinstance(model, MarginalsGenerator):
            raise InputError("--from-generator needs a marginals generator (edgesynth assemble of marginals frames)")
        if schema is not None and load_schema(schema).to_json() != model.schema.to_json():
            raise InputError("--schema differs from the generator's schema; leave it out to plan on the generator's")
        own = model.meta.get("relation")
        if own is not None and (not isinstance(own, str) or own not in RELATIONS):
            raise InputError("the generator's relation %r is not one of %s" % (own, ", ".join(sorted(RELATIONS))))
        if relation is not None and own is not None and relation != own:
            raise InputError("--relation %s differs from the generator's %s: the windows would not assemble "
                             "together; leave it out to plan under the generator's" % (relation, own))
        relation = relation or own or "add-remove"
        return plan_from_model(model.model, model.schema, eps, ram=ram_bytes, runtime=device_runtime,
                               relation=relation, n_next=model.next_window_records(),
                               frames_next=model.next_window_frames())
    if schema is None:
        raise InputError("--mechanism marginals needs --schema (or --from-generator)")
    schema = load_schema(schema)
    return plan_marginals(schema, eps, ram=ram_bytes, runtime=device_runtime, relation=relation or "add-remove",
                          marginals=_marginal_sets(marginals, schema))


def combine(configs):
    """One device config holding every mechanism of ``configs`` (config
    dicts or paths of config files, at least two), as `edgesynth combine`
    writes it.

    Epsilon adds up (every reading reaches every mechanism); each mechanism
    reads its own named columns. ``plan["counter_bytes"]`` is the exact
    counter bytes of all parts; the runtime overhead of a combined device is
    not measured, so nothing is checked against a RAM budget. InputError when
    the device would refuse the result.
    """
    read_once([c for c in configs if isinstance(c, (str, os.PathLike))])
    cfgs = [load_config(c) if isinstance(c, (str, os.PathLike)) else c for c in configs]
    cfg = combine_configs(cfgs)
    for m in cfg["mechanisms"]:
        if not isinstance(m, dict) or m.get("kind") not in MECHANISMS:
            raise InputError("combined config is invalid: unknown mechanism %r" % (m,))
        if m["kind"] == "phdstream":  # agent/device.py's rule: its frames are one stream of steps
            raise InputError("combined config is invalid: a phdstream mechanism runs alone, its config holds "
                             "no other mechanism")
    try:  # what the device would refuse (tables only: no noise is drawn here)
        mechs = [mechanism_class(m["kind"])(m, RELATIONS[cfg["relation"]]) for m in cfg["mechanisms"]]
        routes(cfg, mechs)
    except (ConfigError, KeyError) as e:
        raise InputError("combined config is invalid: %s" % e)
    cfg["plan"]["counter_bytes"] = sum(m.counter_bytes() for m in mechs)
    return cfg
