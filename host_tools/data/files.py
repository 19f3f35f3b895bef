"""Numeric columns of a CSV or Parquet file (or of stdin) as a float64 array,
with errors that name the line and column at fault.

CSV, as public files come: a UTF-8 byte-order mark is dropped; the
delimiter is the one of ``,`` ``;`` TAB ``|`` seen most often in the header
line outside quotes (ties in that order), unless given; the first record is
the header. A cell is a number only when it is a plain ASCII decimal
(``NUMBER`` below, surrounding spaces allowed): Python's ``float`` would also
take ``1_000``, full-width or Arabic-Indic digits, ``inf`` and ``nan``, which
a sensor never writes and which usually mean a column is not what it seems.
A cell in ``MISSING`` is a missing value; a row with one in a used column is
skipped and counted (``missing="skip"``) or refused (``missing="error"``).
Whether a row is kept depends on that row alone, so skipping is safe at the
event level. Line numbers are physical lines of the file (a quoted cell
over several lines counts them all), also for bytes that are not UTF-8.

Parquet (by the ``.parquet`` extension, or stdin starting with Parquet's
magic bytes) is read with pyarrow: numeric columns only; nulls and NaN are
missing values under the same rule; rows are numbered from 1.

The CSV records are split by the standard library's csv module, in batches,
and each batch's cells are checked and converted by pyarrow's vectorised
kernels: a fast reader (pyarrow.csv) cannot say on which line a record
starts, and every message here names one.
"""
import codecs
import csv
import io
import itertools
import operator
import os
import re
from collections import namedtuple

import numpy as np

from edgesynth.data.tables import Table, check_missing, complete_rows, to_frame, to_table
from edgesynth.errors import ColumnNotFound, InputError
from edgesynth.filekind import check
from edgesynth.stdio import STDIN, is_stdio, stdin_bytes

NUMBER = r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$"
MISSING = ("", "NA", "N/A", "n/a", "#N/A", "NaN", "nan", "NULL", "null", "None", "?")
DELIMITERS = (",", ";", "\t", "|")
MAX_FIELD = 1 << 16   # bytes in one cell: a longer one is garbage, not a reading
MAX_LINE = 1 << 24    # bytes in one physical line, so that a file without newlines cannot fill memory
CHUNK = 1 << 20       # bytes read at a time
BATCH = 1 << 16       # records checked and converted at a time
_NEWLINES = re.compile(rb"\r\n|\r|\n")
_TEXT_NEWLINES = re.compile(r"\r\n|\r|\n")


def _arrow():
    """pyarrow with its compute and csv modules, imported on first use: the
    commands that read no data (and `edgesynth --help`) need not pay the
    ~0.3 s (and pandas, which pyarrow's array constructor imports)."""
    import pyarrow
    import pyarrow.compute
    import pyarrow.csv  # noqa: F401 (pyarrow.csv.read_csv below)
    return pyarrow


def read_table(source, columns=None, *, missing="skip", delimiter=None, parsers=None, allow_empty=False,
               progress=None):
    """The numeric ``columns`` of a CSV or Parquet file as a Table (data,
    names, skipped, source).

    source: a path (``.parquet``, any case, is Parquet; anything else CSV)
        or "-" for stdin (CSV, or Parquet by its magic bytes).
    columns: the names to read, in this order (default every named column).
    missing: "skip" leaves out a row with a missing value in one of these
        columns and counts it in ``skipped``; "error" refuses it, naming the
        line and column. A missing value elsewhere in the row never matters.
    delimiter: force the CSV delimiter (one character) instead of sniffing.
    parsers: column name -> cell parser (stripped text -> float, ValueError
        with a message on a bad cell), e.g. timestamps; a missing cell never
        reaches it.
    allow_empty: a file with a header and no kept rows gives shape (0, d)
        instead of an error.
    progress: optional callable given the number of bytes read since its
        previous call.

    Values outside any bounds are not errors here (the agent clamps them).
    """
    check_missing(missing)
    columns = None if columns is None else [columns] if isinstance(columns, str) else list(columns)
    parsers = parsers or {}
    stdin = is_stdio(source)
    if stdin:
        label, fh = STDIN, stdin_bytes()
    else:
        if not isinstance(source, (str, os.PathLike)):
            raise InputError("a data file is a path or '-' (stdin), got %s" % type(source).__name__)
        label = str(os.fspath(source))
        if label.lower().endswith(".parquet"):
            try:
                return _read_parquet(label, label, columns, missing, parsers, allow_empty, progress)
            except InputError:
                check(label, ("table", "parquet"))
                raise
        try:
            fh = open(label, "rb")
        except OSError as e:
            raise InputError("%s: cannot open (%s)" % (label, e.strerror or e))
    try:
        head = fh.read(4) if stdin else b""
        if head == b"PAR1":  # Parquet needs to seek: stdin is read whole
            return _read_parquet(io.BytesIO(head + fh.read()), label, columns, missing, parsers, allow_empty, progress)
        table = _read_csv(fh, head, label, columns, missing, delimiter, parsers, progress)
    except InputError:
        if not stdin:  # a frame, generator or config given as data: name what it is
            check(label, ("table", "parquet"))
        raise
    finally:
        if not stdin:
            fh.close()
    return _finish(table, allow_empty)


def read(source, columns=None, *, missing="skip", delimiter=None):
    """The numeric ``columns`` of a CSV or Parquet file as a pandas
    DataFrame (float64), as `edgesynth simulate --input` reads them.

    source: a path (``.parquet``: Parquet), "-" for stdin, or a DataFrame
        or dict of columns (then NaN, None and pandas.NA are the missing
        values). columns, missing, delimiter: as in read_table.

    ``df.attrs["skipped_rows"]`` is the number of rows left out for a
    missing value (with ``missing="skip"``); nothing is printed.
    """
    if isinstance(source, (str, os.PathLike)):
        table = read_table(source, columns, missing=missing, delimiter=delimiter)
    else:
        table = to_table(source, columns, "data", missing=missing)
    frame = to_frame(table.data, table.names)
    frame.attrs["skipped_rows"] = table.skipped
    return frame


def _finish(table, allow_empty):
    """``table``, unless it has no rows and ``allow_empty`` is false."""
    if not len(table.data) and not allow_empty:
        why = " (%d skipped for a missing value)" % table.skipped if table.skipped else ""
        raise InputError("%s: no data rows%s" % (table.source, why))
    return table


# ---------------------------------------------------------------------- CSV
def _blocks(fh, head, label, progress):
    """(lines before, text) of ``head`` and then ``fh`` (bytes) in blocks
    of whole lines. A byte-order mark is dropped; bytes that are not UTF-8 are an
    InputError naming their line; so is a line longer than MAX_LINE bytes."""
    tail, lines, first = b"", 0, True
    while True:
        chunk = fh.read(CHUNK)
        if head:
            chunk, head = head + chunk, b""
        if progress and chunk:
            progress(len(chunk))
        if first and chunk:
            chunk, first = chunk.removeprefix(codecs.BOM_UTF8), False
        buf = tail + chunk
        if chunk:  # cut after the last line end; a final \r may be the first half of \r\n
            cut = max(buf.rfind(b"\n"), buf.rfind(b"\r", 0, len(buf) - 1)) + 1
            if not cut:
                if len(buf) > MAX_LINE:
                    raise InputError("%s: line %d is longer than %d MiB" % (label, lines + 1, MAX_LINE >> 20))
                tail = buf
                continue
            block, tail = buf[:cut], buf[cut:]
        elif buf:
            block, tail = buf, b""
        else:
            return
        try:
            text = block.decode("utf-8")
        except UnicodeDecodeError as e:
            line = lines + len(_NEWLINES.findall(block, 0, e.start)) + 1
            raise InputError("%s: line %d is not UTF-8 text (byte 0x%02x)" % (label, line, block[e.start]))
        yield lines, text
        lines += block.count(b"\n") + block.count(b"\r") - block.count(b"\r\n")


def _sniff(line):
    """The delimiter of a header ``line``: the one of DELIMITERS seen most
    often outside double quotes, "," when there is none (one column)."""
    bare = re.sub(r'"[^"]*"', "", line)
    counts = [bare.count(d) for d in DELIMITERS]
    return DELIMITERS[counts.index(max(counts))] if max(counts) else ","


def _check_delimiter(delimiter):
    if delimiter in ("\\t", "tab"):
        return "\t"
    if not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in "\"\r\n" or delimiter.isalnum():
        raise InputError("--delimiter must be one character such as , ; | or tab (\\t), got %r" % (delimiter,))
    return delimiter


def _header(names, columns, label, delimiter=None):
    """The indices of ``columns`` in the header ``names`` (every named
    column when ``columns`` is None) and the columns. ``delimiter``: the
    CSV delimiter used, named when a column is not found."""
    if columns is None:
        columns = [n for n in names if n]
        if not columns:
            raise InputError("%s: the header names no column" % label)
    idx = []
    for c in columns:
        if c not in names:
            split = " split at %r" % delimiter if delimiter else ""
            raise ColumnNotFound("%s: no column %r (columns%s: %s)" % (label, c, split, ", ".join(names)))
        if names.count(c) > 1:
            raise InputError("%s: column %r appears %d times in the header" % (label, c, names.count(c)))
        idx.append(names.index(c))
    return idx, columns


def _read_csv(fh, head, label, columns, missing, delimiter, parsers, progress):
    blocks = _blocks(fh, head, label, progress)
    _, first = next(blocks, (0, ""))
    delimiter = _sniff(_TEXT_NEWLINES.split(first, 1)[0]) if delimiter is None else _check_delimiter(delimiter)
    csv.field_size_limit(MAX_FIELD)
    reader = csv.reader(io.StringIO(first, newline=""), delimiter=delimiter, strict=True)
    try:
        header = next(reader, None)
    except csv.Error as e:
        raise InputError("%s: line %d: %s" % (label, reader.line_num, e))
    if header is None:
        raise InputError("%s: file is empty" % label)
    names = [h.strip() for h in header]
    idx, columns = _header(names, columns, label, delimiter)
    for c in parsers:
        if c not in columns:
            raise InputError("%s: a parser for %r, which is not read" % (label, c))
    ends = [m.end() for m, _ in zip(_TEXT_NEWLINES.finditer(first), range(reader.line_num))]
    rest = first[ends[-1]:] if len(ends) == reader.line_num else ""  # the text after the header
    spec = _Spec(label, delimiter, len(names), idx, columns, missing, parsers)
    out, skipped = [], 0
    blocks = itertools.chain([(reader.line_num, rest)], blocks)
    for base, text in blocks:
        if '"' in text:  # quoted cells may hold line ends: the csv module, with every later block
            parts = _records(itertools.chain([(base, text)], blocks), base, spec)
        elif text.strip():  # whole records: pyarrow splits them, the csv module names a fault's line
            try:
                parts = [_fast(text, spec)]
            except _Redo:
                parts = _records([(base, text)], base, spec)
        else:
            continue
        for kept, n in parts:
            out.append(kept)
            skipped += n
    data = np.concatenate(out) if out else np.empty((0, len(columns)))
    return Table(data, columns, skipped, label)


_Spec = namedtuple("_Spec", "label delimiter width idx columns missing parsers")


class _Redo(Exception):
    """A block's fast reading met a fault: read it again line by line to name it."""


def _fast(text, spec):
    """(rows, skipped) of a block of whole records without quotes, split by
    pyarrow; _Redo on any fault."""
    pa = _arrow()
    keys = ["c%d" % i for i in range(spec.width)]
    used = [keys[i] for i in spec.idx]
    data = text.encode()
    try:
        table = pa.csv.read_csv(
            io.BytesIO(data),
            read_options=pa.csv.ReadOptions(column_names=keys, block_size=len(data) + 1),
            parse_options=pa.csv.ParseOptions(delimiter=spec.delimiter, quote_char=False),
            convert_options=pa.csv.ConvertOptions(column_types={k: pa.string() for k in used}, include_columns=used,
                                                strings_can_be_null=False))
    except pa.ArrowInvalid:
        raise _Redo()
    return _values([table.column(k).combine_chunks() for k in used], None, spec)


def _records(blocks, base, spec):
    """(rows, skipped) of each batch of the records in ``blocks`` ((line
    base, text) pairs of consecutive lines, the first after line ``base``),
    split by the csv module, which knows each record's line."""
    pa = _arrow()
    lines = itertools.chain.from_iterable(io.StringIO(text, newline="") for _, text in blocks)
    reader = csv.reader(lines, delimiter=spec.delimiter, strict=True)
    try:
        while True:
            start = reader.line_num
            batch = list(itertools.islice(reader, BATCH))
            if not batch:
                return
            at = _lines(batch, base + start, base + reader.line_num)
            if set(map(len, batch)) != {spec.width}:
                batch, at = _drop_blank(batch, at, spec)
            cells = [pa.array(list(map(operator.itemgetter(i), batch)), pa.string()) for i in spec.idx]
            yield _values(cells, at, spec)
    except csv.Error as e:
        raise InputError("%s: line %d: %s" % (spec.label, base + reader.line_num, e))


def _lines(batch, start, end):
    """The line each record of ``batch`` starts on; ``start`` is the last
    line before it, ``end`` its last line. A record spans one line plus the
    line ends inside its quoted cells."""
    if end - start == len(batch):
        return np.arange(start + 1, end + 1)
    spans = [1 + sum(len(_TEXT_NEWLINES.findall(cell)) for cell in row) for row in batch]
    return start + 1 + np.concatenate(([0], np.cumsum(spans[:-1])))


def _values(columns, lines, spec):
    """(rows, skipped): the float64 rows of the records whose used cells
    are ``columns`` (a pyarrow string array per used column), without those
    with a missing value. The first fault, by line, is an InputError naming
    it, or _Redo when ``lines`` is None."""
    pa = _arrow()
    n = len(columns[0]) if columns else 0
    cols, gaps, faults = [], [], []
    for c, raw in zip(spec.columns, columns):
        cells = pa.compute.ascii_trim(raw, " \t")
        if c in spec.parsers:
            gap = pa.compute.is_in(cells, value_set=pa.array(MISSING)).to_numpy(zero_copy_only=False)
            vals = _parse(cells, gap, spec.parsers[c], lines, c, spec.label)
            ok, wrong = ~gap, np.zeros(n, bool)
        else:
            ok = pa.compute.match_substring_regex(cells, NUMBER).to_numpy(zero_copy_only=False)
            gap = np.zeros(n, bool)
            if not ok.all():  # only cells that are not numbers can be missing
                others = cells.filter(pa.array(~ok))
                gap[~ok] = pa.compute.is_in(others, value_set=pa.array(MISSING)).to_numpy(zero_copy_only=False)
            vals = np.full(n, np.nan)
            vals[ok] = pa.compute.cast(cells.filter(pa.array(ok)), pa.float64()).to_numpy(zero_copy_only=False)
            wrong = ~(ok | gap) | np.isinf(vals)  # 1e999 is plain, but no float holds it
        fault = wrong | gap if spec.missing == "error" else wrong
        if fault.any():
            if lines is None:
                raise _Redo()
            j = int(np.argmax(fault))
            why = ("missing value %r" if gap[j] else "%r is not a finite number" if ok[j]
                   else "%r is not a plain decimal number") % cells[j].as_py()
            faults.append((j, "%s: line %d, column %r: %s" % (spec.label, lines[j], c, why)))
        cols.append(vals)
        gaps.append(gap)
    if faults:
        raise InputError(min(faults, key=operator.itemgetter(0))[1])
    x = np.column_stack(cols) if cols else np.empty((n, 0))
    bad = np.logical_or.reduce(gaps) if gaps else np.zeros(n, bool)
    return (x[~bad] if bad.any() else x), int(np.count_nonzero(bad))


def _parse(cells, gap, parser, lines, column, label):
    vals = np.full(len(cells), np.nan)
    for j, cell in enumerate(cells.to_pylist()):
        if not gap[j]:
            try:
                vals[j] = parser(cell)
            except ValueError as e:
                if lines is None:
                    raise _Redo()
                raise InputError("%s: line %d, column %r: %s" % (label, lines[j], column, e))
    return vals


def _drop_blank(batch, lines, spec):
    """``batch`` and ``lines`` without blank lines (no cell, or one blank
    cell when the header has more); a record of another width is an error."""
    keep = []
    for j, row in enumerate(batch):
        if len(row) == spec.width:
            keep.append(j)
        elif not row or (len(row) == 1 and not row[0].strip()):
            continue
        else:
            raise InputError("%s: line %d has %d fields, the header has %d"
                             % (spec.label, lines[j], len(row), spec.width))
    return [batch[j] for j in keep], lines[keep]


# ------------------------------------------------------------------ Parquet
def _read_parquet(source, label, columns, missing, parsers, allow_empty, progress):
    import pyarrow.parquet as pq  # only Parquet input needs it
    pa = _arrow()
    try:
        pf = pq.ParquetFile(source)
        names = pf.schema_arrow.names
        idx, columns = _header(names, columns, label)
        table = pf.read(columns=columns)
    except (OSError, pa.ArrowException) as e:
        raise InputError("%s: not a readable Parquet file (%s)" % (label, e))
    if progress and isinstance(source, str):
        progress(os.path.getsize(source))
    cols = []
    for c in columns:
        col = table.column(c)
        if c in parsers and not _is_number(col.type):
            cols.append(_parquet_parsed(col, parsers[c], label, c))
        elif _is_number(col.type):
            # null -> NaN; unsafe: an int64 beyond 2**53 rounds to the nearest float64, as in CSV
            cols.append(pa.compute.cast(col, pa.float64(), safe=False).to_numpy())
        else:
            raise InputError("%s: column %r is %s, not numeric" % (label, c, col.type))
    x = np.column_stack(cols) if cols else np.empty((table.num_rows, 0))
    keep = complete_rows(x, columns, label, missing, first=1)
    return _finish(Table(x[keep], columns, int(keep.size - keep.sum()), label), allow_empty)


def _is_number(t):
    pa = _arrow()
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def _parquet_parsed(col, parser, label, column):
    """A column the caller parses (e.g. timestamps), NaN where null: each
    value goes to ``parser`` as text, a timestamp as Unix seconds."""
    pa = _arrow()
    if pa.types.is_timestamp(col.type):
        t = pa.compute.cast(col, pa.timestamp("ns")).to_numpy(zero_copy_only=False)
        texts = [None if np.isnat(v) else repr(int(v.astype(np.int64)) / 1e9) for v in t]
    else:
        texts = col.to_pylist()
    vals = np.full(len(col), np.nan)
    for j, v in enumerate(texts):
        if v is not None:
            try:
                vals[j] = parser(str(v).strip())
            except ValueError as e:
                raise InputError("%s: row %d, column %r: %s" % (label, j + 1, column, e))
    return vals
