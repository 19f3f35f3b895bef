"""Tables out: a CSV or Parquet file, or CSV on stdout, written block by
block so that memory does not grow with the number of rows.

The format follows the destination: a name ending in ``.parquet`` (any case)
is Parquet, anything else CSV; ``-`` is CSV on stdout. Both are encoded by
pyarrow (C++): CSV at several times the speed of ``numpy.savetxt``
(benchmarks/RESULTS.md, bench_write), with every float64 written in its
shortest form that reads back as the same float64, so a CSV loses nothing.

Files are replaced atomically (edgesynth.outputs.atomic_output): an error or
Ctrl-C part-way leaves no partial file and the previous file untouched.
Stdout cannot be taken back: what was written before an error stays written.
"""
import csv
import importlib
import io
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from edgesynth.data.tables import as_table, column_names, is_frame
from edgesynth.errors import InputError
from edgesynth.outputs import atomic_output
from edgesynth.stdio import is_stdio, stdout_bytes

BLOCK = 1 << 20          # rows per block (and per Parquet row group) when writing an in-memory table
CSV_BATCH = 1 << 12      # rows pyarrow formats at a time: small batches stay in cache (~2x faster than 2**20)


def is_parquet(dest):
    """True when ``dest`` (a path, or "-" for stdout) names a Parquet file."""
    return not is_stdio(dest) and os.fspath(dest).lower().endswith(".parquet")


def write_table(dest, names, blocks, *, integer=None, progress=None):
    """Write the rows of ``blocks`` under the header ``names``; the number of rows written.

    dest: a path (str or PathLike; ``.parquet`` -> Parquet, else CSV) or "-"
        for CSV on stdout.
    names: the column names (d of them).
    blocks: an iterable of float64 arrays of shape (m, d), m >= 0; each one
        is one Parquet row group, so keep m at most about 2**20.
    integer: d bools, or None (no integer columns); a True column is
        rounded to the nearest integer and written as int64 (Parquet) or
        without a decimal point (CSV). Float columns are written exactly.
    progress: called with the number of rows of each block once it is written.

    Raises InputError for a block of the wrong shape or a file that cannot be
    written (naming it); the file is then left as it was.
    """
    import pyarrow as pa  # ~0.15 s to import with parquet: only writing data needs it

    # Import the encoder before the file is opened: a Ctrl-C that lands inside
    # a pyarrow module's import is swallowed by it and would go unnoticed.
    importlib.import_module("pyarrow.parquet" if is_parquet(dest) else "pyarrow.csv")
    names = [str(n) for n in names]
    integer = [False] * len(names) if integer is None else [bool(i) for i in integer]
    if len(integer) != len(names):
        raise InputError("integer has %d flags for %d columns" % (len(integer), len(names)))
    schema = pa.schema([(n, pa.int64() if i else pa.float64()) for n, i in zip(names, integer)])
    if is_stdio(dest):
        out = stdout_bytes()
        try:
            rows = _write_csv(out, schema, blocks, progress)
            out.flush()
        except BrokenPipeError:
            raise  # the reader went away (`| head`): the CLI's business, not an error in the data
        except OSError as e:
            raise InputError("stdout: cannot write (%s)" % (e.strerror or e))
        return rows
    path = os.fspath(dest)
    write = _write_parquet if is_parquet(path) else _write_csv
    with atomic_output(path, "wb") as fh:
        return write(fh, schema, blocks, progress)


def _write_csv(fh, schema, blocks, progress):
    import pyarrow.csv as pcsv

    header = io.StringIO()
    csv.writer(header, lineterminator="\n").writerow(schema.names)  # quotes a name only if it must
    fh.write(header.getvalue().encode("utf-8"))
    options = pcsv.WriteOptions(include_header=False, batch_size=CSV_BATCH)
    return _pipeline(blocks, schema, lambda table: pcsv.write_csv(table, fh, options), progress)


def _write_parquet(fh, schema, blocks, progress):
    import pyarrow as pa
    import pyarrow.parquet as pq

    # Dictionary pages pay off for integer columns (few distinct values) but
    # halve the speed on continuous floats for no gain in size.
    ints = [f.name for f in schema if pa.types.is_integer(f.type)]
    with pq.ParquetWriter(fh, schema, use_dictionary=ints or False) as writer:
        return _pipeline(blocks, schema, lambda table: writer.write_table(table, row_group_size=len(table)),
                         progress)


def _pipeline(blocks, schema, write, progress):
    """Write each block while the next one is drawn. pyarrow releases the GIL
    while it encodes, so on two cores drawing (numpy) and encoding overlap:
    about 1.5x on `edgesynth sample`. At most two blocks are held at a time."""
    import pyarrow as pa

    d = len(schema)
    rows = 0
    pending = None
    with ThreadPoolExecutor(max_workers=1) as pool:  # on an error, waits for the write in flight
        for block in blocks:
            block = np.asarray(block)
            if block.dtype.kind not in "iu":  # integer blocks stay exact (a stream's step column)
                block = np.asarray(block, dtype=np.float64)
            if block.ndim != 2 or block.shape[1] != d:
                raise InputError("a block of rows must have shape (m, %d), got %s" % (d, block.shape))
            if not len(block):
                continue
            exact = block.dtype.kind in "iu"
            cols = [(block[:, j] if exact else np.rint(block[:, j])).astype(np.int64) if pa.types.is_integer(f.type)
                    else np.asarray(block[:, j], np.float64) for j, f in enumerate(schema)]
            table = pa.Table.from_arrays(cols, schema=schema)
            _finish(pending, progress)
            pending = (pool.submit(write, table), len(block))
            rows += len(block)
        _finish(pending, progress)
    return rows


def _finish(pending, progress):
    """Wait for the write in flight, if any (re-raising its error), then report its rows."""
    if pending is not None:
        future, m = pending
        future.result()
        if progress:
            progress(m)


def integer_columns(data, names):
    """For each of the columns ``names`` of ``data`` (as es.write takes it),
    whether it holds integers (a numpy or pandas integer dtype)."""
    given = column_names(data)
    if given is None:
        kind = getattr(data, "dtype", np.dtype(np.float64)).kind
        return [kind in "iu"] * len(names)
    if is_frame(data):
        kinds = {str(c): t.kind for c, t in zip(data.columns, data.dtypes)}
    else:
        kinds = {str(c): np.asarray(v).dtype.kind for c, v in data.items()}
    return [kinds.get(n) in ("i", "u") for n in names]


def write(data, dest, names=None):
    """Write a table to ``dest``; the number of rows written.

    data: a pandas DataFrame or dict of columns (``names`` picks columns by
        name, default all in order) or an array of shape (n, d) or (n,)
        (``names`` names its columns, default x0, x1, ...). Values must be
        finite numbers: a missing value (NaN, None, pandas.NA) is an
        InputError naming its row and column (drop or fill such rows first).
        Columns of an integer dtype are written as integers (exactly up to
        2**53), the others as float64, exactly.
    dest: a path (``.parquet`` -> Parquet, else CSV), replaced atomically,
        or "-" for CSV on stdout.
    """
    x, names = as_table(data, names, what="data", missing="error")
    blocks = (x[i:i + BLOCK] for i in range(0, len(x), BLOCK))
    return write_table(dest, names, blocks, integer=integer_columns(data, names))
