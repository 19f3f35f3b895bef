"""CDF tree state: per channel, a level-uniform tree over K bins, every node noisy.

Rameshwar, Tandon, Sharma, "Optimal tree-based mechanisms for DP approximate
CDFs" (docs/mechanisms/cdf.md). Channel c's range [lo, hi) is cut into K equal
half-open bins (readings below lo count in bin 0, at or above hi in bin K-1).
Above the bins sits a tree of height m with branching (n_1..n_m), K-bar =
prod n_i >= K leaves, padded on the right; nodes that cover padding only are
never stored (they are zero on every stream, so dropping them is free). Each
node is a counter born with its own discrete Laplace noise (agent/cdf/build.py);
an update adds 1 to one node per level, so the device holds exactly the
counters the frame carries, plus a few constants. The whole tree is released,
last children included: they cost no budget and feed the host's GLS.

Neighbours differ by one reading added or removed (or replaced, factor 2); the
reading count N is not public and the root is not released: the host
estimates N from level 1 (docs/mechanisms/cdf.md).
"""
from ..errors import SEALED, SealedError

KIND = "cdf"


class CDF:
    """Noisy CDF trees for a stream of d-channel readings.

    ``spec`` is the mechanism entry of the device config (docs/mechanisms/cdf.md);
    ``factor`` multiplies every noise scale (1 add/remove, 2 replace).
    """

    kind = KIND
    sealed = False

    def __init__(self, spec, factor=1):
        from .build import setup
        setup(self, spec, factor)

    def draw_noise(self, rng):
        """Noise every node from ``rng`` (construction phase, before data)."""
        from .build import draw_noise
        draw_noise(self, rng)

    def prepare_release(self):
        from .release import prepare
        prepare()

    def budget(self):
        """(numerator, denominator) of the epsilon this state spends."""
        total = 0
        for s in self.sigma:
            total += s
        return total, self.q

    def update(self, x):
        """Count one reading ``x`` (d numbers). Integer bounds with integer
        readings bin exactly and allocate nothing; every intermediate is
        below 3 * span < 2**30."""
        if self.sealed:
            raise SealedError(SEALED)
        K = self.K
        c = 0
        for lo, hi, s, mode, levels in self.chan:
            xi = x[c]
            c += 1
            if xi >= hi:
                j = K - 1
            elif xi > lo:
                r = xi - lo
                if mode == 1:
                    j = int(r * K // s)  # int() is free for ints, floors float readings
                elif mode == 2:
                    # floor(r * K / s), long division over the bits of K
                    j = 0
                    rem = 0
                    for bit in self.kbits:
                        j += j
                        rem += rem
                        if bit:
                            rem += r
                        while rem >= s:
                            rem -= s
                            j += 1
                else:
                    j = int(r * K / s)
                if j >= K:  # a float reading just below hi whose x - lo rounds up to the span
                    j = K - 1
            else:  # at or below lo, or NaN
                j = 0
            for tab, P in levels:
                tab[j // P] += 1

    def encode(self, enc):
        from .release import encode
        encode(self, enc)

    def counters(self):
        """Every counter array in wire order."""
        out = []
        for rows in self.rows:
            out.extend(rows)
        return out

    def counter_bytes(self):
        n = 0
        for tab in self.counters():
            n += len(tab)
        return 4 * n
