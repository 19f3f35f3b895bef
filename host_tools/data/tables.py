"""Tabular data in and out of the library: a pandas DataFrame, a dict of
columns or a 2-D array in, a float64 array with its column names out; a
DataFrame back for synthetic rows.

Inputs are recognised by shape, not by type, so reading them never imports
pandas: anything with ``columns`` and ``to_numpy`` is a DataFrame, a Mapping
is a dict of columns, anything else goes through ``numpy.asarray``.

Missing values (NaN, None, pandas.NA) are skipped row by row or refused,
the same rule as for files (edgesynth.data.files): whether a row is kept
depends on that row alone, so skipping is safe at the event level.
"""
from collections import namedtuple
from collections.abc import Mapping

import numpy as np

from edgesynth.errors import InputError

MISSING_RULES = ("skip", "error")

Table = namedtuple("Table", "data names skipped source")
Table.__doc__ = """Numeric rows read from a file or a DataFrame: ``data`` a finite float64
array (n, d), ``names`` its d column names, ``skipped`` how many rows were
left out for a missing value, ``source`` what they came from (a path,
"<stdin>" or the argument's name)."""


def check_missing(missing):
    """``missing`` if it is a rule of MISSING_RULES; InputError otherwise."""
    if missing not in MISSING_RULES:
        raise InputError("missing must be 'skip' or 'error', got %r" % (missing,))
    return missing


def _column(values, name, what):
    """One column as a 1-D float64 array, NaN where a value is missing
    (NaN, None, pandas.NA); InputError naming it otherwise."""
    try:
        if hasattr(values, "to_numpy"):  # a pandas Series: pandas.NA only converts this way
            col = values.to_numpy(dtype=np.float64, na_value=np.nan)
        else:
            col = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError("%s: column %r is not numeric" % (what, name))
    if col.ndim != 1:
        raise InputError("%s: column %r must be one-dimensional, got shape %s" % (what, name, col.shape))
    return col


def is_frame(data):
    """True for a pandas DataFrame (or anything shaped like one)."""
    return hasattr(data, "columns") and hasattr(data, "to_numpy")


def column_names(data):
    """The column names of a DataFrame or dict of columns as strings, else None."""
    if is_frame(data):
        return [str(c) for c in data.columns]
    if isinstance(data, Mapping):
        return [str(c) for c in data]
    return None


def as_table(data, names=None, what="data", missing="skip"):
    """``(x, names)`` of ``to_table``: ``x`` a finite float64 array (n, d)."""
    table = to_table(data, names, what, missing=missing)
    return table.data, table.names


def to_table(data, names=None, what="data", *, missing="skip"):
    """A Table of ``data``'s rows without a missing value.

    ``data`` is a DataFrame or dict of columns (``names`` picks columns by
    name, default all of them in order) or an array-like of shape (n, d) or
    (n,) (``names`` names its columns in order, default x0, x1, ...).
    A row with a missing value (NaN, None, pandas.NA) in one of these
    columns is left out and counted (``missing="skip"``) or refused with an
    InputError naming the column and row (``missing="error"``); an infinity
    is always refused. ``what`` names the argument in error messages.
    """
    check_missing(missing)
    x, names = numeric(data, names, what)
    keep = complete_rows(x, names, what, missing)
    if not keep.all():
        x = x[keep]
    return Table(x, names, int(keep.size - np.count_nonzero(keep)), what)


def complete_rows(x, names, what, missing, first=0):
    """Boolean mask of the rows of float64 ``x`` (n, d) without NaN; with
    ``missing="error"`` a NaN is an InputError naming its column and row
    (rows counted from ``first``). An infinity is an InputError either way."""
    inf = np.isinf(x)
    if inf.any():
        row, col = np.argwhere(inf)[0]
        raise InputError("%s: row %d, column %r: %r is not a finite number"
                         % (what, row + first, names[col], float(x[row, col])))
    nan = np.isnan(x)
    if missing == "error" and nan.any():
        row, col = np.argwhere(nan)[0]
        raise InputError("%s: row %d, column %r: missing value" % (what, row + first, names[col]))
    return ~nan.any(axis=1)


def numeric(data, names, what):
    """``(x, names)``: ``data`` (as to_table takes it) as a float64 array
    (n, d) with every row, NaN where a value is missing."""
    given = column_names(data)
    if given is not None:
        names = list(given if names is None else names)
        labels = dict(zip(given, data.columns if is_frame(data) else data))
        missing = [c for c in names if c not in labels]
        if missing:
            raise InputError("%s has no column %r (columns: %s)" % (what, missing[0], ", ".join(given)))
        cols = [_column(data[labels[c]], c, what) for c in names]
        if len({c.size for c in cols}) > 1:
            raise InputError("%s: columns %s have different lengths" % (what, ", ".join(names)))
        n = cols[0].size if cols else 0
        x = np.column_stack(cols) if cols else np.empty((n, 0))
    else:
        try:
            x = np.asarray(data, dtype=np.float64)
        except (TypeError, ValueError):
            raise InputError("%s must be a DataFrame, a dict of columns or a numeric 2-D array" % what)
        if x.ndim == 1:
            x = x[:, None]
        if x.ndim != 2:
            raise InputError("%s must be two-dimensional (rows, columns), got shape %s" % (what, x.shape))
        names = ["x%d" % i for i in range(x.shape[1])] if names is None else list(names)
        if len(names) != x.shape[1]:
            raise InputError("%s has %d columns but %d names were given (%s)"
                             % (what, x.shape[1], len(names), ", ".join(map(str, names))))
    if not names:
        raise InputError("%s has no columns" % what)
    if len(set(names)) != len(names):
        raise InputError("%s: a column is named twice (%s)" % (what, ", ".join(map(str, names))))
    return x, [str(c) for c in names]


def pick(data, name, what="data"):
    """Column ``name`` of a DataFrame or dict of columns, as it is (any dtype)."""
    if column_names(data) is None:
        raise InputError("%s: a column named %r needs a DataFrame or a dict of columns" % (what, name))
    if name not in data:
        raise InputError("%s has no column %r" % (what, name))
    return data[name]


def to_frame(x, names):
    """A pandas DataFrame of the rows ``x`` (n, d) under ``names``."""
    import pandas  # ~0.2 s to import: only DataFrame output needs it (the CLI writes arrays)
    return pandas.DataFrame(x, columns=list(names))
