"""Private synthetic data from a table in one step, with no device in sight
(``edgesynth synthesize``; docs/api.md).

The host plays the device: it plans PrivHP for a host-sized memory budget,
runs the agent's C core over the rows (the numpy runtime, same bytes, where
the core is not built), assembles the release and samples from it. The
privacy guarantee is the device's: epsilon per row, with the public
parameters (bounds, epsilon, the row bound ``n_max``, the budget) fixed
before the data are read. Nothing is read off the data, not even their
number of rows, so the number of synthetic rows ``n`` is always given.
"""
import hashlib
from collections.abc import Mapping

import numpy as np

from edgesynth.data.tables import as_table, column_names
from edgesynth.errors import InputError
from edgesynth.mechanisms.privhp.plan import DEFAULT_N_MAX
from edgesynth.planning import plan
from edgesynth.runtimes import native
from edgesynth.simulation import seed_bytes, simulate
from edgesynth.synthesis import MAX_SAMPLE, assemble

# The agent's budget on the host, bytes. The planner uses all of it that its
# error model says improves accuracy: at 16 MiB that is often the complete
# tree (2 MiB of counters for d = 2, eps = 1, n_max = 10**6), which costs host
# time (10**5 rows: fit 1.6 s vs 0.2 s at 170K on the C core, about 8.5 s vs
# 0.7 s on numpy); pass a smaller ram for a faster, coarser run.
HOST_RAM = "16M"


def runtime():
    """The fastest runtime here: "native" (the C core) when its extension is
    built, else "numpy" (same bytes, slower)."""
    return "native" if native.available() else "numpy"


def _channels(data, bounds, columns):
    """(columns, bounds) in channel order: ``columns`` as given, else the
    bounds' keys, else every column of a DataFrame or dict."""
    if isinstance(columns, str):
        columns = [c.strip() for c in columns.split(",") if c.strip()]
    if isinstance(bounds, Mapping):
        by_name = {str(k): v for k, v in bounds.items()}
        columns = list(by_name) if columns is None else [str(c) for c in columns]
        missing = [c for c in columns if c not in by_name]
        if missing:
            raise InputError("--bounds has no range for column %r" % missing[0])
        bounds = [by_name[c] for c in columns]
    elif columns is None:
        columns = column_names(data)
    return (None if columns is None else list(columns)), bounds


def fit(data, *, bounds, epsilon, columns=None, integer=None, seed=None, ram=HOST_RAM, n_max=DEFAULT_N_MAX,
        progress=None):
    """``(generator, cfg)``: the Generator of a device planned for a host-sized
    budget that read every row of ``data``, and that device's config; sample
    it as often as you like (post-processing). Arguments as in synthesize;
    ``progress(done, total)`` is called as rows reach the agent (``total``:
    the rows of ``data``)."""
    if bounds is None:
        raise InputError("--bounds is required: the public range of every column, never read off the data")
    columns, bounds = _channels(data, bounds, columns)
    x, names = as_table(data, columns, "data")
    return _fit(x, names, bounds, epsilon, integer, seed_bytes(seed), ram, n_max, progress, len(x))


def _fit(x, names, bounds, epsilon, integer, seed, ram, n_max, progress, total):
    """fit on the float64 rows ``x``; ``progress(done, total)``."""
    ranges = len(bounds.split(",")) if isinstance(bounds, str) else len(bounds) if hasattr(bounds, "__len__") else None
    if ranges is not None and ranges != len(names):  # before plan, which would say "names"
        raise InputError("--bounds has %d ranges for %d columns (%s)" % (ranges, len(names), ", ".join(names)))
    extra = {} if integer is None else {"integer": integer}
    cfg = plan(bounds, epsilon=epsilon, ram=ram, names=names, n_max=n_max, device_runtime="c",
               hash_seed=None if seed is None else "synthesize-" + hashlib.sha256(seed).hexdigest()[:32], **extra)
    done = 0

    def fed(rows):
        nonlocal done
        done += rows
        progress(done, total)
    frame = simulate(cfg, x, seed, runtime=runtime(), columns=names, device_id="host",
                     progress=fed if progress else None)
    return assemble([frame]), cfg


def synthesize(data, *, bounds, epsilon, n, columns=None, integer=None, seed=None, ram=HOST_RAM,
               n_max=DEFAULT_N_MAX, progress=None):
    """``n`` rows of private synthetic data like ``data``, as a DataFrame.

    Plans PrivHP for ``ram`` bytes (default 16 MiB, a host's budget; the C
    core's runtime; with 3 or more real-valued columns plan's default adds
    per-column CDFs at 0.3 epsilon that assembly joins to the tree,
    docs/mechanisms/privhp.md "Joined CDFs"), runs the agent over ``data``
    on the fastest runtime, assembles its release and samples ``n`` rows.

    data: a DataFrame, a dict of columns or an array (rows, d).
    bounds: the public range of each column, never read off the data: a dict
        ``{"temp": (0, 110), ...}``, a list of (lo, hi) pairs or
        "0:110,0:100". Values outside are clamped onto the edge.
    epsilon: privacy budget per row, > 0 and at most 100 (1, 0.5, "1/3").
    n: synthetic rows to draw, 0..10**9. Required: the real row count is
        private and is never used.
    columns: the columns to use, in order (list or "a,b"; default the
        bounds' keys, else every column); they name the output's columns.
    integer: the columns that hold integers (names or 0-based positions, as
        es.plan's ``integer``): their bounds must be whole numbers and their
        synthetic values are whole numbers (int64 columns).
    seed: None (private: fresh entropy for the noise). An int in [0, 2**64)
        makes the noise and the sampling reproducible and the result NOT
        private: for tests only.
    ram: the agent's budget in bytes (int or "16M"). n_max: a public
        estimate of the rows (2..2**29, default 10**6; rate x period, or a
        published count), never counted from the data: the planner predicts
        its error and centres its depth search at it; rows beyond it are
        still all read.
    progress: optional callable ``progress(done, total)``: rows fed to the
        agent, then all n rows sampled at once (total = rows of data + n).

    Raises InputError on bad bounds, options or data.
    """
    if bounds is None:
        raise InputError("--bounds is required: the public range of every column, never read off the data")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 0 <= n <= MAX_SAMPLE:
        raise InputError("n (-n) is the number of synthetic rows, an integer in [0, %d], got %r" % (MAX_SAMPLE, n))
    columns, bounds = _channels(data, bounds, columns)
    x, names = as_table(data, columns, "data")
    seed = seed_bytes(seed)
    total = len(x) + int(n)
    gen, _ = _fit(x, names, bounds, epsilon, integer, seed, ram, n_max, progress, total)
    rows = gen.sample(int(n), None if seed is None else int.from_bytes(seed, "big"))
    if progress:  # sampling takes about 0.1 s per 10**6 rows: one step
        progress(total, total)
    return rows
