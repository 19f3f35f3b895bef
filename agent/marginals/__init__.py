"""Marginals state: noisy (partitioned) low-dimensional marginals of records.

Zhang, Deng, Yin, "Partition-based differentially private synthetic data
generation" (PPSyn; docs/mechanisms/marginals.md), in its DP-sound form: every
choice is public. A record is d cell indices, one per column of the public
schema the spec carries (column c has ``sizes[c]`` cells, derived from the
schema, the last its "other" cell; the frame carries the schema). The
spec lists the measured marginals (sorted column tuples, at most MAX_WAY
columns); each marginal's cells (C order, last column fastest) may be mapped
by a public partition onto G groups. The device keeps one int32 total per
group, born with exact discrete Laplace noise of scale factor * q / sigma_w
(agent/marginals/build.py); an update adds 1 to one group total of every
marginal, so the state is exactly the counters the frame carries.

Pure epsilon-DP: marginal w spends sigma_w / q, the marginals compose to
sum(sigma) / q. Partitions for later windows come from the host's model of
earlier releases (post-processing), delivered as the next config; the device
never derives a partition or a scale from its data.
"""
from ..errors import SEALED, SealedError

KIND = "marginals"


class Marginals:
    """Noisy group totals of the public marginals (see module docstring).

    ``spec`` is the mechanism entry of the device config; ``factor``
    multiplies every noise scale (1 add/remove, 2 replace).
    """

    kind = KIND
    sealed = False

    def __init__(self, spec, factor=1):
        from .build import setup
        setup(self, spec, factor)

    def draw_noise(self, rng):
        """Noise every group total from ``rng`` (construction phase, before data)."""
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
        """Count one record ``x``: d cell indices (ints; a float is floored).
        An index outside [0, sizes[c]) or NaN counts in column c's "other"
        cell, so every record reaches every marginal exactly once. Allocates
        nothing; cell indices stay below MAX_CELLS = 2**16."""
        if self.sealed:
            raise SealedError(SEALED)
        cell = self.cell
        c = 0
        for s in self.sizes:
            v = x[c]
            if 0 <= v < s:
                cell[c] = int(v)
            else:
                cell[c] = s - 1
            c += 1
        for terms, groups, tab in self.plan:
            j = 0
            for col, stride in terms:
                j += cell[col] * stride
            if groups is not None:
                j = groups[j]
            tab[j] += 1

    def encode(self, enc):
        from .release import encode
        encode(self, enc)

    def counters(self):
        """Every group-total array in wire order (marginal by marginal)."""
        return self.tabs

    def counter_bytes(self):
        n = 0
        for tab in self.tabs:
            n += len(tab)
        return 4 * n
