"""Tabular data in and out of the library: a pandas DataFrame, a dict of
columns or a 2-D array in, a float64 array with its column names out; a
DataFrame back for synthetic rows.

Inputs are recognised by shape, not by type, so reading them never imports
pandas: anything with ``columns`` and ``to_numpy`` is a DataFrame, a Mapping
is a dict of columns, anything else goes through ``numpy.asarray``.
"""
from collections.abc import Mapping

import numpy as np

from edgesynth.errors import InputError


def _column(values, name, what):
    """One column as a 1-D float64 array; InputError naming it otherwise."""
    try:
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


def as_table(data, names=None, what="data"):
    """``(x, names)``: ``x`` a finite float64 array of shape (n, d).

    ``data`` is a DataFrame or dict of columns (``names`` picks columns by
    name, default all of them in order) or an array-like of shape (n, d) or
    (n,) (``names`` names its columns in order, default x0, x1, ...).
    ``what`` names the argument in error messages.
    """
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
    bad = ~np.all(np.isfinite(x), axis=0)
    if bad.any():
        raise InputError("%s: column %r holds a value that is not a finite number"
                         % (what, names[int(np.argmax(bad))]))
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
