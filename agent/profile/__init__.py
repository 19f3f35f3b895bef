"""Profile sketch: a noisy counter per id of a public dense domain [lo, hi).

Wu and Pagh, "Profile reconstruction from private sketches" (ICML 2024;
docs/mechanisms/profile.md). Every counter is born with exact discrete Laplace noise
(agent/profile/build.py); a reading is one id, and its counter is incremented
unless it has reached the public cap U, so a counter holds min(h + Z, U):
saturating from above is post-processing of h + Z, and the host unfolds it.
Counters are never clipped from below. Ids outside the domain are ignored
(the domain is public, so dropping them is a public map). The host recovers
how many ids were seen exactly t times, t = 0..U (host_tools/mechanisms/profile/invert.py).

With ``sample`` (hashed ids from a large universe [0, 2**bits)) an id is first
mapped by a keyed Feistel permutation and counted only when its image falls in
[lo, hi): a public, data-independent sample of the universe (the paper's
domain sampling, done with a keyed permutation).
The permutation is a sampling device, not a cipher: privacy does not rest on
the key (the sample is independent of the data), which travels in the frame.
"""
from ..errors import SEALED, SealedError

KIND = "profile"


class Profile:
    """Noisy per-id counters (see module docstring); ``factor`` as for PrivHP."""

    kind = KIND
    sealed = False

    def __init__(self, spec, factor=1):
        from .build import setup
        setup(self, spec, factor)

    def draw_noise(self, rng):
        from .build import draw_noise
        draw_noise(self, rng)

    def prepare_release(self):
        from .release import prepare
        prepare()

    def budget(self):
        """(numerator, denominator) of the epsilon this state spends."""
        return self.p, self.q

    def update(self, x):
        """Count one reading: ``x[0]`` is an integer id. Allocates nothing;
        values stay below cap + |noise| < 2**30."""
        if self.sealed:
            raise SealedError(SEALED)
        v = x[0]
        if self.bits:
            if v < 0 or v >= self.universe:
                return
            h = self.half
            mask = self.mask
            a0, b0, a1, b1, a2, b2, a3, b3 = self.keys
            left = v >> h
            right = v & mask
            t = left ^ ((a0 * right + b0) % 32749 & mask)
            left = right
            right = t
            t = left ^ ((a1 * right + b1) % 32749 & mask)
            left = right
            right = t
            t = left ^ ((a2 * right + b2) % 32749 & mask)
            left = right
            right = t
            t = left ^ ((a3 * right + b3) % 32749 & mask)
            v = (right << h) | t
        i = v - self.lo
        if 0 <= i < self.n:
            ctr = self.ctr
            if ctr[i] < self.cap:
                ctr[i] += 1

    def encode(self, enc):
        from .release import encode
        encode(self, enc)

    def counters(self):
        return [self.ctr]

    def counter_bytes(self):
        return 4 * self.n
