"""Tables of records over a public schema, in and out (docs/mechanisms/marginals.md,
Host algorithms): reading a CSV / Parquet file or a DataFrame into cell
indices, loading a schema, writing synthetic tables with the schema's values.

Reading keeps every row: a categorical cell matches a schema string as the
same text and a schema number when numerically equal (the CSV's "3" and
"3.0" are the schema's 3; schema.Schema.encode_column), a binned cell is read as
a number, and anything else (an unknown category, a number outside the
bounds, text in a binned column, an empty or missing cell) is that column's
"other" cell, as on the device: a record is never dropped for its values.
The tables' own readers (edgesynth.data.files) read numbers only and skip
rows with a missing value, so they do not apply here.
"""
import csv
import io
import json
import os

import numpy as np

from edgesynth.data.files import DELIMITERS
from edgesynth.data.tables import column_names
from edgesynth.errors import InputError
from edgesynth.filekind import check as check_kind
from edgesynth.mechanisms.marginals.schema import Schema, value_text
from edgesynth.outputs import atomic_output
from edgesynth.stdio import is_stdio, read_input, stdout_bytes
from edgesynth.stdio import label as path_label

MAX_SCHEMA = 1 << 22  # bytes of a schema or config file
MAX_HEADER = 1 << 20  # bytes of a CSV header line


def load_schema(source):
    """The public Schema of ``source``: a Schema, a schema dict
    {"columns": [...]}, a device config (dict) holding a marginals
    mechanism, or the path of a JSON file holding either ("-": stdin).
    One-line InputError otherwise."""
    if isinstance(source, Schema):
        return source
    what = "schema"
    if isinstance(source, (str, os.PathLike)):
        what = path_label(os.fspath(source))
        data = read_input(os.fspath(source), "a schema")
        if len(data) > MAX_SCHEMA:
            raise InputError("%s: a schema file holds at most %d bytes" % (what, MAX_SCHEMA))
        try:
            source = json.loads(data)
        except (UnicodeDecodeError, ValueError) as e:
            raise InputError("%s is not a JSON schema (%s)" % (what, e))
    if isinstance(source, dict) and isinstance(source.get("mechanisms"), list):
        specs = [m for m in source["mechanisms"] if isinstance(m, dict) and m.get("kind") == "marginals"]
        if len(specs) != 1:
            raise InputError("%s: a config with one marginals mechanism holds a schema; this one has %d"
                             % (what, len(specs)))
        source = specs[0].get("schema")
    try:
        return Schema.from_json(source)
    except InputError as e:
        raise InputError("%s: %s" % (what, e)) if what != "schema" else e


def encode(schema, data, columns=None):
    """Cell indices (int64 (n, d)) of the records ``data`` (a DataFrame or a
    dict of columns; any dtype): schema column i is read from the data
    column ``columns[i]`` (default: the schema's names)."""
    cols = list(schema.names if columns is None else columns)
    if len(cols) != len(schema.names):
        raise InputError("%d data columns given for the schema's %d columns (%s)"
                         % (len(cols), len(schema.names), ", ".join(schema.names)))
    given = column_names(data)
    if given is None:
        raise InputError("records over a schema are a DataFrame or a dict of columns (named like the schema's)")
    absent = [c for c in cols if c not in given]
    if absent:
        raise InputError("data has no column %r (its columns: %s)" % (absent[0], ", ".join(given)))
    out = [_encode_column(schema, i, _values(data[c])) for i, c in enumerate(cols)]
    if len({len(c) for c in out}) > 1:
        raise InputError("data: columns %s have different lengths" % ", ".join(cols))
    return np.stack(out, axis=1) if out else np.empty((0, 0), np.int64)


def _encode_column(schema, i, values):
    """Schema.encode_column of ``values``, a categorical column looked up once
    per distinct value (pandas.factorize: hashing in C, 9x faster than a
    lookup per row on 2 * 10**5 text values); a missing value is "other"."""
    if "values" not in schema.columns[i]:
        return schema.encode_column(i, values)
    import pandas

    codes, uniques = pandas.factorize(np.asarray(values, dtype=object) if not isinstance(values, np.ndarray)
                                      else values, use_na_sentinel=True)
    table = np.append(schema.encode_column(i, np.asarray(uniques, dtype=object)), schema.sizes[i] - 1)
    return table[codes]  # code -1 (missing) is the last entry: "other"


def _values(col):
    """A column as a 1-D sequence for Schema.encode_column (pandas.NA as None)."""
    if hasattr(col, "to_numpy"):
        return col.astype(object).where(col.notna(), None).to_numpy() if col.dtype == object else col.to_numpy()
    return col


def read_records(source, columns, delimiter=None):
    """The ``columns`` (names) of the CSV or Parquet file ``source`` (a path;
    ``.parquet`` is Parquet; "-": stdin, CSV or Parquet by its magic bytes)
    as a pandas DataFrame of their raw values: CSV cells as stripped text,
    Parquet numbers as float64 (null: NaN) and other Parquet values as they
    are. Every row is kept; at least one row is needed. The whole file is
    read into memory (bounded by its size)."""
    import pandas

    label = path_label(os.fspath(source))
    data = read_input(os.fspath(source), "a table")
    check_kind(os.fspath(source), ("table", "parquet"), data)  # a frame, generator, ...: say which
    cols = [str(c) for c in columns]
    if data[:4] == b"PAR1" or (not is_stdio(source) and label.lower().endswith(".parquet")):
        frame = _parquet(data, label, cols)
    else:
        frame = _csv(data, label, cols, delimiter)
    del data
    frame = pandas.DataFrame(frame, columns=cols)
    if not len(frame):
        raise InputError("%s: no data rows" % label)
    return frame


def read_cells(source, schema, columns=None, delimiter=None):
    """Cell indices (int64 (n, d)) of the records in the file ``source``
    (read_records), schema column i read from the file's column
    ``columns[i]`` (default: the schema's names)."""
    cols = list(schema.names if columns is None else columns)
    return encode(schema, read_records(source, cols, delimiter), cols)


def _csv(data, label, cols, delimiter):
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    if data[:3] == b"\xef\xbb\xbf":
        data = data[3:]
    try:
        first = data[:MAX_HEADER].split(b"\n", 1)[0].decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("%s: the header line is not UTF-8 text: not a CSV table" % label)
    if delimiter is None:
        delimiter = max(DELIMITERS, key=lambda d: (first.count(d), -DELIMITERS.index(d)))
    elif len(delimiter) != 1:
        raise InputError("--delimiter must be one character, got %r" % delimiter)
    header = next(csv.reader(io.StringIO(first), delimiter=delimiter), [])
    header = [h.strip() for h in header]
    _unique(header, label)
    absent = [c for c in cols if c not in header]
    if absent:
        raise InputError("%s has no column %r (columns: %s)" % (label, absent[0], _shown(header)))
    try:
        table = pcsv.read_csv(
            io.BytesIO(data), read_options=pcsv.ReadOptions(column_names=header, skip_rows=1),
            # a blank line of a one-column table is a record whose value is missing ("other")
            parse_options=pcsv.ParseOptions(delimiter=delimiter, ignore_empty_lines=len(header) > 1),
            convert_options=pcsv.ConvertOptions(include_columns=cols, column_types={c: pa.string() for c in cols},
                                                strings_can_be_null=False, quoted_strings_can_be_null=False))
    except (pa.ArrowException, ValueError) as e:
        raise InputError("%s: not a readable CSV table (%s)" % (label, str(e).splitlines()[0] if str(e) else e))
    return {c: pc.utf8_trim_whitespace(table.column(c)).to_numpy(zero_copy_only=False) for c in cols}


def _unique(names, label):
    """InputError when a column name repeats (which column is meant?), as
    the generic table reader says it."""
    if len(set(names)) != len(names):
        raise InputError("%s: a column is named twice (%s)" % (label, _shown(names)))


def _shown(names):
    """Column names for a message: at most 20, each at most 40 characters."""
    out = ", ".join(n if len(n) <= 40 else n[:40] + "..." for n in names[:20])
    return out + (", ..." if len(names) > 20 else "")


def _parquet(data, label, cols):
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(io.BytesIO(data))
        names = pf.schema_arrow.names
        _unique(names, label)
        absent = [c for c in cols if c not in names]
        if absent:
            raise InputError("%s has no column %r (columns: %s)" % (label, absent[0], _shown(names)))
        table = pf.read(columns=cols)
    except (OSError, pa.ArrowException) as e:
        raise InputError("%s: not a readable Parquet file (%s)" % (label, e))
    out = {}
    for c in cols:
        col = table.column(c)
        number = pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_decimal(col.type)
        out[c] = pc.cast(col, pa.float64(), safe=False).to_numpy() if number else \
            np.array(col.to_pylist(), dtype=object)
    return out


def arrow_schema(schema):
    """The pyarrow schema of a synthetic table: a categorical column of
    strings is a string column, of integers int64, of other numbers float64
    (values of mixed kinds are written as text); a binned column float64."""
    import pyarrow as pa

    fields = []
    for c in schema.columns:
        vals = c.get("values")
        if vals is None or all(isinstance(v, (int, float)) for v in vals) and \
                not all(isinstance(v, int) for v in vals):
            t = pa.float64()
        elif all(isinstance(v, int) for v in vals):
            t = pa.int64()
        else:
            t = pa.string()
        fields.append(pa.field(c["name"], t))
    return pa.schema(fields)


def _mixed(schema):
    """Names of the categorical columns written as text whose values are not all strings."""
    return {c["name"] for c in schema.columns if "values" in c and any(isinstance(v, str) for v in c["values"])
            and not all(isinstance(v, str) for v in c["values"])}


def _arrow_table(frame, target, mixed):
    """``frame`` as a pyarrow Table of ``target``'s types, missing values
    (None, NaN, pandas.NA) as nulls; the ``mixed`` columns as text
    (schema.value_text: a number's canonical text reads back to its cell)."""
    import pyarrow as pa

    arrays = []
    for field in target:
        col = frame[field.name]
        if field.name in mixed:
            vals = col.to_numpy(dtype=object, na_value=None)
            arr = pa.array([None if v is None else value_text(v) for v in vals], type=pa.string())
        else:
            arr = pa.array(col, from_pandas=True)  # pandas' own Arrow-backed strings convert without a copy
            if arr.type != field.type:
                arr = arr.cast(field.type)
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, schema=target)


def write_tables(dest, schema, frames, progress=None):
    """Write the DataFrames ``frames`` (blocks of one synthetic table with the
    schema's columns) to ``dest``: a path (``.parquet``: Parquet, else CSV),
    replaced atomically, or "-" for CSV on stdout. "other" (a missing value)
    is an empty CSV cell or a Parquet null. Returns the rows written;
    ``progress(rows)`` after each block."""
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    target = arrow_schema(schema)
    mixed = _mixed(schema)
    parquet = not is_stdio(dest) and os.fspath(dest).lower().endswith(".parquet")

    def write(fh):
        rows = 0
        writer = pq.ParquetWriter(fh, target) if parquet else pcsv.CSVWriter(fh, target)
        try:
            for frame in frames:
                writer.write_table(_arrow_table(frame, target, mixed))
                rows += len(frame)
                if progress:
                    progress(len(frame))
        finally:
            writer.close()
        return rows

    if is_stdio(dest):
        out = stdout_bytes()
        rows = write(out)
        out.flush()
        return rows
    with atomic_output(os.fspath(dest), "wb") as fh:
        return write(fh)

