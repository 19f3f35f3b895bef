"""Construction phase of the profile sketch: validate the public spec, allocate
one counter per id of the public domain and draw its noise before any reading.

Unloaded on MicroPython once the state is built (firmware_shims/memory.py).
"""
from array import array

from ..errors import ConfigError
from ..hashing import derive_params
from ..spec import MAX_Q, check_scale, fill_noise, int_field, known_fields, names_field

KIND = "profile"
MAX_IDS = 1 << 24        # counters; the domain itself may sit anywhere below 2**29
MAX_ID = (1 << 29) - 1
MAX_CAP = 1 << 24        # cap + noise stays far below 2**30
MAX_SAMPLE_BITS = 28     # Feistel halves of 14 bits: a * R + b < 2**29
SPEC_KEYS = ("kind", "names", "lo", "hi", "cap", "p", "q", "sample")


def setup(m, spec, factor):
    """Fill Profile object ``m`` from ``spec`` and allocate its counters."""
    parse(m, spec, factor)
    m.ctr = array("i", range(m.n))  # one block, allocated once; the noise overwrites every cell


def parse(m, spec, factor):
    """Validate ``spec`` and set the public fields of ``m`` (no counters):
    shared with the native runtime, which keeps its counters in C."""
    known_fields(spec, KIND, SPEC_KEYS)
    m.names = names_field(spec, KIND, 1, ["id"])
    lo = int_field(spec, KIND, "lo", 0, MAX_ID)
    hi = int_field(spec, KIND, "hi", 1, MAX_ID + 1)
    if not 0 < hi - lo <= MAX_IDS:
        raise ConfigError("profile domain [lo, hi) must hold 1..%d ids, got [%d, %d)" % (MAX_IDS, lo, hi))
    m.lo, m.hi, m.n = lo, hi, hi - lo
    _sample(m, spec.get("sample"))
    m.cap = int_field(spec, KIND, "cap", 1, MAX_CAP)
    m.q = int_field(spec, KIND, "q", 1, MAX_Q)
    m.p = int_field(spec, KIND, "p", 1, MAX_Q)
    m.factor = factor
    m.name_bytes = [s.encode() for s in m.names]


def _sample(m, sample):
    """Hashed ids: a keyed permutation pi of the universe [0, 2**bits) (a
    4-round Feistel network on two bits/2-bit halves, round function
    (a * R + b) mod 32749 truncated to the half) picks the counters: id x is
    counted at pi(x) - lo when lo <= pi(x) < hi, a public, data-independent
    sample of (hi - lo) / 2**bits of the universe. ``sample`` is None (dense
    ids) or {"bits": even 2..28, "seed": public string}."""
    m.bits = m.half = m.mask = m.universe = 0
    m.keys = ()
    m.sample_seed = None
    if sample is None:
        return
    if not isinstance(sample, dict):
        raise ConfigError("profile.sample must be an object {bits, seed}")
    known_fields(sample, "profile.sample", ("bits", "seed"))
    bits = int_field(sample, "profile.sample", "bits", 2, MAX_SAMPLE_BITS)
    if bits & 1:
        raise ConfigError("profile.sample.bits must be even (two equal Feistel halves)")
    seed = sample.get("seed")
    if not isinstance(seed, str) or not 0 < len(seed) <= 64:
        raise ConfigError("profile.sample.seed must be a public string of 1..64 characters")
    if m.hi > 1 << bits:
        raise ConfigError("profile sample range [lo, hi) must lie inside [0, 2**bits)")
    m.bits, m.half, m.universe = bits, bits >> 1, 1 << bits
    m.mask = (1 << m.half) - 1
    m.sample_seed = seed
    m.keys = tuple(derive_params(seed.encode(), 8))


def draw_noise(m, rng):
    """Discrete Laplace of scale factor * q / p on every counter, id order,
    saturated at the cap.

    One reading changes one counter by 1 (add/remove), so the counter vector
    has l1 sensitivity ``factor`` and this noise makes it (p/q)-DP. The noise
    is never clipped from below: max(L, Z) followed by increments is not a
    function of h + Z and breaks pure DP (docs/mechanisms/profile.md).
    """
    num = m.factor * m.q
    check_scale(KIND, num, m.p)
    ctr = m.ctr
    fill_noise(ctr, rng, num, m.p)
    # saturate the noise itself at the cap: each counter then holds min(h + Z, cap)
    # at every moment, a post-processing of h + Z. A counter left above the cap
    # would publish min(Z, .) differently for h and h + 1 and break the bound.
    cap = m.cap
    for i in range(len(ctr)):
        if ctr[i] > cap:
            ctr[i] = cap
