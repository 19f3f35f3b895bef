"""Device configs: the public JSON a planner writes and a device reads (docs/config.md).

Parsing of public bounds, building, loading, writing and combining configs,
and the view a device stores (without the planner's notes). Each mechanism's
planner (edgesynth.mechanisms.<name>.plan) fills in its own part.
"""
import json
import math
import numbers
from fractions import Fraction

from edgesynth.agent.privhp.build import MAX_INT_SPAN
from edgesynth.channels import spec_names
from edgesynth.errors import InputError
from edgesynth.filekind import check as check_kind
from edgesynth.outputs import write_text
from edgesynth.stdio import label, read_input


def write_config(path, obj):
    """Write the config ``obj`` as JSON to ``path`` (atomically), or to stdout for "-"."""
    write_text(path, json.dumps(obj, indent=1, sort_keys=True) + "\n")


def combine(cfgs):
    """One device config holding every mechanism of ``cfgs`` (a list of dicts).

    Budgets stay each mechanism's own exact fractions; the device epsilon is
    their sum (sequential composition: every reading reaches every mechanism).
    """
    if len(cfgs) < 2:
        raise InputError("combine needs at least two configs")
    relations = {c.get("relation", "add-remove") for c in cfgs}
    if len(relations) != 1:
        raise InputError("configs use different neighbouring relations %s" % sorted(relations))
    mechs, eps, plans = [], Fraction(0), []
    for c in cfgs:
        if c.get("format") != 1 or not isinstance(c.get("mechanisms"), list):
            raise InputError("not an edgesynth device config")
        e = c.get("epsilon")
        eps += Fraction(e[0], e[1])
        mechs.extend(c["mechanisms"])
        plans.append(c.get("plan", {}))
    if len(mechs) > 8:
        raise InputError("a device holds at most 8 mechanisms")
    _check_marginals_columns(mechs)
    return {"format": 1, "epsilon": [eps.numerator, eps.denominator], "relation": relations.pop(),
            "mechanisms": mechs, "plan": {"combined": plans, "epsilon": str(eps)}}


def _check_marginals_columns(mechs):
    """Refuse a channel read by a marginals mechanism and another mechanism:
    the marginals one reads it as cell indices of its schema, the other as
    raw readings, and one reading holds one value per channel (the device
    refuses the same config, agent/device.py routes)."""
    for i, m in enumerate(mechs):
        for j in range(i + 1, len(mechs)):
            if "marginals" not in (m.get("kind"), mechs[j].get("kind")):
                continue
            shared = [n for n in spec_names(m) if n in spec_names(mechs[j])]
            if shared:
                raise InputError("channel %r is read by mechanism %d (%s) and mechanism %d (%s); a marginals "
                                 "column holds cell indices, so no other mechanism may read it: rename one"
                                 % (shared[0], i, m.get("kind"), j, mechs[j].get("kind")))


def split_bounds(text):
    """'LO:HI[,LO:HI...]' -> [(lo, hi), ...] as written: int where the text
    is an integer, float otherwise (check_bounds decides the channel type)."""
    pairs = []
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
                if not math.isfinite(v):  # named as written
                    raise InputError("bound %d: %r is not finite" % (i + 1, b))
            vals.append(v)
        pairs.append(tuple(vals))
    return pairs


def parse_bounds(text, integer=()):
    """'LO:HI[,LO:HI...]' -> (lo list, hi list), typed by check_bounds."""
    return check_bounds(split_bounds(text), integer)


def check_bounds(pairs, integer=(), names=None):
    """``[(lo, hi), ...]`` -> (lo list, hi list), each pair a finite lo < hi.

    How a number is written does not matter: the channels at the 0-based
    positions ``integer`` (declared integer channels, e.g. ADC codes) need
    whole-number bounds and keep them as ints, which makes them integer
    channels on the device; every other channel's bounds become floats.
    ``names`` (optional) name the channels in messages. InputError naming the
    bound (1-based) otherwise.
    """
    integer = set(integer)
    lo, hi = [], []
    for i, pair in enumerate(pairs):
        label = "bound %d" % (i + 1) if names is None else "bound %d (%s)" % (i + 1, names[i])
        if len(pair) != 2:
            raise InputError("%s (%r) must be a (lo, hi) pair" % (label, pair))
        vals = []
        for v in pair:
            if isinstance(v, bool) or not isinstance(v, numbers.Real):
                raise InputError("%s: %r is not a number" % (label, v))
            try:
                f = float(v)
            except OverflowError:
                f = math.inf
            if not math.isfinite(f):
                raise InputError("%s: %r is not finite" % (label, v))
            if i in integer:
                if f != math.floor(f):
                    raise InputError("%s: %r is not a whole number; an integer channel needs integer bounds"
                                     % (label, v))
                v = int(v)
            else:
                v = f
            vals.append(v)
        if not vals[0] < vals[1]:
            raise InputError("%s: LO (%s) must be below HI (%s)" % (label, pair[0], pair[1]))  # as given
        if not math.isfinite(float(vals[1]) - float(vals[0])):
            raise InputError("%s: HI - LO overflows a double; narrow the range" % label)
        if i in integer and vals[1] - vals[0] > MAX_INT_SPAN:
            raise InputError("%s: integer span exceeds 2**29 - 1; do not declare it integer" % label)
        lo.append(vals[0])
        hi.append(vals[1])
    if not lo:
        raise InputError("--bounds needs at least one LO:HI range")
    return lo, hi


def device_config(eps, relation, mech, notes):
    """The public device config of one mechanism (docs/config.md) with the
    planner's ``notes`` as its "plan" block, which the device ignores."""
    return {"format": 1, "epsilon": [eps.numerator, eps.denominator], "relation": relation,
            "mechanisms": [mech], "plan": notes}


def load_config(path):
    """The public device config written by `edgesynth plan`; "-" reads it from stdin."""
    data = read_input(path)
    try:
        cfg = json.loads(data.decode("utf-8"))
    except ValueError as e:  # UnicodeDecodeError too
        check_kind(path, "config", data)  # another edgesynth file: say which and what takes it
        raise InputError("%s: not valid JSON (%s)" % (label(path), e))
    if not isinstance(cfg, dict) or not isinstance(cfg.get("mechanisms"), list):
        check_kind(path, "config", data)
        raise InputError("%s: not an edgesynth device config (run `edgesynth plan`)" % label(path))
    return cfg


def with_names(cfg, columns):
    """A copy of ``cfg`` whose readings hold the channels ``columns`` in
    order ("inputs"). The mechanisms' names never change (they are part of
    the config id): each mechanism's names must be among ``columns``."""
    columns = list(columns)
    out = json.loads(json.dumps(cfg))
    for i, m in enumerate(out["mechanisms"]):
        names = spec_names(m)
        missing = [c for c in names if c not in columns]
        if not names or missing:
            raise InputError("mechanism %d (%s) reads channels %s; the readings hold %s"
                             % (i, m.get("kind"), names, ", ".join(map(str, columns))))
    out["inputs"] = columns
    return out


def for_device(cfg):
    """The config as a device stores it: without the planner's notes."""
    return {k: v for k, v in cfg.items() if k != "plan"}
