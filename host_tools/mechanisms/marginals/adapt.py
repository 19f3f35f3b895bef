"""Plan the next window of a marginals stream from the model fitted to the
windows released so far (docs/mechanisms/marginals.md, Planner, "Adaptive
windows"). Everything here reads the Model only: it is post-processing of
released frames and costs no privacy; the data are never read.

The rule, for d >= 3 columns:

1. Score every 3-way marginal t by the model's total correlation
   TC(t) = KL(p_t || p_a p_b p_c) (nats): how far the model's own 3-way
   table is from independence. A 3-way table built from pairwise information
   alone misses the interaction term, and that term can only carry mass where
   the columns depend on each other: the most dependent triples are where the
   next window's 3-way counts can correct the most (a triple of nearly
   independent columns is already described by its 1-way marginals).
2. Choose triples greedily until every pair of columns lies in a chosen
   triple: first the triple covering the most pairs not yet covered, ties
   by TC. Every 2-way marginal is then still measured (as a sum of 3-way
   cells), so the windows keep sharpening all pairs while adding 3-way
   information; for d = 7 that is 7 to 9 triples where the 21 pairs alone
   were 21 marginals. A triple above the device's cells per marginal is
   replaced by its uncovered pairs; a pair above them too is left out (no
   device measures it), and a column then in no chosen marginal gets its
   1-way marginal.
3. Partition each chosen marginal from the model (PPSyn's public
   partitions): with n_next the expected records of one window (from a
   generator: the plan whose windows began last, by first epoch, its
   estimated records over its number of windows; from a Model alone, the
   mean of its per-plan totals) and
   s the marginal's noise sd under the budget split of the ungrouped plan
   (times sqrt of the frames one window sums: each device adds its noise),
   a cell whose expected count n_next * p(cell) is at least s keeps its own
   total; the others are sorted by expected count and merged, in that order,
   into groups of expected total at least s (a short last group joins the
   one before). The paper's error model (section 2.1): a group's error is its
   total's noise plus the spread of the cells inside it; cells below the
   noise would be measured as mostly noise one by one, while a group of
   similar small cells has one noise draw and a small spread (the fit
   spreads a group total by the model's own shape, not uniformly).
4. If the config does not fit ``ram`` (or the device's limits), the lowest
   TC triple is replaced by its pairs, repeatedly; the last resort is every
   1-way marginal.

For d < 3 the next window measures the marginal of all d columns (their
1-way marginals when it is beyond a device's cells).
"""
import math
from itertools import combinations

import numpy as np

from edgesynth.agent.marginals.build import MAX_CELLS
from edgesynth.errors import InputError
from edgesynth.mechanisms.marginals.model import clique_sums
from edgesynth.mechanisms.marginals.plan import plan_marginals
from edgesynth.noise import dlap_variance


def total_correlation(model, cliques):
    """{clique: KL(model's marginal on it || product of its 1-way marginals)}
    in nats, >= 0, for sorted column tuples ``cliques``."""
    sizes = model.sizes
    joint = model.joint()
    axes = tuple(range(len(sizes)))
    tables = clique_sums(joint, axes, sorted(set(cliques) | {(i,) for i in axes}), sizes)
    out = {}
    for c in cliques:
        p = tables[c]
        indep = np.ones(p.shape)
        for k, i in enumerate(c):
            indep = indep * tables[(i,)].reshape([-1 if j == k else 1 for j in range(len(c))])
        mask = p > 0
        out[c] = max(float(np.sum(p[mask] * np.log(p[mask] / indep[mask]))), 0.0)  # >= 0 up to rounding
    return out


def choose_marginals(model):
    """The next window's marginals (sorted column tuples, rule steps 1-2) and
    their TC scores."""
    sizes = model.sizes
    d = len(sizes)
    if d < 3:
        whole = tuple(range(d))
        return [whole] if _fits(sizes, whole) else [(i,) for i in whole], {whole: 0.0}
    triples = [t for t in combinations(range(d), 3) if _fits(sizes, t)]
    score = total_correlation(model, triples)
    uncovered = set(combinations(range(d), 2))
    chosen = []
    while uncovered:
        best = max(triples, key=lambda t: (len(uncovered & set(combinations(t, 2))), score[t], [-i for i in t]))
        if not uncovered & set(combinations(best, 2)):
            break
        chosen.append(best)
        uncovered -= set(combinations(best, 2))
    chosen += sorted(p for p in uncovered if _fits(sizes, p))  # pairs no device-sized triple covers
    seen = {i for c in chosen for i in c}
    chosen += [(i,) for i in range(d) if i not in seen]  # a column whose every pair is beyond a device
    return chosen, score


def _fits(sizes, cols):
    """Whether a device holds the marginal on ``cols`` (at most MAX_CELLS cells)."""
    return math.prod(sizes[i] for i in cols) <= MAX_CELLS


def partition(p, n, sd):
    """Public group ids (list, C order) of a marginal with model probabilities
    ``p`` (array), ``n`` expected records and noise sd ``sd`` (rule step 3),
    or None when every cell keeps its own total."""
    e = n * np.ravel(p)
    small = np.flatnonzero(e < sd)
    if len(small) < 2:
        return None
    lab = np.full(len(e), -1, dtype=np.int64)
    big = np.flatnonzero(e >= sd)
    lab[big] = np.arange(len(big))
    gid, acc, opened = len(big), 0.0, False
    for i in small[np.argsort(e[small], kind="stable")]:
        lab[i] = gid
        acc += e[i]
        opened = True
        if acc >= sd:
            gid, acc, opened = gid + 1, 0.0, False
    if opened and gid > len(big):  # a short last group joins the one before
        lab[lab == gid] = gid - 1
    return [int(v) for v in lab]


def _plan(model, schema, eps, ram, runtime, relation, cols, n, frames):
    """plan_marginals for ``cols`` with the model's partitions for ``n``
    expected records (rule step 3)."""
    mech = plan_marginals(schema, eps, None, runtime, relation, marginals=cols)["mechanisms"][0]
    factor = 2 if relation == "replace" else 1
    axes = tuple(range(len(model.sizes)))
    tables = clique_sums(model.joint(), axes, cols, model.sizes)
    parts = {}
    for c, sig in zip(cols, mech["sigma"]):
        lab = partition(tables[c], n, math.sqrt(frames * dlap_variance(factor * mech["q"], sig)))
        if lab is not None:
            parts[c] = lab
    return plan_marginals(schema, eps, ram, runtime, relation, marginals=cols, partitions=parts)


def plan_from_model(model, schema, eps, ram=None, runtime="c", relation="add-remove", n_next=None,
                    frames_next=1.0):
    """Device config (JSON-ready dict, as plan_marginals gives) for the next
    window of a stream whose earlier windows ``model`` (a fitted Model over
    ``schema``'s columns) was fitted to: the marginals and public partitions
    of the module's rule, at ``eps`` (a Fraction), fitting ``ram`` bytes
    (optional) on ``runtime``. ``n_next``: the next window's expected
    records (a generator's next_window_records: the latest plan's records
    per window); None: the mean of the model's per-plan totals.
    ``frames_next`` (>= 1): the frames (devices) one window sums, each with
    its own noise (a generator's next_window_frames), so the noise sd s of
    the rule is sqrt(frames_next) times one frame's. A function of its
    inputs alone: the same inputs give the same config.
    InputError, in one line, when even the 1-way marginals do not fit."""
    if tuple(model.sizes) != tuple(schema.sizes):
        raise InputError("the model's columns (%s) are not the schema's (%s)"
                         % ("x".join(map(str, model.sizes)), "x".join(map(str, schema.sizes))))
    n = model.total / len(model.totals) if n_next is None else float(n_next)
    cols, score = choose_marginals(model)
    while True:
        try:
            return _plan(model, schema, eps, ram, runtime, relation, cols, n, frames_next)
        except InputError:
            triples = [c for c in cols if len(c) == 3]
            if not triples:
                break
            worst = min(triples, key=lambda t: (score[t], t))
            rest = [c for c in cols if c != worst]
            cols = rest + [p for p in combinations(worst, 2) if p not in rest]
    return _plan(model, schema, eps, ram, runtime, relation, [(i,) for i in range(len(schema.sizes))], n,
                 frames_next)
