"""Construction phase of the CDF tree state: validate the public spec, allocate
every node counter once and draw its noise before any reading (privacy rule 2).

Unloaded on MicroPython once the state is built (firmware_shims/memory.py).
"""
from array import array

from ..errors import ConfigError
from ..spec import MAX_Q, bounds_field, check_scale, fill_noise, int_field, int_list, known_fields, names_field

KIND = "cdf"
MAX_BINS = 1 << 24
MAX_LEVELS = 24
MAX_LEAVES = 1 << 29     # padded leaves K-bar: bin // P stays a small int
MAX_INT_SPAN = (1 << 28) - 1  # integer bounds: 2 * rem + r < 3 * span < 2**30 in the bin division
MAX_COUNTERS = 1 << 24
SPEC_KEYS = ("kind", "names", "lo", "hi", "bins", "branching", "q", "sigma")


def setup(m, spec, factor):
    """Fill CDF object ``m`` from ``spec``: fields, zeroed counters, update plan."""
    parse(m, spec, factor)
    # one small array per channel and level (no large contiguous block, as PrivHP)
    m.rows = [[array("i", range(w)) for w in m.widths] for _ in range(m.d)]
    _plan(m)


def parse(m, spec, factor):
    """Validate ``spec`` and set the public fields of ``m`` (no counters):
    shared with the native runtime, which keeps its counters in C."""
    known_fields(spec, KIND, SPEC_KEYS)
    lo, hi, span = bounds_field(spec, KIND, MAX_INT_SPAN)
    d = len(lo)
    m.names = names_field(spec, KIND, d, ["x%d" % i for i in range(d)])
    K = int_field(spec, KIND, "bins", 2, MAX_BINS)
    for c in range(d):
        t = span[c] * K   # float bounds bin by (x - lo) * K / span: the product must stay finite
        if isinstance(t, float) and not (t - t == 0.0):
            raise ConfigError("cdf channel %d: span * bins overflows a float" % c)
    br = spec.get("branching")
    if not isinstance(br, list) or not 1 <= len(br) <= MAX_LEVELS:
        raise ConfigError("cdf.branching must list 1..%d branching factors" % MAX_LEVELS)
    br = int_list(spec, KIND, "branching", len(br), 2, MAX_LEAVES)
    kbar = 1
    for n in br:
        kbar *= n
        if kbar > MAX_LEAVES:
            raise ConfigError("cdf: the product of the branching factors exceeds 2**29")
    if kbar < K:
        raise ConfigError("cdf: the branching factors multiply to %d, fewer than %d bins" % (kbar, K))
    levels = len(br)
    q = int_field(spec, KIND, "q", 1, MAX_Q)
    m.sigma = int_list(spec, KIND, "sigma", levels, 1, MAX_Q)
    # leaves under one node of level i (1-based): P_i = n_{i+1} * ... * n_m
    P = [1] * (levels + 1)
    for i in range(levels - 1, -1, -1):
        P[i] = P[i + 1] * br[i]
    widths = [(K + P[i] - 1) // P[i] for i in range(1, levels + 1)]  # padded-only nodes dropped
    total = 0
    for w in widths:
        total += w
    if total * d > MAX_COUNTERS:
        raise ConfigError("cdf needs %d counters, more than any device holds" % (total * d))
    m.d, m.K, m.branching, m.q, m.lo, m.hi, m.span = d, K, br, q, lo, hi, span
    m.factor = factor
    m.P = P
    m.widths = widths
    m.name_bytes = [s.encode() for s in m.names]


def _plan(m):
    """Per-channel tuples the update loop unpacks: no index arithmetic there.

    Integer bounds bin by exact integer division: directly when span * K stays
    below 2**30, else by a long division over the bits of K (see CDF.update).
    """
    K = m.K
    bits = []
    k = K
    while k:
        bits.append(k & 1)
        k >>= 1
    bits.reverse()
    m.kbits = tuple(bits)
    m.chan = []
    for c in range(m.d):
        lo, hi, s = m.lo[c], m.hi[c], m.span[c]
        exact = isinstance(lo, int) and isinstance(hi, int)
        mode = 0 if not exact else (1 if s * K < (1 << 30) else 2)
        levels = tuple([(m.rows[c][i], m.P[i + 1]) for i in range(len(m.widths))])
        m.chan.append((lo, hi, s, mode, levels))
    m.chan = tuple(m.chan)


def draw_noise(m, rng):
    """Noise every node, in wire order: channel by channel, level 1 to m, left to right.

    One reading moves one node per level in each of the d channels, so level
    i's counters have l1 sensitivity d * factor (add/remove: 1 per channel):
    discrete Laplace of scale d * factor * q / sigma_i makes level i
    (sigma_i/q)-DP, and the levels compose to sum(sigma)/q.
    """
    num = m.d * m.factor * m.q
    for p in m.sigma:
        check_scale(KIND, num, p)
    for c in range(m.d):
        for i in range(len(m.widths)):
            fill_noise(m.rows[c][i], rng, num, m.sigma[i])
