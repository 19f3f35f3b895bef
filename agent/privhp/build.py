"""Construction phase of the PrivHP device state: validate the public spec,
allocate the counters once, derive the public hash parameters and draw every
counter's noise (privacy rule 2: before any reading).

On MicroPython the agent unloads this module (and the sampler and DRBG) once
the state is built, so its bytecode does not count against the heap while the
device streams (firmware_shims/memory.py).
"""
from array import array

from ..errors import ConfigError
from ..hashing import MAX_WIDTH, PARAMS_PER_HASH, derive_params
from ..spec import MAX_Q, MAX_SCALE, bounds_field, draw, fill_noise, int_field, int_list, known_fields, names_field

MAX_DEPTH = 29           # heap ids 2**l + v stay below 2**30
MAX_INT_SPAN = (1 << 29) - 1  # integer bounds: 2 * remainder stays below 2**30
MAX_COUNTERS = 1 << 24   # 64 MiB of int32: far beyond any device, still a sanity cap
SKETCHES = ("cms", "cs")


def setup(m, spec, factor):
    """Fill PrivHP object ``m`` from ``spec``: fields, zeroed tables, level plan.

    The noise comes after (``draw_noise``), once every mechanism's tables are
    allocated: big contiguous blocks first keep a small heap unfragmented.
    """
    parse(m, spec)
    m.factor = factor
    alloc(m)
    plan_levels(m)


def floor_log2(k):
    """floor(log2 k) for an integer k >= 1, without int.bit_length (absent on MicroPython)."""
    n = 0
    while k > 1:
        k >>= 1
        n += 1
    return n


def is_pow2(n):
    return n >= 1 and (n & (n - 1)) == 0


# every key a privhp spec may hold: an unknown one is refused, so that a
# misspelt optional key ("skecth") cannot silently fall back to its default
SPEC_KEYS = ("kind", "names", "lo", "hi", "r", "k", "w", "j", "sketch", "hash_seed", "q", "sigma",
             "clamp_p")


def parse(m, spec):
    known_fields(spec, "privhp", SPEC_KEYS)
    lo, hi, span = bounds_field(spec, "privhp", MAX_INT_SPAN)
    d = len(lo)
    names = names_field(spec, "privhp", d, ["x%d" % i for i in range(d)])
    r = int_field(spec, "privhp", "r", 1, MAX_DEPTH)
    k = int_field(spec, "privhp", "k", 1, 1 << 30)
    w = int_field(spec, "privhp", "w", 1, MAX_WIDTH)
    if not is_pow2(w):
        raise ConfigError("privhp.w must be a power of two, got %d" % w)
    j = int_field(spec, "privhp", "j", 1, 16)
    sk = spec.get("sketch", "cms")
    if sk not in SKETCHES:
        raise ConfigError("privhp.sketch must be 'cms' or 'cs', got %r" % (sk,))
    q = int_field(spec, "privhp", "q", 1, MAX_Q)
    sigma = int_list(spec, "privhp", "sigma", r + 1, 1, MAX_Q)
    clamp_p = int_field(spec, "privhp", "clamp_p", 0, MAX_Q)
    seed = spec.get("hash_seed")
    if not isinstance(seed, str) or not 0 < len(seed) <= 64:
        raise ConfigError("privhp.hash_seed must be a public string of 1..64 characters")
    L = floor_log2(k)
    if L > r:
        L = r
    n_counters = (1 << (L + 1)) - 1 + (r - L) * j * w
    if n_counters > MAX_COUNTERS:
        raise ConfigError("privhp needs %d counters, more than any device holds" % n_counters)
    m.d, m.r, m.k, m.w, m.j, m.L = d, r, k, w, j, L
    m.sketch, m.q, m.sigma, m.clamp_p = sk, q, sigma, clamp_p
    m.names, m.lo, m.hi, m.span = names, lo, hi, span
    m.hash_seed = seed
    m.name_bytes = [s.encode() for s in names]


def alloc(m):
    """Counters as one small array per tree level and per sketch row.

    Many small blocks instead of one big one: a fragmented MCU heap may have
    plenty of free bytes but no single large hole. ``array(range(n))``
    allocates each block once, without a same-size temporary; the noise draw
    overwrites every cell.
    """
    d, r, L, j, w = m.d, m.r, m.L, m.j, m.w
    m.tree_rows = [array("i", range(1 << lvl)) for lvl in range(L + 1)]
    m.sketch_rows = [array("i", range(w)) for _ in range((r - L) * j)]
    per = PARAMS_PER_HASH * (2 if m.sketch == "cs" else 1)
    m.hash = array("H", derive_params(m.hash_seed.encode(), (r - L) * j * per))
    m.coord = bytearray(r + 1)  # level -> channel it splits
    for lvl in range(1, r + 1):
        m.coord[lvl] = (lvl - 1) % d
    m.rem = [0] * d
    m.wmask = w - 1
    m.clamp = 0


def draw_noise(m, rng):
    """Every counter's discrete Laplace noise, in wire order: tree levels in
    heap order, then sketch levels, rows, columns, then the clamp counter."""
    q = m.q * m.factor
    for lvl in range(m.r + 1):
        p = m.sigma[lvl]
        if (m.j if lvl > m.L else 1) * q > p * MAX_SCALE:
            raise ConfigError("level %d's noise scale exceeds 2**22: its budget share is too small" % lvl)
    if m.clamp_p and q > m.clamp_p * MAX_SCALE:
        raise ConfigError("the clamp counter's noise scale exceeds 2**22: clamp_p is too small")
    for lvl in range(m.L + 1):
        fill_noise(m.tree_rows[lvl], rng, q, m.sigma[lvl])
    for i in range(len(m.sketch_rows)):
        fill_noise(m.sketch_rows[i], rng, m.j * q, m.sigma[m.L + 1 + i // m.j])
    if m.clamp_p:
        m.clamp = draw(rng, q, m.clamp_p)


def plan_levels(m):
    """Per-level tuples the update loop unpacks: no index arithmetic there.

    Tree level l: (channel, that level's array). Sketch level l:
    (channel, 2**l, rows) with rows ((b, a1, a2, a3, row array
    [, sign b, a1, a2, a3]), ...).
    """
    coord = m.coord
    m.tree_levels = [(coord[l], m.tree_rows[l]) for l in range(1, m.L + 1)]
    per = PARAMS_PER_HASH * (2 if m.sketch == "cs" else 1)
    prm = m.hash
    levels = []
    pb = 0
    row = 0
    for l in range(m.L + 1, m.r + 1):
        rows = []
        for _ in range(m.j):
            rows.append(tuple(prm[pb:pb + 4]) + (m.sketch_rows[row],) + tuple(prm[pb + 4:pb + per]))
            pb += per
            row += 1
        levels.append((coord[l], 1 << l, tuple(rows)))
    m.sketch_levels = levels

