"""Host view of a CDF tree state: schema check of the decoded map, per-channel
level arrays, noise variances, merge (docs/mechanisms/cdf.md, "Wire map")."""
import hashlib
import math

import numpy as np

from edgesynth.agent.cdf.build import MAX_BINS, MAX_COUNTERS, MAX_INT_SPAN, MAX_LEAVES, MAX_LEVELS
from edgesynth.agent.spec import MAX_CHANNELS, MAX_Q
from edgesynth.errors import SchemaError
from edgesynth.mechanisms.cdf.estimate import stored_widths
from edgesynth.mechanisms.integers import frame_bounds
from edgesynth.merge import repeated_sum
from edgesynth.noise import check_scale, dlap_variance

KEYS = ("bins", "branching", "budget", "hi", "kind", "lo", "names", "nodes", "q", "sigma")
# Objects of the largest legal map (frames.MAX_OBJECTS): the map, its keys and
# values, lo/hi/names of MAX_CHANNELS, branching and sigma of MAX_LEVELS, budget's pair.
MAX_OBJECTS = 1 + 2 * len(KEYS) + 3 * MAX_CHANNELS + 2 * MAX_LEVELS + 2


def _ints(m, name, n, lo, hi):
    v = m[name]
    if not isinstance(v, list) or len(v) != n or \
            not all(isinstance(x, int) and not isinstance(x, bool) and lo <= x <= hi for x in v):
        raise SchemaError("cdf.%s must list %d integers in [%d, %d]" % (name, n, lo, hi))
    return list(v)


class CDFState:
    """Decoded CDF trees. ``levels[c][i]`` float64 noisy counts of channel c's
    stored level-(i+1) nodes; ``var[i]`` their noise variance (adds on
    merge); ``frames`` counts merged releases; ``integer`` one bool per
    channel (the frame gave its bounds as ints)."""

    kind = "cdf"

    @classmethod
    def from_payload(cls, m, factor):
        if sorted(m) != list(KEYS):
            raise SchemaError("cdf keys %s differ from %s" % (sorted(m), list(KEYS)))
        s = cls()
        s.lo, s.hi, s.integer = frame_bounds(m, "cdf", MAX_INT_SPAN)
        names, d = m["names"], len(s.lo)
        if not isinstance(names, list) or len(names) != d or \
                not all(isinstance(x, str) and 0 < len(x) <= 64 for x in names):
            raise SchemaError("cdf.names must list %d short strings" % d)
        s.names, s.d = list(names), d
        K = m["bins"]
        if not isinstance(K, int) or isinstance(K, bool) or not 2 <= K <= MAX_BINS:
            raise SchemaError("cdf.bins must be an integer in [2, %d]" % MAX_BINS)
        br = m["branching"]
        if not isinstance(br, list) or not 1 <= len(br) <= MAX_LEVELS:
            raise SchemaError("cdf.branching must list 1..%d factors" % MAX_LEVELS)
        br = _ints(m, "branching", len(br), 2, MAX_LEAVES)
        if math.prod(br) > MAX_LEAVES or math.prod(br) < K:
            raise SchemaError("cdf.branching must multiply to between bins and 2**29")
        q = m["q"]
        if not isinstance(q, int) or isinstance(q, bool) or not 1 <= q <= MAX_Q:
            raise SchemaError("cdf.q must be a positive integer")
        s.sigma = _ints(m, "sigma", len(br), 1, MAX_Q)
        for i, p in enumerate(s.sigma):
            check_scale("cdf level %d" % (i + 1), d * factor * q, p)
        if m["budget"] != [sum(s.sigma), q]:
            raise SchemaError("cdf.budget does not equal sum(sigma) / q")
        s.K, s.branching, s.q, s.factor = K, br, q, factor
        s.budget = (sum(s.sigma), q)
        s.widths = stored_widths(K, br)
        per = sum(s.widths)
        if per * d > MAX_COUNTERS:
            raise SchemaError("cdf state claims more than %d counters" % MAX_COUNTERS)
        b = m["nodes"]
        if not isinstance(b, bytes) or len(b) != 4 * per * d:
            raise SchemaError("cdf.nodes must be a bin of %d bytes" % (4 * per * d))
        flat = np.frombuffer(b, dtype="<i4").astype(np.float64).reshape(d, per)
        cuts = np.cumsum([0] + s.widths)
        s.levels = [[flat[c, cuts[i]:cuts[i + 1]] for i in range(len(br))] for c in range(d)]
        s.var = s._variance(1)
        s.frames = 1
        return s

    def _variance(self, frames):
        """Noise variance of each level's nodes over ``frames`` merged
        frames, summed one frame at a time."""
        var = np.array([dlap_variance(self.d * self.factor * self.q, p) for p in self.sigma])
        return repeated_sum(var, frames) if frames > 1 else var

    def config_id(self):
        """Hex digest of every public parameter but the integer flags (see
        accumulate); equal ids can be merged."""
        h = hashlib.sha256()
        for part in ("cdf", self.names, self.lo.tolist(), self.hi.tolist(), self.K, self.branching,
                     self.q, self.sigma, self.factor):
            h.update(repr(part).encode())
        return h.hexdigest()[:16]

    def copy(self):
        """A state whose counts can be added into without touching this one's."""
        out = CDFState()
        out.__dict__.update(self.__dict__)
        out.levels = [[a.copy() for a in la] for la in self.levels]
        out.var = self.var.copy()
        out.integer = list(self.integer)
        return out

    def accumulate(self, other):
        """Add the node counts of ``other`` (a state of the same config_id,
        over disjoint data: parallel composition, each reading is in one
        frame) into this one, in place. The variances are those of the
        merged frames summed one at a time, as a fold over single frames adds
        them, so partial merges (Dask) combine to the same bytes."""
        for la, lb in zip(self.levels, other.levels):
            for a, b in zip(la, lb):
                a += b
        if other.frames == 1:
            self.var += other.var
        else:
            self.var = self._variance(self.frames + other.frames)
        self.frames += other.frames
        # the same config bins alike whichever way a frame writes its bounds:
        # a channel stays integer when every frame says so (older agents' say real)
        self.integer = [a and b for a, b in zip(self.integer, other.integer)]

    def describe(self):
        """JSON-ready summary for `edgesynth inspect`."""
        return {"kind": "cdf", "channels": self.names, "lo": self.lo.tolist(), "hi": self.hi.tolist(),
                "integer": [n for n, f in zip(self.names, self.integer) if f], "bins": self.K,
                "branching": self.branching, "epsilon": "%d/%d" % self.budget,
                "noise_sd_per_level": np.sqrt(self.var).tolist(), "config_id": self.config_id()}
