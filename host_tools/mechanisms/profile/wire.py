"""Host view of a profile sketch: schema check of the decoded map and the
public parameters that inversion needs (docs/mechanisms/profile.md, "Wire map")."""
import hashlib
import math

import numpy as np

from edgesynth.agent.hashing import P as HASH_P
from edgesynth.agent.profile.build import MAX_CAP, MAX_ID, MAX_IDS, MAX_SAMPLE_BITS
from edgesynth.agent.spec import MAX_Q
from edgesynth.errors import SchemaError
from edgesynth.noise import check_scale

KEYS = ("budget", "cap", "counts", "hi", "kind", "lo", "names", "p", "q", "sample")
# Objects of the largest legal map (frames.MAX_OBJECTS): the map, its keys and
# values, the one name, budget's pair, and the sample map {bits, keys: 8 ints}.
MAX_OBJECTS = 1 + 2 * len(KEYS) + 1 + 2 + 4 + 8


def _int(m, name, lo, hi):
    v = m[name]
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise SchemaError("profile.%s must be an integer in [%d, %d]" % (name, lo, hi))
    return v


class ProfileState:
    """Noisy counters ``counts`` (int64, one per id of [lo, hi)), saturated at
    ``cap``; noise is discrete Laplace with ratio ``alpha`` = exp(-p / (factor q))."""

    kind = "profile"

    @classmethod
    def from_payload(cls, m, factor):
        if sorted(m) != list(KEYS):
            raise SchemaError("profile keys %s differ from %s" % (sorted(m), list(KEYS)))
        s = cls()
        s.lo = _int(m, "lo", 0, MAX_ID)
        s.hi = _int(m, "hi", 1, MAX_ID + 1)
        if not 0 < s.hi - s.lo <= MAX_IDS:
            raise SchemaError("profile domain [lo, hi) must hold 1..%d ids" % MAX_IDS)
        s.n = s.hi - s.lo
        s.cap = _int(m, "cap", 1, MAX_CAP)
        s.p = _int(m, "p", 1, MAX_Q)
        s.q = _int(m, "q", 1, MAX_Q)
        if m["budget"] != [s.p, s.q]:
            raise SchemaError("profile.budget must equal [p, q]")
        check_scale("profile", factor * s.q, s.p)
        names = m["names"]
        if not isinstance(names, list) or len(names) != 1 or not isinstance(names[0], str) \
                or not 0 < len(names[0]) <= 64:
            raise SchemaError("profile.names must list one short string")
        s.names = list(names)
        b = m["counts"]
        if not isinstance(b, bytes) or len(b) != 4 * s.n:
            raise SchemaError("profile.counts must be a bin of %d bytes" % (4 * s.n))
        s.counts = np.frombuffer(b, dtype="<i4").astype(np.int64)
        if np.any(s.counts > s.cap):
            raise SchemaError("profile.counts exceed the cap %d" % s.cap)
        s.bits, s.keys = _sample(m["sample"], s.hi)
        s.budget = (s.p, s.q)
        s.factor = factor
        s.alpha = math.exp(-s.p / (factor * s.q))
        s.frames = 1
        return s

    def config_id(self):
        """Digest of the parameters that must agree for sketches to combine
        (the domain may differ: disjoint domains concatenate)."""
        h = hashlib.sha256()
        for part in ("profile", self.cap, self.p, self.q, self.factor, self.bits, self.keys):
            h.update(repr(part).encode())
        return h.hexdigest()[:16]

    def describe(self):
        return {"kind": "profile", "channels": self.names, "domain": [self.lo, self.hi], "cap": self.cap,
                "sample_bits": self.bits or None, "epsilon": "%d/%d" % self.budget, "alpha": self.alpha,
                "config_id": self.config_id()}


def _sample(v, hi):
    """(bits, keys) of a hashed-id sample, or (0, ()) for dense ids."""
    if v is None:
        return 0, ()
    if not isinstance(v, dict) or sorted(v) != ["bits", "keys"]:
        raise SchemaError("profile.sample must be nil or a map {bits, keys}")
    bits, keys = v["bits"], v["keys"]
    if not isinstance(bits, int) or isinstance(bits, bool) or not 2 <= bits <= MAX_SAMPLE_BITS or bits & 1 \
            or hi > 1 << bits:
        raise SchemaError("profile.sample.bits must be even, 2..%d, with hi <= 2**bits" % MAX_SAMPLE_BITS)
    if not isinstance(keys, list) or len(keys) != 8 or \
            not all(isinstance(k, int) and not isinstance(k, bool) and 0 <= k < HASH_P for k in keys):
        raise SchemaError("profile.sample.keys must list 8 integers below %d" % HASH_P)
    return bits, tuple(keys)
