"""Host view of a PrivHP mechanism state: schema check of the decoded map,
numpy arrays, merge, and the noise bookkeeping that merging needs."""
import functools
import hashlib

import numpy as np

from edgesynth.agent.hashing import MAX_WIDTH
from edgesynth.agent.hashing import P as HASH_P
from edgesynth.agent.privhp.build import MAX_COUNTERS, MAX_DEPTH, MAX_INT_SPAN
from edgesynth.agent.spec import MAX_Q
from edgesynth.errors import SchemaError
from edgesynth.mechanisms.integers import frame_bounds
from edgesynth.merge import repeated_sum
from edgesynth.noise import check_scale, dlap_variance

KEYS = ("budget", "clamp", "clamp_p", "hash", "hash_p", "hi", "j", "k", "kind", "lo", "names",
        "q", "r", "sigma", "sketch", "sketches", "tree", "w")
MAX_CHANNELS = 16
# Objects of the largest legal map (frames.MAX_OBJECTS): the map, its keys and
# values, lo/hi/names of MAX_CHANNELS, sigma of MAX_DEPTH + 1, budget's pair.
MAX_OBJECTS = 1 + 2 * len(KEYS) + 3 * MAX_CHANNELS + MAX_DEPTH + 1 + 2
# config ids of recent public configurations (a fleet sends one or a few):
# the id is a pure function of them, and hashing their reprs costs more per
# frame than looking them up. Cleared when full, so bounded whatever the input.
_IDS = {}
MAX_IDS = 256


def _int(m, name, lo, hi):
    v = m[name]
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise SchemaError("privhp.%s must be an integer in [%d, %d]" % (name, lo, hi))
    return v


class PrivHPState:
    """Decoded PrivHP counters with their public parameters; ``integer``
    one bool per channel (the frame gave its bounds as ints).

    Arrays: ``tree`` int64 (2**(L+1)-1,) in heap order; ``sketches`` int64
    (r-L, j, w); ``hash`` int64 (r-L, j, 4 or 8). ``tree_var``/``sketch_var``
    hold the per-counter noise variance of each level (they add on merge);
    ``frames`` counts merged releases.
    """

    kind = "privhp"

    @classmethod
    def from_payload(cls, m, factor):
        if sorted(m) != list(KEYS):
            raise SchemaError("privhp keys %s differ from %s" % (sorted(m), list(KEYS)))
        s = cls()
        s.lo, s.hi, s.integer = frame_bounds(m, "privhp", MAX_INT_SPAN)
        d = len(s.lo)
        names = m["names"]
        if not isinstance(names, list) or len(names) != d or \
                not all(isinstance(x, str) and 0 < len(x) <= 64 for x in names):
            raise SchemaError("privhp.names must list %d short strings" % d)
        s.names, s.d = list(names), d
        s.r = _int(m, "r", 1, MAX_DEPTH)
        s.k = _int(m, "k", 1, 1 << 30)
        s.w = _int(m, "w", 1, MAX_WIDTH)
        if s.w & (s.w - 1):
            raise SchemaError("privhp.w must be a power of two")
        s.j = _int(m, "j", 1, 16)
        if m["sketch"] not in ("cms", "cs"):
            raise SchemaError("privhp.sketch must be 'cms' or 'cs'")
        s.sketch = m["sketch"]
        s.q = _int(m, "q", 1, MAX_Q)
        s.clamp_p = _int(m, "clamp_p", 0, MAX_Q)
        sigma = m["sigma"]
        # exact ints (msgpack decodes integers to int, never a subclass but bool)
        if not isinstance(sigma, list) or len(sigma) != s.r + 1 or \
                not set(map(type, sigma)) <= {int} or min(sigma) < 1 or max(sigma) > MAX_Q:
            raise SchemaError("privhp.sigma must list r+1 positive integers")
        s.sigma = list(sigma)
        if m["hash_p"] != HASH_P:
            raise SchemaError("privhp.hash_p must be %d" % HASH_P)
        s.L = min(s.k.bit_length() - 1, s.r)
        nl = s.r - s.L
        if (1 << (s.L + 1)) - 1 + nl * s.j * s.w > MAX_COUNTERS:
            raise SchemaError("privhp state claims more than %d counters" % MAX_COUNTERS)
        budget = m["budget"]
        if budget != [sum(s.sigma) + s.clamp_p, s.q]:
            raise SchemaError("privhp.budget does not equal (sum(sigma) + clamp_p) / q")
        s.budget = (budget[0], budget[1])
        for lvl, p in enumerate(s.sigma):
            check_scale("privhp level %d", (s.j if lvl > s.L else 1) * s.q * factor, p, lvl)
        if s.clamp_p:
            check_scale("privhp clamp counter", s.q * factor, s.clamp_p)
        per = 8 if s.sketch == "cs" else 4
        s.hash = _block(m, "hash", "<u2", nl * s.j * per).astype(np.int64).reshape(nl, s.j, per)
        if np.any(s.hash >= HASH_P):
            raise SchemaError("privhp.hash parameters must be below %d" % HASH_P)
        s.tree = _block(m, "tree", "<i4", (1 << (s.L + 1)) - 1).astype(np.int64)
        s.sketches = _block(m, "sketches", "<i4", nl * s.j * s.w).astype(np.int64).reshape(nl, s.j, s.w)
        clamp = m["clamp"]
        if s.clamp_p == 0:
            if clamp is not None:
                raise SchemaError("privhp.clamp must be nil when clamp_p is 0")
        elif not isinstance(clamp, int) or isinstance(clamp, bool) or abs(clamp) >= 1 << 32:
            raise SchemaError("privhp.clamp must be an integer")
        s.clamp = clamp
        s.factor = factor
        s.tree_var, s.sketch_var, s.clamp_var = s._variances(1)
        s.frames = 1
        return s

    def _variances(self, frames):
        """Per-counter noise variances of ``frames`` merged frames: (tree
        levels, sketch levels, clamp counter), summed one frame at a time."""
        tree, sketch, clamp = _frame_variances(self.q * self.factor, self.j, tuple(self.sigma), self.L,
                                               self.clamp_p)
        if frames > 1:
            return repeated_sum(tree, frames), repeated_sum(sketch, frames), float(repeated_sum(clamp, frames))
        return tree.copy(), sketch.copy(), float(clamp)

    def config_id(self):
        """Hex digest of every public parameter but the integer flags (see
        accumulate); equal ids can be merged. Looked up in _IDS by the
        parameters' exact values (floats by their bytes: -0.0 is not 0.0)."""
        key = (tuple(self.names), self.lo.tobytes(), self.hi.tobytes(), self.r, self.k, self.w, self.j,
               self.sketch, self.q, tuple(self.sigma), self.clamp_p, self.factor, self.hash.tobytes(),
               self.hash.shape)
        cid = _IDS.get(key)
        if cid is None:
            if len(_IDS) >= MAX_IDS:
                _IDS.clear()
            cid = _IDS[key] = self._config_digest()
        return cid

    def _config_digest(self):
        h = hashlib.sha256()
        for part in (self.names, self.lo.tolist(), self.hi.tolist(), self.r, self.k, self.w, self.j,
                     self.sketch, self.q, self.sigma, self.clamp_p, self.factor):
            h.update(repr(part).encode())
        h.update(self.hash.astype("<i8").tobytes())
        return h.hexdigest()[:16]

    def copy(self):
        """A state whose counters can be added into without touching this one's."""
        out = PrivHPState()
        out.__dict__.update(self.__dict__)
        out.tree, out.sketches = self.tree.copy(), self.sketches.copy()
        out.tree_var, out.sketch_var = self.tree_var.copy(), self.sketch_var.copy()
        out.integer = list(self.integer)
        return out

    def accumulate(self, other):
        """Add the counters of ``other`` (a state of the same config_id, over
        disjoint data: parallel composition) into this one, in place.

        The variances are those of the merged frames summed one at a time,
        as a fold over single frames adds them: exactly, so partial merges
        (Dask) combine to the same bytes as one fold."""
        self.tree += other.tree
        self.sketches += other.sketches
        if self.clamp is not None:
            self.clamp += other.clamp
        if other.frames == 1:
            self.tree_var += other.tree_var
            self.sketch_var += other.sketch_var
            self.clamp_var += other.clamp_var
        else:
            self.tree_var, self.sketch_var, self.clamp_var = self._variances(self.frames + other.frames)
        self.frames += other.frames
        # the same config bins alike whichever way a frame writes its bounds:
        # a channel stays integer when every frame says so (older agents' say real)
        self.integer = [a and b for a, b in zip(self.integer, other.integer)]

@functools.lru_cache(maxsize=256)
def _frame_variances(t, j, sigma, L, clamp_p):
    """(tree levels, sketch levels, clamp) noise variances of one frame of
    scale factor ``t`` (q times the relation factor): read-only arrays, since
    every frame of a config shares them (callers copy before adding)."""
    tree = np.array([dlap_variance(t, p) for p in sigma[:L + 1]])
    sketch = np.array([dlap_variance(j * t, p) for p in sigma[L + 1:]])
    tree.flags.writeable = sketch.flags.writeable = False
    return tree, sketch, np.float64(dlap_variance(t, clamp_p) if clamp_p else 0.0)


def _block(m, name, dtype, count):
    b = m[name]
    size = np.dtype(dtype).itemsize
    if not isinstance(b, bytes) or len(b) != count * size:
        raise SchemaError("privhp.%s must be a bin of %d bytes, got %s"
                          % (name, count * size, len(b) if isinstance(b, bytes) else type(b).__name__))
    return np.frombuffer(b, dtype=dtype)
