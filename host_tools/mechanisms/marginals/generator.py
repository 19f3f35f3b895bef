"""Marginals generator: the graphical model fitted to merged marginals
states, its saved file, and synthetic tables with the schema's values
(docs/mechanisms/marginals.md, Host algorithms). Post-processing: fitting,
saving and sampling cost no privacy.

The file holds the public schema and the fitted model's log-probabilities
(float64, one per joint cell, at most MAX_CELLS: 32 MiB): the smallest form
that gives identical samples everywhere. The measurements are smaller but
would be refitted at every load, and a refit is bit-identical only with
the same numpy build.
"""
import math
from fractions import Fraction

import msgpack
import numpy as np

from edgesynth.errors import InputError, MergeError
from edgesynth.genfile import read_file_map
from edgesynth.mechanisms.marginals.drift import limit, statistics
from edgesynth.mechanisms.marginals.model import MAX_CELLS, Model, fit, to_table
from edgesynth.mechanisms.marginals.schema import Schema
from edgesynth.merge import MAX_PLANS, merge_releases, refuse_force_sum
from edgesynth.ram import require_host_memory

FORMAT = 1
FILE_KIND = "edgesynth-marginals-generator"
FILE_KEYS = {"fmt", "kind", "schema", "log_p", "total", "loss", "iters", "meta"}
FIT_ITERS = 500
# Host bytes per joint cell: fitting holds a few float64 joints, sampling a
# few more (measured at 2**22 cells: fit +130 MiB, sample +226 MiB).
BYTES_PER_CELL = 64
MAX_TOTAL = 2.0 ** 53  # records a model may claim: round(total) stays exact
# Plans a drift mixture fits one by one (one full fit each, on top of the
# joint fit); with more, the joint fit is kept and meta["fit"] says why.
MAX_MIXED = 8


def fit_need(sizes):
    """Host bytes to fit or sample a model over columns of domain ``sizes``."""
    return BYTES_PER_CELL * math.prod(sizes)


def _what(sizes):
    return "the marginals model over %s = %d cells" % ("x".join(map(str, sizes)), math.prod(sizes))


class MarginalsGenerator:
    """A fitted model over the columns of a public ``schema`` (Schema), with
    ``meta`` (JSON-ready provenance). Samples records as cell indices
    (``sample``) or as a table with the schema's values (``table``)."""

    def __init__(self, schema, model, meta):
        if tuple(schema.sizes) != tuple(model.sizes):
            raise InputError("the model's domain %s is not the schema's %s" % (model.sizes, tuple(schema.sizes)))
        self.schema = schema
        self.model = model
        self.meta = dict(meta)

    @property
    def names(self):
        return list(self.schema.names)

    @property
    def d(self):
        return len(self.schema.names)

    @property
    def integer(self):
        """Per column: True for a categorical column whose values are all integers."""
        return [all(isinstance(v, int) for v in c["values"]) if "values" in c else False
                for c in self.schema.columns]

    @property
    def drift(self):
        """Per plan (config id order): (statistic, degrees of freedom, limit)
        of the drift check (edgesynth.mechanisms.marginals.drift); empty for
        a generator saved before the check existed."""
        return [(float(p["drift"][0]), int(p["drift"][1]), limit(int(p["drift"][1])))
                for p in self.meta.get("plans", [])]

    @property
    def drifting(self):
        """True when some plan's totals lie beyond their noise from the
        model fitted to all: the stream drifts between windows, and a plan
        made from an earlier window may fit later ones badly."""
        return any(s > lim for s, _, lim in self.drift)

    def _latest_plan(self):
        """The plan whose windows began last (largest first epoch, then
        config id) in ``meta["plans"]``; InputError without well-formed plans
        (checked again: meta of a generator built in memory is not loaded)."""
        plans = self.meta.get("plans")
        try:
            _check_plans(plans, "the generator")
        except InputError:
            plans = None
        if not plans:
            raise InputError("the generator's meta.plans do not give each plan's first_epoch, windows and "
                             "estimated_records; assemble its frames again")
        return max(plans, key=lambda p: (p["first_epoch"], p["config_id"]))

    def next_window_records(self):
        """The expected records of the next window (adapt.plan_from_model's
        ``n_next``), from ``meta["plans"]`` alone (checked at load), so a
        saved generator gives what the one in memory gives: the latest
        plan's estimated records over its number of windows, at least 1."""
        last = self._latest_plan()
        return max(float(last["estimated_records"]) / last["windows"], 1.0)

    def next_window_frames(self):
        """The frames (devices) one window of the latest plan sums, its
        frames over its windows (>= 1): each adds its own noise, so a window's
        total has sqrt(that) times one frame's noise sd (plan_from_model's
        ``frames_next``)."""
        last = self._latest_plan()
        return max(last["frames"] / last["windows"], 1.0)

    def default_rows(self):
        """round(n_hat), the model's estimate of the number of records (from
        the noisy totals: post-processing), at least 1."""
        return max(1, int(round(self.model.total)))

    def sample(self, n, rng):
        """``n`` synthetic records as int64 cell indices (n, d) (model.sample)."""
        return self.model.sample(n, rng)

    def table(self, n, rng):
        """``n`` synthetic records as a pandas DataFrame with the schema's
        column names and values ("other" is a missing value)."""
        return to_table(self.schema, self.sample(n, rng), rng)

    def to_bytes(self):
        return msgpack.packb({"fmt": FORMAT, "kind": FILE_KIND, "schema": self.schema.to_json(),
                              "log_p": np.ascontiguousarray(self.model.log_p, dtype="<f8").tobytes(),
                              "total": self.model.total, "loss": self.model.loss, "iters": self.model.iters,
                              "meta": self.meta})

    @classmethod
    def from_bytes(cls, data, source="generator"):
        """The generator saved in ``data``; one-line InputError naming
        ``source`` for anything but a well-formed file of this kind."""
        m = read_file_map(data, source, FILE_KIND, FORMAT, "marginals generator")
        if set(m) != FILE_KEYS:
            raise InputError("%s: a marginals generator holds the keys %s" % (source, ", ".join(sorted(FILE_KEYS))))
        try:
            schema = Schema.from_json(m["schema"])
        except InputError as e:
            raise InputError("%s: %s" % (source, e))
        sizes = tuple(schema.sizes)
        cells = math.prod(sizes)
        if cells > MAX_CELLS:
            raise InputError("%s: the schema's joint domain has %d cells, above the %d a model holds"
                             % (source, cells, MAX_CELLS))
        raw, total, loss, iters = m["log_p"], m["total"], m["loss"], m["iters"]
        if not isinstance(raw, bytes) or len(raw) != 8 * cells:
            raise InputError("%s: log_p must be %d float64 values, one per joint cell" % (source, cells))
        if not isinstance(total, float) or not 1.0 <= total <= MAX_TOTAL:
            raise InputError("%s: total must be a number of records in [1, 2**53]" % source)
        if not isinstance(loss, float) or isinstance(iters, bool) or not isinstance(iters, int) or iters < 0:
            raise InputError("%s: loss must be a float and iters a count" % source)
        if not isinstance(m["meta"], dict):
            raise InputError("%s: meta must be a map" % source)
        _check_plans(m["meta"].get("plans", []), source)
        log_p = np.frombuffer(raw, dtype="<f8").astype(np.float64).reshape(sizes)
        if not np.all(np.isfinite(log_p)) or np.any(log_p > 0) or abs(float(np.exp(log_p).sum()) - 1.0) > 1e-6:
            raise InputError("%s: log_p is not a log-probability table (finite, summing to 1)" % source)
        return cls(schema, Model(sizes, log_p, total, loss, iters), m["meta"])

    def summary(self):
        return {"kind": FILE_KIND, "columns": self.names, "sizes": list(self.schema.sizes),
                "estimated_records": self.model.total, "fit_loss": self.model.loss, "fit_iters": self.model.iters,
                **self.meta}


def _count(v, low):
    return isinstance(v, int) and not isinstance(v, bool) and low <= v < 2 ** 63


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def _check_plans(plans, source):
    """InputError unless ``plans`` (meta.plans of a file) is what build
    writes: at most MAX_PLANS maps, each with a config id, frames >= 1,
    finite estimated records >= 0, first epoch >= 0, windows >= 1 and a
    finite drift statistic >= 0 with >= 1 degrees of freedom; the drift,
    drifting and next_window_records properties read these."""
    ok = isinstance(plans, list) and len(plans) <= MAX_PLANS
    for p in plans if ok else ():
        try:
            st, dof = p["drift"]
            ok = isinstance(p["config_id"], str) and _count(p["frames"], 1) and _number(p["estimated_records"]) \
                and _count(p["first_epoch"], 0) and _count(p["windows"], 1) and _number(st) and _count(dof, 1)
        except (KeyError, TypeError, ValueError):
            ok = False
        if not ok:
            break
    if not ok:
        raise InputError("%s: meta.plans must list at most %d plans, each with config_id, frames >= 1, "
                         "estimated_records, first_epoch, windows >= 1 and drift [statistic, dof >= 1]"
                         % (source, MAX_PLANS))


def _schema(state):
    """The state's public schema as a Schema (the frame carries it)."""
    s = state.schema
    return s if isinstance(s, Schema) else Schema.from_json(s)


def mixture(sizes, states, iters):
    """The record-weighted mixture sum_k n_k p_k / sum_k n_k of a model p_k
    fitted to each plan's ``states`` alone (n_k its estimated records): the
    distribution of the whole stream when its windows differ, since each
    plan's totals measure only the records of its own windows. Each p_k has
    only its plan's records, so a stationary stream is better served by the
    joint fit (build uses this only when the drift check fires)."""
    acc, totals, loss, done, m = None, [], 0.0, 0, None
    for s in states:
        del m  # the previous plan's joint before the next fit allocates its own
        m = fit(sizes, s.measurements(), iters=iters)
        part = math.log(m.total) + m.log_p  # finite: a fitted log_p is, and n_k >= 1
        acc = part if acc is None else np.logaddexp(acc, part, out=acc)
        totals.append(m.total)
        loss, done = loss + m.loss, done + m.iters
    total = sum(totals)
    acc -= math.log(total)
    return Model(sizes, acc, total, loss, done, totals)


def assemble_marginals(releases, force_sum=False, iters=FIT_ITERS):
    """Marginals generator of the merged marginals states of ``releases``
    (one summed state per plan, fitted together)."""
    return build(*merge_releases(releases, "marginals"), force_sum=force_sum, iters=iters)


def build(merges, states, force_sum=False, iters=FIT_ITERS):
    """Fit one model to the marginals ``states`` of the frames ``merges``
    (edgesynth.merge.Merges) folded in: one summed state per plan (config),
    in config id order, as the merge gives them. Each plan's frames are
    their own window (the records of one plan are disjoint from another's):
    its totals predict its own record count n_k times the model's
    marginals (model.fit ``windows``). ``meta["plans"]`` describes each plan
    with its drift statistic (drift.statistics). When some plan's statistic
    is above its limit, one distribution cannot describe every window: the
    model is then the record-weighted mixture of each plan's own fit
    (``mixture``; ``meta["fit"]`` says which). MergeError when the plans
    differ in schema or neighbouring relation."""
    refuse_force_sum(force_sum, "marginals")
    schema = _schema(states[0])
    ids = [s.config_id() for s in states]
    for s, cid in zip(states[1:], ids[1:]):
        if _schema(s).to_json() != schema.to_json() or s.factor != states[0].factor:
            raise MergeError("marginals plans %s and %s differ in %s: their windows cannot be fitted together"
                             % (ids[0], cid, "schema" if s.factor == states[0].factor else "neighbouring relation"))
    cells = math.prod(schema.sizes)
    if cells > MAX_CELLS:  # before the memory check, so the message names the limit that binds
        raise InputError("the schema's joint domain has %d cells, the host model holds %d; plan with fewer "
                         "columns or bins" % (cells, MAX_CELLS))
    require_host_memory(fit_need(schema.sizes), "fitting " + _what(schema.sizes))
    sizes = schema.sizes
    ms, windows = [], []
    for k, s in enumerate(states):
        new = s.measurements()
        ms += new
        windows += [k] * len(new)
    model = fit(schema.sizes, ms, iters=iters, windows=windows)
    stats = statistics(model, ms, windows)
    spans = merges.by_kind["marginals"].plan_windows()
    fit_note = "one distribution for all plans"
    if any(st > limit(dof) for st, dof in stats) and len(states) > 1:
        partial = [cid for s, cid in zip(states, ids) if {i for c in s.cols for i in c} != set(range(len(sizes)))]
        if partial:  # its own fit would be uniform on the columns it did not measure
            fit_note += " (the windows drift, but plan %s does not measure every column)" % partial[0]
        elif len(states) > MAX_MIXED:
            fit_note += " (the windows drift, but %d plans are more than the %d a mixture fits)" \
                % (len(states), MAX_MIXED)
        else:
            del model  # one joint at a time: the mixture's accumulator and one plan's fit
            model = mixture(sizes, states, iters)
            fit_note = "mixture of the plans' own fits (the windows drift)"
    marginals = []
    for s in states:
        marginals += [[schema.names[i] for i in c] for c in s.cols if [schema.names[i] for i in c] not in marginals]
    meta = {
        "mechanism": "marginals",
        "epsilon": str(Fraction(merges.eps[0], merges.eps[1])),
        "mechanism_epsilon": str(max(Fraction(*s.budget) for s in states)),  # each record is in one plan's frames
        "relation": merges.relation,
        "privacy_unit": "one record (event-level)",
        "devices": merges.sorted_devices(),
        "frames": merges.frames,
        "config_id": "+".join(ids),
        "marginals": marginals,
        "partitioned": int(sum(sum(s.grouped) for s in states)),
        "fit": fit_note,
        "plans": [{"config_id": cid, "frames": s.frames, "estimated_records": n,
                   "first_epoch": first, "windows": nwin,
                   "marginals": [[schema.names[i] for i in c] for c in s.cols],
                   "partitioned": int(sum(s.grouped)), "mechanism_epsilon": str(Fraction(*s.budget)),
                   "noise_sd": np.sqrt(s.var).tolist(), "drift": [stat, dof]}
                  for s, cid, n, (stat, dof), (first, nwin) in zip(states, ids, model.totals, stats, spans)],
    }
    return MarginalsGenerator(schema, model, meta)
