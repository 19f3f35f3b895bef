"""Construction phase of the marginals state: validate the public spec,
allocate every group total once and draw its noise before any record
(privacy rule 2).
"""
from array import array

from ..errors import ConfigError
from ..spec import MAX_CHANNELS, MAX_Q, check_scale, fill_noise, int_field, int_list, known_fields, number

KIND = "marginals"
MAX_SIZE = 1 << 12        # cells of one column, its "other" cell included
MAX_WAY = 3               # columns of one marginal
MAX_MARGINALS = 256       # every 1- and 2-way marginal of 16 columns is 136
MAX_CELLS = 1 << 16       # cells of one marginal: group ids fit uint16, cell indices stay small ints
MAX_COUNTERS = 1 << 22    # group totals of the whole state
MAX_NAME = 64             # characters of a column name or a string value
MAX_VALUES = 1 << 12      # categorical values of the whole schema: bounds the frame's schema (< 1.1 MiB)
INT32 = 1 << 31           # integer values lie in [-2**31, 2**31)
SPEC_KEYS = ("kind", "schema", "cols", "groups", "q", "sigma")


def setup(m, spec, factor):
    """Fill Marginals object ``m`` from ``spec``: fields, zeroed totals, update plan."""
    parse(m, spec, factor)
    m.tabs = [array("i", range(g)) for g in m.ngroups]  # exact-size int32 arrays, overwritten by the noise
    m.cell = [0] * m.d  # the record's clamped cell indices, reused by every update
    plan = []
    for w in range(len(m.cols)):
        cols = m.cols[w]
        terms = []
        stride = 1
        for k in range(len(cols) - 1, -1, -1):  # C order: the last column varies fastest
            terms.append((cols[k], stride))
            stride *= m.sizes[cols[k]]
        plan.append((tuple(terms), m.groups[w], m.tabs[w]))
    m.plan = tuple(plan)


def parse(m, spec, factor):
    """Validate ``spec`` and set the public fields of ``m`` (no totals)."""
    known_fields(spec, KIND, SPEC_KEYS)
    m.schema = spec.get("schema")
    m.names, m.sizes = schema_shape(m.schema)
    d = len(m.sizes)
    cols = spec.get("cols")
    if not isinstance(cols, list) or not 1 <= len(cols) <= MAX_MARGINALS:
        raise ConfigError("marginals.cols must list 1..%d marginals" % MAX_MARGINALS)
    n = len(cols)
    m.cols = []
    m.cells = []
    for w in range(n):
        c = cols[w]
        if not isinstance(c, list) or not 1 <= len(c) <= MAX_WAY:
            raise ConfigError("marginals.cols[%d] must list 1..%d column indices" % (w, MAX_WAY))
        cells = 1
        for k in range(len(c)):
            i = c[k]
            if not isinstance(i, int) or isinstance(i, bool) or i < 0 or i >= d or (k and i <= c[k - 1]):
                raise ConfigError("marginals.cols[%d] must list increasing column indices in [0, %d)" % (w, d))
            cells *= m.sizes[i]
            if cells > MAX_CELLS:  # checked per factor: no product reaches 2**30 (MAX_CELLS * MAX_SIZE)
                raise ConfigError("marginals.cols[%d] has more than %d cells" % (w, MAX_CELLS))
        c = tuple(c)  # once per marginal, compared with every earlier one
        for v in range(w):
            if m.cols[v] == c:
                raise ConfigError("marginals.cols[%d] repeats marginal %d" % (w, v))
        m.cols.append(c)
        m.cells.append(cells)
    m.groups, m.ngroups = _groups(spec.get("groups"), m.cells)
    total = 0
    for g in m.ngroups:
        total += g
    if total > MAX_COUNTERS:
        raise ConfigError("marginals needs %d group totals, more than any device holds" % total)
    m.q = int_field(spec, KIND, "q", 1, MAX_Q)
    m.sigma = int_list(spec, KIND, "sigma", n, 1, MAX_Q)
    m.d, m.factor = d, factor


def schema_shape(schema):
    """(names, sizes) of the public ``schema`` {"columns": [...]}: a column
    {"name", "values": [...]} has len(values) + 1 cells, {"name", "bounds":
    [lo, hi], "bins": k} has k + 1 (the last is the "other" cell). Checks
    what the frame carries (docs/mechanisms/marginals.md, "Device state"):
    names distinct strings of 1..MAX_NAME characters without NUL; values
    strings of at most MAX_NAME characters, ints in int32 or finite floats,
    distinct as text (1 and "1" repeat), at most MAX_VALUES in all; bounds
    finite with lo < hi and a finite span; bins in [1, MAX_SIZE - 1]."""
    if not isinstance(schema, dict) or len(schema) != 1 or not isinstance(schema.get("columns"), list):
        raise ConfigError('marginals.schema must be {"columns": [...]}')
    columns = schema["columns"]
    d = len(columns)
    if not 1 <= d <= MAX_CHANNELS:
        raise ConfigError("marginals.schema.columns must list 1..%d columns" % MAX_CHANNELS)
    names, sizes = [], []
    nvalues = 0
    for i in range(d):
        c = columns[i]
        what = "marginals.schema.columns[%d]" % i
        if not isinstance(c, dict):
            raise ConfigError("%s must be a map" % what)
        name = c.get("name")
        if not _short_str(name) or name in names:
            raise ConfigError("%s.name must be a new string of 1..%d characters without NUL" % (what, MAX_NAME))
        names.append(name)
        if len(c) == 2 and "values" in c:
            vals = c["values"]
            if not isinstance(vals, list) or not 1 <= len(vals) < MAX_SIZE:
                raise ConfigError("%s.values must list 1..%d values" % (what, MAX_SIZE - 1))
            nvalues += len(vals)
            if nvalues > MAX_VALUES:
                raise ConfigError("marginals.schema holds more than %d values" % MAX_VALUES)
            _check_values(vals, what)
            sizes.append(len(vals) + 1)
        elif len(c) == 3 and "bounds" in c and "bins" in c:
            b = c["bounds"]
            if not isinstance(b, list) or len(b) != 2:
                raise ConfigError("%s.bounds must be [lo, hi]" % what)
            try:
                lo = float(number(b[0], what + ".bounds[0]"))
                hi = float(number(b[1], what + ".bounds[1]"))
            except OverflowError:  # an int beyond a double on CPython (inf on MicroPython): refused below
                lo = hi = 0.0
            if not lo < hi or not (hi - lo) - (hi - lo) == 0.0:
                raise ConfigError("%s.bounds must have lo < hi and a finite span" % what)
            sizes.append(int_field(c, what, "bins", 1, MAX_SIZE - 1) + 1)
        else:
            raise ConfigError('%s must hold "name" and "values", or "name", "bounds" and "bins"' % what)
    return names, tuple(sizes)


def _short_str(s):
    return isinstance(s, str) and 0 < len(s) <= MAX_NAME and "\x00" not in s


def _check_values(vals, what):
    """Every value a string (1..MAX_NAME characters: "" is an empty cell, a
    missing value, so it is no value), an int32 or a finite
    float, distinct by the host's rule (schema.repeats): numbers by numeric
    value (1 and 1.0 repeat), strings by text, and a string whose float()
    equals a number of the column repeats it (1, 1.0, "1" and "1.0" are one
    value).

    One set holds both (1 != "1" there), so no text is built for a number
    (about 100 B of heap each, and MicroPython's float repr is not
    CPython's). Names are reused rather than added: every new one is
    interned for good (qstr) on a marginals device."""
    seen = set()
    for v in vals:
        if isinstance(v, str):
            if not 0 < len(v) <= MAX_NAME:  # the message replaced, not added: no new interned string
                raise ConfigError("%s.values: a string must have 1..%d characters" % (what, MAX_NAME))
            k = v
        elif isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ConfigError("%s.values must be strings, integers or finite numbers" % what)
        elif isinstance(v, int):
            if not -INT32 <= v < INT32:
                raise ConfigError("%s.values: integer %d is outside int32" % (what, v))
            k = v
        elif not v - v == 0.0:
            raise ConfigError("%s.values: %r is not finite" % (what, v))
        else:
            # an integral float in int32 is kept as its int: the same hash on
            # every port (a 32-bit port boxes ints from 2**30)
            k = int(v) if -INT32 <= v < INT32 and v == int(v) else v
        if k in seen:
            raise ConfigError("%s.values repeat %r (also as text: 1 and \"1\" are the same value)" % (what, v))
        seen.add(k)
    for v in vals:
        # CPython's float() reads non-ASCII digits, MicroPython's does not: no number
        if not isinstance(v, str) or len(v.encode()) > len(v):
            continue
        try:
            k = float(v)
        except ValueError:
            continue
        # a string numerically equal to a number of the column repeats it
        # (no text built: MicroPython's float repr is not CPython's); an
        # integral float in int32 as its int, as above; nan and inf are in no set
        if -INT32 <= k < INT32 and k == int(k):
            k = int(k)
        if k in seen:
            raise ConfigError("%s.values repeat %r (also as text: 1 and \"1\" are the same value)" % (what, v))


def _groups(groups, cells):
    """(per marginal: None or array('H') of cell -> group, per marginal: G).

    ``groups`` is absent (every marginal ungrouped) or one entry per
    marginal: null (ungrouped: every cell its own group) or a list of one
    group id per cell, ids 0..G-1 each used at least once (a public
    partition: disjoint groups covering the marginal)."""
    n = len(cells)
    if groups is None:
        return [None] * n, list(cells)
    if not isinstance(groups, list) or len(groups) != n:
        raise ConfigError("marginals.groups must list %d entries (null or a list of group ids)" % n)
    out, counts = [], []
    for w in range(n):
        g = groups[w]
        if g is None:
            out.append(None)
            counts.append(cells[w])
            continue
        if not isinstance(g, list) or len(g) != cells[w]:
            raise ConfigError("marginals.groups[%d] must list one group id per cell (%d)" % (w, cells[w]))
        top = -1
        for v in g:
            if not isinstance(v, int) or isinstance(v, bool) or v < 0 or v >= cells[w]:
                raise ConfigError("marginals.groups[%d] must hold integers in [0, %d)" % (w, cells[w]))
            if v > top:
                top = v
        seen = bytearray(top + 1)
        for v in g:
            seen[v] = 1
        for v in range(top + 1):
            if not seen[v]:
                raise ConfigError("marginals.groups[%d]: group %d has no cell (ids must run over 0..%d)"
                                  % (w, v, top))
        out.append(array("H", g))
        counts.append(top + 1)
    return out, counts


def draw_noise(m, rng):
    """Noise every group total, in wire order: marginal by marginal, group 0 to G-1.

    One record adds 1 to exactly one group total of each marginal (groups
    are disjoint and cover the cells; an out-of-domain index goes to the
    "other" cell), so marginal w's totals have l1 sensitivity ``factor``:
    discrete Laplace of scale factor * q / sigma_w makes them
    (sigma_w / q)-DP, and the marginals compose to sum(sigma) / q.
    """
    num = m.factor * m.q
    for p in m.sigma:
        check_scale(KIND, num, p)
    for w in range(len(m.tabs)):
        fill_noise(m.tabs[w], rng, num, m.sigma[w])
