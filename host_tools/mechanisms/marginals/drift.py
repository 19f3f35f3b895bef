"""The drift check of marginals windows fitted together: how far each plan's
noisy totals lie from the one distribution fitted to all of them, against
their noise (docs/mechanisms/marginals.md, "Windows of several plans").
Post-processing of the fitted model and the released totals: no privacy cost.

Plan k's statistic is the sum over its measurements m and their groups g of

    (n_k mu_m(g) - y_m(g))^2 / (var_m + max(n_k mu_m(g), 0))

where n_k is the plan's fitted record count, mu_m(g) the model's probability
of group g and y_m(g) the released total. The denominator is the total's
noise variance plus the spread a window's count of a stationary stream has
around n_k mu (multinomial, at most the Poisson n_k mu): windows are samples,
so with many records their counts differ by more than the device's noise
alone. For a stationary stream the statistic is at most about chi-square
with as many degrees of freedom as totals (fewer in fact: the fit used them);
a stream whose distribution moves between windows cannot be fitted by one
distribution, and the statistic of some plan grows with the records.
"""
import math

import numpy as np

from edgesynth.mechanisms.marginals.model import clique_sums

# A plan is flagged above dof + SDS * sqrt(2 dof): chi-square's mean plus 6 of
# its sds. A heuristic, not an exact test: overlapping marginals' totals share
# records, so their terms are correlated and the variance exceeds 2 dof.
SDS = 6


def statistics(model, measurements, windows):
    """[(statistic, degrees of freedom), ...] per window id in sorted order
    (the order of model.totals) for the ``measurements`` of a Model fitted
    with ``windows`` (one id per measurement)."""
    ids = sorted(set(windows))
    sizes = model.sizes
    axes = tuple(range(len(sizes)))
    tables = clique_sums(model.joint(), axes, sorted({m.cols for m in measurements}), sizes)
    stat, dof = [0.0] * len(ids), [0] * len(ids)
    for m, w in zip(measurements, windows):
        k = ids.index(w)
        pred = model.totals[k] * m.group_sums(tables[m.cols])
        r = pred - m.y
        stat[k] += float(np.sum(r * r / (m.var + np.maximum(pred, 0.0))))
        dof[k] += len(m.y)
    return list(zip(stat, dof))


def limit(dof):
    """The statistic above which a plan's windows disagree with the others
    beyond their noise: dof + SDS * sqrt(2 dof) (heuristic: see SDS)."""
    return dof + SDS * math.sqrt(2 * dof)

