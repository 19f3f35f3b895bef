"""PrivHP device state: a noisy complete tree plus one private sketch per deeper level.

Holland et al., "Private Synthetic Data Generation in Small Memory", Alg. 1-2,
with the corrections listed in docs/mechanisms/privhp.md. The domain is a public box split into
a binary hierarchy of depth r; level l (1-based) halves coordinate (l-1) mod d.
Levels 0..L (L = min(floor(log2 k), r)) keep one counter per node; levels
L+1..r keep a j x w count-min (or count) sketch keyed by the heap id 2**l + v.

Noise is drawn at construction (agent/privhp/build.py), before any reading (rule 2):
discrete Laplace of scale q/p_l per tree counter and j*q/p_l per sketch cell
(times 2 for replace-one neighbours), so the state is private at rest.
docs/privacy.md states the argument.

Quantisation is an exact binary long division of (x - lo) by (hi - lo), one bit
per level, fused with the tree walk: the path bits are exactly the bits of
floor((x - lo) * 2**B_i / (hi - lo)) and every intermediate stays below
2 * (hi - lo) <= 2**30 - 2. With integer bounds and integer readings (ADC codes) the update
allocates nothing and never leaves 30-bit small ints.
"""
from ..errors import SEALED, SealedError
from ..shims import load

# The phase modules by absolute name: this module is the one `bundle --emit
# native` compiles to machine code, where relative imports in functions fail.
BUILD = __name__ + ".build"
RELEASE = __name__ + ".release"

KIND = "privhp"


class PrivHP:
    """Noisy PrivHP state for one stream of d-channel readings.

    ``spec`` is the mechanism entry of the device config (docs/config.md);
    ``factor`` multiplies every noise scale (1 for add/remove-one neighbours,
    2 for replace-one). The state is not usable until ``draw_noise(rng)``,
    which the Agent calls before any reading.
    """

    kind = KIND
    sealed = False  # set by the agent's release(); updates are refused after it

    def __init__(self, spec, factor=1):
        setup = load(BUILD).setup
        setup(self, spec, factor)

    def draw_noise(self, rng):
        """Noise every counter from ``rng`` (construction phase, before data)."""
        draw_noise = load(BUILD).draw_noise
        draw_noise(self, rng)

    def prepare_release(self):
        """Load the release code and its key table now, so that releasing later
        allocates next to nothing (call after the construction code is gone)."""
        prepare = load(RELEASE).prepare
        prepare()

    def budget(self):
        """(numerator, denominator) of the epsilon this state spends."""
        total = self.clamp_p
        for s in self.sigma:
            total += s
        return total, self.q

    def update(self, x):
        """Count one reading ``x`` (a sequence of d numbers). Allocates nothing
        for integer readings; out-of-box values land in the nearest cell."""
        if self.sealed:
            raise SealedError(SEALED)
        rem = self.rem
        lo = self.lo
        hi = self.hi
        span = self.span
        clamped = 0
        for i in range(self.d):
            xi = x[i]
            if xi > hi[i]:
                rem[i] = span[i]
                clamped = 1
            elif xi >= lo[i]:
                rem[i] = xi - lo[i]
            else:  # below the box, or NaN
                rem[i] = 0
                clamped = 1
        if clamped and self.clamp_p:
            self.clamp += 1
        self.tree_rows[0][0] += 1
        v = 0
        for i, tab in self.tree_levels:
            t = rem[i] + rem[i]
            s = span[i]
            if t >= s:
                rem[i] = t - s
                v = v + v + 1
            else:
                rem[i] = t
                v = v + v
            tab[v] += 1
        mask = self.wmask
        if self.sketch == "cms":
            for i, nb, rows in self.sketch_levels:
                t = rem[i] + rem[i]
                s = span[i]
                if t >= s:
                    rem[i] = t - s
                    v = v + v + 1
                else:
                    rem[i] = t
                    v = v + v
                node = v + nb
                x0 = node & 16383
                x1 = (node >> 14) & 16383
                x2 = node >> 28
                for b, a1, a2, a3, tab in rows:
                    tab[(b + a1 * x0 + a2 * x1 + a3 * x2) % 32749 & mask] += 1
        else:
            for i, nb, rows in self.sketch_levels:
                t = rem[i] + rem[i]
                s = span[i]
                if t >= s:
                    rem[i] = t - s
                    v = v + v + 1
                else:
                    rem[i] = t
                    v = v + v
                node = v + nb
                x0 = node & 16383
                x1 = (node >> 14) & 16383
                x2 = node >> 28
                for b, a1, a2, a3, tab, gb, g1, g2, g3 in rows:
                    g = (gb + g1 * x0 + g2 * x1 + g3 * x2) % 32749
                    tab[(b + a1 * x0 + a2 * x1 + a3 * x2) % 32749 & mask] += 1 - ((g & 1) << 1)
        # the remainders still encode the reading: clear them so that the state
        # at rest holds noisy counters only (privacy rule 2)
        for i in range(self.d):
            rem[i] = 0

    def encode(self, enc):
        """Write this state as one msgpack map (agent/privhp/release.py)."""
        encode = load(RELEASE).encode
        encode(self, enc)

    def counters(self):
        """Every counter array in wire order: tree levels, then sketch rows."""
        return self.tree_rows + self.sketch_rows

    def counter_bytes(self):
        """Bytes of counters and hash parameters (what `edgesynth plan` counts)."""
        n = 0
        for tab in self.counters():
            n += len(tab)
        return 4 * n + 2 * len(self.hash)
