"""Integer channels: how a frame states them, which integers a cell holds,
how one is drawn, and the per-channel flag a generator file carries.

A channel is integer when its plan declared it (its config bounds are ints).
The device releases an integer channel's bounds as msgpack ints and every
other channel's as float64 (docs/wire-format.md), so the flag travels from
the plan through the frames to the generator, whose file keeps it. Frames
and generator files written before integer channels existed carry floats
only, and so decode and load as all real-valued.
"""
import math

import numpy as np

from edgesynth.agent.privhp.build import MAX_INT_SPAN
from edgesynth.agent.spec import MAX_CHANNELS
from edgesynth.errors import InputError, SchemaError

EXACT_F64 = 1 << 53  # integer bounds must convert to float64 exactly
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
# int bounds the C core's i32 paths take (readings clip outside), so every
# runtime, the planner and the host decoder hold phdstream bounds to them
INT32_SAFE = (INT32_MIN + 1, INT32_MAX - 1)


def finest(lo, hi, width):
    """A finest cell's ``width`` in the channel's units as a plan reports it:
    on an integer channel (int ``lo`` and ``hi``) at least 1, since a
    narrower cell holds at most one integer."""
    return max(width, 1) if isinstance(lo, int) and isinstance(hi, int) else width


def frame_bounds(m, kind, max_int_span):
    """(lo, hi, integer) of a decoded privhp or cdf map ``m``: float64 arrays
    and one bool per channel. A channel whose lo and hi are both ints (below
    2**53 in magnitude, span at most ``max_int_span``, the device's) is
    integer; both finite floats, real-valued; anything else is a
    SchemaError naming ``kind``."""
    lo, hi = m["lo"], m["hi"]
    if not isinstance(lo, list) or not 1 <= len(lo) <= MAX_CHANNELS or not isinstance(hi, list) \
            or len(hi) != len(lo):
        raise SchemaError("%s.lo and %s.hi must list 1..%d bounds each, as many of one as of the other"
                          % (kind, kind, MAX_CHANNELS))
    integer = []
    ordered = True   # every real channel has lo < hi and a finite float64 span (integer ones do, checked here)
    for i, (a, b) in enumerate(zip(lo, hi)):
        if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool) and not isinstance(b, bool):
            if not (abs(a) < EXACT_F64 and abs(b) < EXACT_F64 and 0 < b - a <= max_int_span):
                raise SchemaError("%s channel %d: integer bounds must satisfy lo < hi, a span of at most %d "
                                  "and magnitudes below 2**53" % (kind, i, max_int_span))
            integer.append(True)
        elif isinstance(a, float) and isinstance(b, float) and math.isfinite(a) and math.isfinite(b):
            integer.append(False)
            ordered = ordered and a < b and math.isfinite(b - a)  # Python floats are float64: numpy's result
        else:
            raise SchemaError("%s channel %d: lo and hi must be two integers (an integer channel) or two "
                              "finite float64 values" % (kind, i))
    if not ordered:
        raise SchemaError("%s bounds must satisfy lo < hi with a finite span" % kind)
    return np.array(lo, dtype=np.float64), np.array(hi, dtype=np.float64), integer


def cell_integers(q, parts, lo, hi):
    """(first, count) int64 arrays: the integers of cell ``q`` of ``parts``
    equal half-open parts of a channel with integer bounds [lo, hi] (the
    last part also holds hi), as the device bins them: x is in cell
    floor((x - lo) * parts / (hi - lo)), in exact integer arithmetic. A cell
    holding none gets its rounded centre (count 1)."""
    q, parts = np.asarray(q, np.int64), np.asarray(parts, np.int64)
    lo, span = int(lo), int(hi) - int(lo)
    first = -(-q * span // parts)                      # ceil(q span / parts): products stay below 2**59
    last = np.where(q + 1 >= parts, span, -(-(q + 1) * span // parts) - 1)
    empty = last < first
    centre = np.rint((2 * q + 1) * (span / 2.0) / parts).astype(np.int64)
    first = np.where(empty, centre, first)
    count = np.where(empty, 1, last - first + 1)
    return lo + first, count


def draw(first, count, u):
    """Uniform integers of the cells (first, count), from uniforms ``u`` in
    [0, 1) (same shape), as float64: first + floor(u * count) (capped at
    count - 1 should u * count round up to count)."""
    return first + np.minimum(np.floor(u * count), count - 1)


def check_flags(integer, names, lo, hi, source):
    """``integer`` (None, or one bool per channel) as a list of bools; a
    flagged channel needs whole-number bounds whose span is at most
    MAX_INT_SPAN, as the device's. InputError naming ``source``."""
    d = len(names)
    if integer is None:
        return [False] * d
    if not isinstance(integer, (list, tuple)) or len(integer) != d or not all(isinstance(x, bool) for x in integer):
        raise InputError("%s: the integer flags must list %d booleans" % (source, d))
    for name, flag, a, b in zip(names, integer, lo, hi):
        if flag and not (float(a).is_integer() and float(b).is_integer()):
            raise InputError("%s: channel %s is integer but its bounds [%r, %r] are not whole numbers"
                             % (source, name, float(a), float(b)))
        if flag and float(b) - float(a) > MAX_INT_SPAN:
            raise InputError("%s: channel %s is integer but its span exceeds 2**29 - 1" % (source, name))
    return list(integer)


def positions(integer, names):
    """Sorted 0-based positions of the channels ``integer`` declares integer:
    names ('temp,count' or a list), or 0-based positions (ints, or digit
    strings that are not a channel's name); None declares none. InputError
    listing the channels when one is not among ``names``."""
    if integer is None:
        return []
    if isinstance(integer, str):
        items = [c.strip() for c in integer.split(",") if c.strip()]
    elif isinstance(integer, (list, tuple, set, frozenset)):
        items = list(integer)
    else:
        raise InputError("--integer must be 'a,b' or a list of channel names, got %s" % type(integer).__name__)
    out, unknown = [], []
    for item in items:
        if isinstance(item, str) and item in names:
            out.append(names.index(item))
        elif isinstance(item, (int, str)) and not isinstance(item, bool) and str(item).isdigit() \
                and int(item) < len(names):
            out.append(int(item))
        else:
            unknown.append(str(item))
    if unknown:
        raise InputError("--integer names no channel %s; the channels are %s"
                         % (", ".join(repr(u) for u in unknown), ", ".join(names)))
    return sorted(set(out))
