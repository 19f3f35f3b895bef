"""CSV input and output with errors that name the line and column at fault."""
import csv
import math

import numpy as np

from edgesynth.errors import InputError
from edgesynth.outputs import atomic_output

MAX_FIELD = 1 << 16


def read_columns(path, columns, progress=None, parsers=None, allow_empty=False):
    """Numeric columns ``columns`` of CSV ``path`` as a float64 array (n, d).

    The first row is the header. Empty cells, text, NaN and infinities are
    errors naming their line; values outside any bounds are *not* errors here
    (the agent clamps them). ``progress(nbytes)`` is called as the file is read.
    ``parsers`` maps a column name to its own cell parser (text -> float,
    ValueError with a message on a bad cell), e.g. timestamps. A file with a
    header and no rows is an error unless ``allow_empty`` (then shape (0, d)).
    """
    parsers = parsers or {}
    try:
        fh = open(path, newline="", encoding="utf-8")
    except OSError as e:
        raise InputError("%s: cannot open (%s)" % (path, e.strerror or e))
    csv.field_size_limit(MAX_FIELD)
    with fh:
        reader = csv.reader(fh, strict=True)
        try:
            header = next(reader)
        except StopIteration:
            raise InputError("%s: file is empty" % path)
        except (csv.Error, UnicodeDecodeError) as e:
            raise InputError("%s: line 1: %s" % (path, e))
        header = [h.strip() for h in header]
        idx = []
        for c in columns:
            if c not in header:
                raise InputError("%s: no column %r (columns: %s)" % (path, c, ", ".join(header)))
            idx.append(header.index(c))
        rows = []
        line = 1
        try:
            for row in reader:
                line += 1
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue
                if len(row) != len(header):
                    raise InputError("%s: line %d has %d fields, the header has %d"
                                     % (path, line, len(row), len(header)))
                vals = []
                for c, i in zip(columns, idx):
                    cell = row[i].strip()
                    if c in parsers:
                        try:
                            vals.append(parsers[c](cell))
                        except ValueError as e:
                            raise InputError("%s: line %d, column %r: %s" % (path, line, c, e))
                        continue
                    try:
                        v = float(cell)
                    except ValueError:
                        raise InputError("%s: line %d, column %r: %r is not a number" % (path, line, c, cell))
                    if not math.isfinite(v):
                        raise InputError("%s: line %d, column %r: %r is not finite" % (path, line, c, cell))
                    vals.append(v)
                rows.append(vals)
                if progress and line % 65536 == 0:
                    progress(fh.tell() if hasattr(fh, "tell") else 0)
        except csv.Error as e:
            raise InputError("%s: line %d: %s" % (path, line, e))
        except UnicodeDecodeError:
            raise InputError("%s: line %d is not UTF-8 text" % (path, line + 1))
    if not rows and not allow_empty:
        raise InputError("%s: no data rows" % path)
    return np.array(rows, dtype=np.float64).reshape(len(rows), len(columns))


def write_columns(path, names, data):
    """Replace ``path`` atomically with ``data`` (n, d) under header ``names``;
    10 significant digits."""
    with atomic_output(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(",".join(names) + "\n")
        np.savetxt(fh, data, delimiter=",", fmt="%.10g")
