"""How close synthetic rows are to the real ones (``edgesynth evaluate``;
the figures are edgesynth.evaluation.metrics.utility_report's)."""
import numpy as np

from edgesynth.config import check_bounds, parse_bounds
from edgesynth.data.tables import as_table, column_names
from edgesynth.errors import EvaluationInputError, InputError
from edgesynth.evaluation.metrics import utility_report
from edgesynth.evaluation.table_metrics import table_report
from edgesynth.mechanisms.marginals.table import encode, load_schema


def box(bounds, columns, x, y):
    """(lo, hi) float arrays of the normalising box of ``columns`` (bounds as
    in evaluate; None: the range of both data sets ``x`` and ``y``)."""
    if bounds is None:  # the range of both data sets, as `edgesynth evaluate` without --bounds
        both = np.vstack([x, y])
        lo, hi = both.min(axis=0), both.max(axis=0)
        return lo, np.where(hi > lo, hi, lo + 1.0)
    if isinstance(bounds, dict) and isinstance(bounds.get("mechanisms"), list):  # a device config
        m = bounds["mechanisms"][0]
        if "lo" not in m or not isinstance(m["lo"], list):
            raise InputError("the config's first mechanism has no per-channel bounds")
        pairs = dict(zip(m["names"], zip(m["lo"], m["hi"])))
        if not all(c in pairs for c in columns):
            raise InputError("the config's channels %s do not cover the columns %s" % (m["names"], columns))
        bounds = [pairs[c] for c in columns]
    elif isinstance(bounds, dict):
        missing = [c for c in columns if c not in bounds]
        if missing:
            raise InputError("bounds has no range for column %r" % missing[0])
        bounds = [bounds[c] for c in columns]
    lo, hi = parse_bounds(bounds) if isinstance(bounds, str) else check_bounds([tuple(p) for p in bounds])
    if len(lo) != len(columns):
        raise InputError("--bounds has %d channels, --columns %d" % (len(lo), len(columns)))
    return np.array(lo, float), np.array(hi, float)


def compared(real, synthetic, columns, what):
    """``(x, y, names)``: the ``columns`` (list, "a,b" or None for the
    synthetic rows' own, else the real ones') of both row sets as float64
    arrays; at least 2 real rows and 1 synthetic row, else an
    EvaluationInputError naming ``what`` needs them."""
    if columns is None:
        columns = column_names(synthetic) or column_names(real)
    elif isinstance(columns, str):
        columns = [c.strip() for c in columns.split(",") if c.strip()]
    x, names = as_table(real, columns, "real")
    y, _ = as_table(synthetic, names, "synthetic")
    if len(x) < 2 or not len(y):
        raise EvaluationInputError("%s needs at least 2 real rows and 1 synthetic row, got %d and %d"
                                   % (what, len(x), len(y)))
    return x, y, names


def evaluate(real, synthetic, columns=None, bounds=None, seed=0, *, progress=None, schema=None):
    """Utility figures of ``synthetic`` rows against ``real`` ones, beside a
    uniform baseline: a JSON-ready dict, what `edgesynth evaluate --json` prints.

    real, synthetic: DataFrames, dicts of columns or arrays (n, d); at least
        2 real rows and 1 synthetic row.
    columns: the columns to compare (default: the synthetic rows' columns,
        or every column of arrays, named x0, x1, ...).
    bounds: the box that normalises every channel to [0, 1] ("LO:HI,...",
        a list of pairs, a dict {column: (lo, hi)} or the device config);
        default the range of both data sets, as the command without --bounds.
    seed: int or numpy Generator for subsampling and the random range queries.
    progress: optional callable ``progress(done, total)``, called after each
        of the 2 d + 6 steps (d columns); the slow ones take seconds on
        10**6 rows.

    Keys (see edgesynth.evaluation.metrics.utility_report): ``synthetic`` and
    ``baseline`` each hold per-channel W1 (``channels``: ``w1`` in data units,
    ``w1_normalized`` in [0, 1]), ``w1_joint`` (l-inf, normalised units) and
    ``range_query_error`` (mean absolute error of box fractions, in [0, 1]);
    ``w1_joint_floor`` is the subsampling floor of the joint figure. Lower
    is better.

    schema: tables of records (a marginals generator's): the public schema
        (a path of a JSON schema or config, a dict or a Schema). ``real`` and
        ``synthetic`` are then DataFrames or dicts of columns of any values,
        encoded to cells by the schema (an unknown or missing value is the
        "other" cell), ``columns`` the data columns of the schema's columns
        in order (default its names), and the result is table_report's:
        average and max total variation over every 2- and 3-way marginal.
    """
    if schema is not None:
        return evaluate_table(real, synthetic, schema, columns)
    x, y, names = compared(real, synthetic, columns, "evaluate")
    lo, hi = box(bounds, names, x, y)
    try:
        rng = np.random.default_rng(seed)
    except (TypeError, ValueError) as e:
        raise InputError("seed must be an int >= 0 or a numpy Generator (%s)" % e)
    return utility_report(x, y, lo, hi, names, rng, progress=progress)


def evaluate_table(real, synthetic, schema, columns=None):
    """Table metrics (edgesynth.evaluation.table_metrics.table_report) of the
    records ``synthetic`` against ``real`` over ``schema`` (see evaluate)."""
    schema = load_schema(schema)
    if isinstance(columns, str):
        columns = [c.strip() for c in columns.split(",") if c.strip()]
    cells = [encode(schema, t, columns) for t in (real, synthetic)]
    if not len(cells[0]) or not len(cells[1]):
        raise EvaluationInputError("evaluate needs at least 1 real and 1 synthetic record, got %d and %d"
                                   % (len(cells[0]), len(cells[1])))
    return table_report(cells[0], cells[1], schema.sizes, schema.names)
