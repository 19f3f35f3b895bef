"""The public schema of a table: each column's name and public domain
(docs/mechanisms/marginals.md, "Device state").

    {"columns": [{"name": "site", "values": ["A", "B"]},
                 {"name": "hour", "values": [0, 1, 2]},
                 {"name": "temp", "bounds": [-40, 60], "bins": 20}]}

A categorical column (``values``: strings, integers or finite floats, all
distinct under ``repeats``: 1, 1.0, "1" and "1.0" are one value) has len(values) + 1 cells; a binned column
(``bounds`` [lo, hi], ``bins`` k) has k + 1 cells: bin b holds
e[b] <= x < e[b+1] for the edges e = numpy.linspace(lo, hi, k + 1), and
x = hi is in bin k-1. The edges must be distinct doubles (a bin narrower
than float resolution could hold no value), so that decoding and encoding
are exact inverses: every decoded number encodes back to its bin.
A value read from data matches a schema string only as the same text
("007" is not 7) and a schema number when numerically equal to it (the
number 3.0, or the text "3", "3.0" or "3e0", is the value 3): _find.
The last cell of every column is the reserved "other" cell: a value outside
the domain (an unknown category, a number outside [lo, hi], NaN, a missing
value) is counted there, never dropped.

Decoding draws a categorical cell's value, or a uniform number inside a bin;
the "other" cell decodes to the sentinel OTHER_CATEGORY (None) in a
categorical column and OTHER_NUMBER (NaN) in a binned one: both are
pandas' missing values, and both encode back to "other".

The schema is public: it must come from domain knowledge, never from the data.
"""
import math

import numpy as np

from edgesynth.agent.marginals.build import INT32, MAX_NAME, MAX_SIZE, MAX_VALUES
from edgesynth.agent.spec import MAX_CHANNELS
from edgesynth.errors import InputError

OTHER_CATEGORY = None
OTHER_NUMBER = float("nan")


class Schema:
    """Public column domains. ``names`` (list of str), ``sizes`` (list of
    int: cells per column, "other" included), ``columns`` (the checked JSON
    entries)."""

    def __init__(self, columns):
        self.columns = columns
        self.names = [c["name"] for c in columns]
        self.sizes = [len(c["values"]) + 1 if "values" in c else c["bins"] + 1 for c in columns]
        self._lookup = [_lookup(c["values"]) if "values" in c else None for c in columns]
        self._edges = [None if "values" in c else _edges(c) for c in columns]

    @classmethod
    def from_json(cls, obj):
        """The schema of ``obj`` (a dict as above); InputError naming the
        column and field when it is malformed."""
        if not isinstance(obj, dict) or set(obj) != {"columns"}:
            raise InputError('a schema is an object with one key, "columns"')
        cols = obj["columns"]
        if not isinstance(cols, list) or not 1 <= len(cols) <= MAX_CHANNELS:
            raise InputError("schema.columns must list 1..%d columns" % MAX_CHANNELS)
        out, seen = [], set()
        for i, c in enumerate(cols):
            col = _column(i, c)
            if col["name"] in seen:
                raise InputError("schema column %d: name %r is used twice" % (i, col["name"]))
            seen.add(col["name"])
            out.append(col)
        if sum(len(c.get("values", ())) for c in out) > MAX_VALUES:
            raise InputError("a schema holds at most %d categorical values in all (a device frame carries them)"
                             % MAX_VALUES)
        return cls(out)

    def to_json(self):
        """The JSON-ready schema (as from_json accepts it)."""
        return {"columns": [dict(c) for c in self.columns]}

    def encode_column(self, i, values):
        """Cell indices (int64 array) of column ``i`` for ``values`` (any 1-D
        sequence); a value outside the domain gets the "other" cell."""
        other = self.sizes[i] - 1
        col = self.columns[i]
        if "values" in col:
            texts, nums = self._lookup[i]
            return np.fromiter((_find(texts, nums, v, other) for v in _as_list(values)), dtype=np.int64)
        e = self._edges[i]
        x = _as_numbers(values)
        with np.errstate(invalid="ignore"):
            inside = (x >= e[0]) & (x <= e[-1])  # False for NaN
        b = np.searchsorted(e, np.where(inside, x, e[0]), side="right") - 1
        b = np.minimum(b, len(e) - 2)  # x = hi in the last bin
        return np.where(inside, b, other).astype(np.int64)

    def decode_column(self, i, cells, rng):
        """Values of column ``i`` for the cell indices ``cells``: a
        categorical column's values (object array; OTHER_CATEGORY for
        "other"), or a binned column's numbers drawn uniformly inside their
        bins with ``rng`` (float64 array; OTHER_NUMBER for "other")."""
        cells = np.asarray(cells, dtype=np.int64)
        if cells.size and (cells.min() < 0 or cells.max() >= self.sizes[i]):
            raise InputError("column %s has cells 0..%d" % (self.names[i], self.sizes[i] - 1))
        col = self.columns[i]
        if "values" in col:
            table = np.empty(self.sizes[i], dtype=object)
            table[:-1] = col["values"]
            table[-1] = OTHER_CATEGORY
            return table[cells]
        e = self._edges[i]
        k = len(e) - 1
        b = np.minimum(cells, k - 1)
        left, right = e[b], e[b + 1]
        x = left + rng.random(cells.shape) * (right - left)
        # rounding may reach the right edge: stay inside the bin (the last bin holds hi itself)
        top = np.where(b == k - 1, right, np.nextafter(right, -np.inf))
        x = np.clip(x, left, top)
        return np.where(cells == k, OTHER_NUMBER, x)


def _column(i, c):
    """The checked JSON entry of column ``i``."""
    if not isinstance(c, dict):
        raise InputError("schema column %d must be an object" % i)
    name = c.get("name")
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME or "\x00" in name:
        raise InputError("schema column %d: name must be a string of 1..%d characters" % (i, MAX_NAME))
    what = "schema column %d (%s)" % (i, name)
    keys = set(c)
    if keys == {"name", "values"}:
        vals = c["values"]
        if not isinstance(vals, list) or not 1 <= len(vals) <= MAX_SIZE - 1:
            raise InputError("%s: values must list 1..%d values" % (what, MAX_SIZE - 1))
        for v in vals:
            if isinstance(v, bool) or not isinstance(v, (str, int, float)) or \
                    (isinstance(v, float) and not math.isfinite(v)):
                raise InputError("%s: value %r is not a string, an integer or a finite number" % (what, v))
            if isinstance(v, int) and not -INT32 <= v < INT32:
                raise InputError("%s: integer value %d is outside int32" % (what, v))
            if isinstance(v, str) and len(v) > MAX_NAME:
                raise InputError("%s: a string value is longer than %d characters" % (what, MAX_NAME))
            if v == "":  # an empty CSV cell is a missing value ("other"): "" could never be read back
                raise InputError('%s: "" is not a value (an empty cell is a missing value, the "other" cell)' % what)
        if repeats(vals):
            raise InputError("%s: values repeat (also as strings: 1 and \"1\" are the same value)" % what)
        return {"name": name, "values": list(vals)}
    if keys == {"name", "bounds", "bins"}:
        b, k = c["bounds"], c["bins"]
        if not isinstance(b, list) or len(b) != 2 or any(isinstance(v, bool) or not isinstance(v, (int, float))
                                                        or not _finite(v) for v in b) or not b[0] < b[1]:
            raise InputError("%s: bounds must be [lo, hi], two finite numbers with lo < hi" % what)
        if not math.isfinite(float(b[1]) - float(b[0])):
            raise InputError("%s: hi - lo overflows a double" % what)
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_SIZE - 1:
            raise InputError("%s: bins must be an integer in [1, %d]" % (what, MAX_SIZE - 1))
        col = {"name": name, "bounds": [float(b[0]), float(b[1])], "bins": k}
        e = _edges(col)
        if not (np.all(np.isfinite(e)) and np.all(np.diff(e) > 0)):
            raise InputError("%s: %d bins of [%r, %r] are narrower than a double's resolution there; "
                             "use fewer bins" % (what, k, b[0], b[1]))
        return col
    raise InputError('%s must have "values", or "bounds" and "bins" (got keys %s)' % (what, ", ".join(sorted(keys))))


def _finite(v):
    """Whether the number ``v`` is a finite double (an int beyond a double's range is not)."""
    try:
        return math.isfinite(v)
    except OverflowError:
        return False


def _edges(col):
    """float64 bin edges of a checked binned column."""
    lo, hi = col["bounds"]
    with np.errstate(over="ignore"):  # k * step may round past the largest double; the last edge is set to hi
        return np.linspace(lo, hi, col["bins"] + 1)


def _missing(v):
    """None, NaN, pandas.NA or NaT: the values unequal to themselves."""
    if v is None:
        return True
    try:
        return bool(v != v)
    except TypeError:  # pandas.NA: its comparisons are NA, whose truth is undefined
        return True


def repeats(vals):
    """True when a column's ``vals`` (str, int, finite float) repeat a value:
    numbers by numeric value (1 and 1.0), strings by text, and a string
    whose float() equals a number of the column repeats that number ("1",
    "1.0", "1e0" and 1). The device applies the same rule
    (agent/marginals/build.py), with no text built for a number:
    MicroPython's float repr is not CPython's. A non-ASCII string is no
    number here ("\u0661" parses on CPython only). Stricter than distinct
    _key texts, so _find never matches one input to two values."""
    nums = {v for v in vals if not isinstance(v, str)}
    texts = {v for v in vals if isinstance(v, str)}
    if len(nums) + len(texts) != len(vals):
        return True
    for s in texts:
        try:
            if s.isascii() and float(s) in nums:
                return True
        except ValueError:
            pass
    return False


def _key(v):
    """The canonical text of a value, which schema values must not share
    (1, 1.0 and "1" are one value; "1.0" and 1 are two) and which a number
    is written as in a text column (value_text): an int's digits, an
    integral float's integer digits (3.0 is "3"), another float's repr. A
    missing value (None, NaN, pandas.NA, NaT) has the key None, which no
    value has (the string "None" is a value like any other)."""
    if _missing(v) or (isinstance(v, (float, np.floating)) and not math.isfinite(v)):
        return None
    if isinstance(v, (float, np.floating)) and math.isfinite(v) and float(v).is_integer():
        return str(int(v))
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        return str(int(v))
    return str(v)


def value_text(v):
    """The text a schema value is written as in a text (CSV, or a column of
    mixed kinds) and read back from: a string itself, a number its
    canonical text (_key), which no string value of the schema is, so it
    reads back to the number's cell (numbers are matched numerically)."""
    return v if isinstance(v, str) else _key(v)


def _lookup(values):
    """({string value: cell}, {float(numeric value): cell}) of a column."""
    texts = {v: j for j, v in enumerate(values) if isinstance(v, str)}
    nums = {float(v): j for j, v in enumerate(values) if not isinstance(v, str)}
    return texts, nums


def _find(texts, nums, v, other):
    """The cell of the value ``v`` read from data (``other`` when none).

    A schema STRING value matches the same text only ("007" is not "7"). A
    schema NUMERIC value (int or float) matches any input numerically equal
    to it: a number, or text that parses as a finite number ("3", "3.0",
    "3e0" all match 3; Python's float syntax without "_"). Text is matched
    against the strings first; a number that matches no numeric value
    matches the string of its canonical text (an int column of a DataFrame
    read against string categories "1", "2"). The schema's values are
    distinct under _key, so no input can match two of them in one way."""
    if isinstance(v, str):
        j = texts.get(v)
        if j is None and nums and "_" not in v:
            try:
                f = float(v)
            except ValueError:
                return other
            j = nums.get(f) if math.isfinite(f) else None
        return other if j is None else j
    if _missing(v):
        return other
    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)):
        try:
            f = float(v)
        except OverflowError:  # an int beyond a double: no value of the schema (int32 or a double)
            return other
        if not math.isfinite(f):
            return other
        j = nums.get(f)
        if j is None and texts:
            j = texts.get(_key(v))
        return other if j is None else j
    return texts.get(str(v), other)


def _as_list(values):
    if hasattr(values, "tolist"):
        return values.tolist()
    return list(values)


def _as_numbers(values):
    """float64 array of ``values``; an entry that is not a number, or an int
    beyond a double's range, is NaN (its record counts in the "other" cell)."""
    try:
        return np.asarray(values, dtype=np.float64).ravel()
    except (TypeError, ValueError, OverflowError):
        out = np.empty(len(values))
        for j, v in enumerate(_as_list(values)):
            try:
                out[j] = float(v)
            except (TypeError, ValueError, OverflowError):
                out[j] = np.nan
        return out
