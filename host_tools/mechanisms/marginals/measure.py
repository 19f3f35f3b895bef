"""One noisy (possibly partitioned) marginal as the host sees it after
decoding a frame (docs/mechanisms/marginals.md, Host algorithms).

A marginal on the columns ``cols`` has prod(sizes[c] for c in cols) cells in
C order (the last column varies fastest). A public partition maps every cell
to a group 0..G-1; the device adds integer noise to each group's total count
(the paper's Def. 9 error model: one noisy number per group, not per cell).
An ungrouped marginal is the partition into singletons, groups = arange(cells).
"""
import math

import numpy as np

from edgesynth.errors import InputError


class Measurement:
    """Noisy group totals of one marginal.

    cols: sorted tuple of distinct column indices (0-based, into the schema).
    groups: int32 array, one group id per cell of the marginal (C order), each
        in 0..G-1 with every id used at least once.
    y: float64 array of the G noisy group totals (counts of records; may be
        negative: never clipped, since clipping biases the fit).
    var: noise variance of each group total (counts squared, > 0); the same
        for every group of one measurement.
    """

    __slots__ = ("cols", "groups", "y", "var")

    def __init__(self, cols, groups, y, var):
        self.cols = tuple(int(c) for c in cols)
        self.groups = np.asarray(groups, dtype=np.int32).ravel()
        self.y = np.asarray(y, dtype=np.float64).ravel()
        self.var = float(var)
        if list(self.cols) != sorted(set(self.cols)) or not self.cols:
            raise InputError("a measurement's columns must be distinct and sorted, got %r" % (cols,))
        if not (self.var > 0 and math.isfinite(self.var)):
            raise InputError("a measurement's noise variance must be positive and finite, got %r" % var)
        G = len(self.y)
        if G == 0 or self.groups.min(initial=0) < 0 or self.groups.max(initial=-1) != G - 1:
            raise InputError("a measurement's group ids must run over 0..%d (its %d totals)" % (G - 1, G))
        if len(np.unique(self.groups)) != G:
            raise InputError("a measurement has a group with no cell")
        if not np.all(np.isfinite(self.y)):
            raise InputError("a measurement's totals must be finite")

    @classmethod
    def ungrouped(cls, cols, y, var):
        """A measurement of every cell on its own (groups = arange(cells))."""
        y = np.asarray(y, dtype=np.float64).ravel()
        return cls(cols, np.arange(len(y), dtype=np.int32), y, var)

    def check(self, sizes):
        """InputError unless this measurement fits a schema of column ``sizes``."""
        if self.cols[0] < 0 or self.cols[-1] >= len(sizes):
            bad = self.cols[0] if self.cols[0] < 0 else self.cols[-1]
            raise InputError("a measurement names column %d of a %d-column schema" % (bad, len(sizes)))
        cells = math.prod(sizes[c] for c in self.cols)
        if len(self.groups) != cells:
            raise InputError("a measurement on columns %r has %d cells, the schema gives %d"
                             % (self.cols, len(self.groups), cells))

    def group_sums(self, table):
        """The group totals of a marginal ``table`` (any shape with this
        measurement's cells, C order): what ``y`` estimates without noise."""
        return np.bincount(self.groups, weights=np.ravel(table), minlength=len(self.y))

    def __repr__(self):
        return "Measurement(cols=%r, cells=%d, groups=%d, var=%g)" % (
            self.cols, len(self.groups), len(self.y), self.var)
