"""Host view of a marginals state: strict schema check of the decoded map, the
Measurements it carries, merge (docs/mechanisms/marginals.md, "Wire map").

The map carries the public schema (names, domains), so a frame is
self-describing: the host writes categorical values back from it alone.
"""
import hashlib
import math

import numpy as np

from edgesynth.agent.marginals.build import MAX_CELLS, MAX_COUNTERS, MAX_MARGINALS, MAX_VALUES, MAX_WAY
from edgesynth.agent.spec import MAX_CHANNELS, MAX_Q
from edgesynth.errors import InputError, SchemaError
from edgesynth.mechanisms.marginals.measure import Measurement
from edgesynth.mechanisms.marginals.schema import Schema
from edgesynth.noise import check_scale, dlap_variance

KIND = "marginals"
KEYS = ("budget", "cols", "groups", "kind", "q", "schema", "sigma", "totals")
# Objects inside the largest legal schema map: its key and columns array; 9 per
# binned column (map, 3 keys, name, bins, bounds array and its 2 numbers), 5
# per categorical one (map, 2 keys, name, values array) plus its values. A
# column holds at most MAX_SIZE - 1 values, so MAX_VALUES of them take two
# categorical columns, the other MAX_CHANNELS - 2 binned.
SCHEMA_OBJECTS = 2 + 9 * (MAX_CHANNELS - 2) + 2 * 5 + MAX_VALUES
# Objects of the largest legal map (frames.MAX_OBJECTS): the map, its keys and
# values, budget's pair, MAX_MARGINALS column arrays of up to MAX_WAY indices,
# one groups entry and one sigma per marginal, the schema's contents.
MAX_OBJECTS = 1 + 2 * len(KEYS) + 2 + MAX_MARGINALS * (1 + MAX_WAY) + 2 * MAX_MARGINALS + SCHEMA_OBJECTS


def _is_int(x, lo, hi):
    return isinstance(x, int) and not isinstance(x, bool) and lo <= x <= hi


class MarginalsState:
    """Decoded marginals. ``schema`` (Schema), its ``names`` and ``sizes``
    (cells per column, "other" included), ``cols`` (tuple per marginal), ``groups`` (int32 cell -> group
    array per marginal, arange when ungrouped), ``grouped`` (bool per
    marginal: the frame carried a partition), ``totals`` (float64 noisy
    group totals per marginal), ``q``, ``sigma`` (marginal w spends
    sigma[w] / q of epsilon), ``factor``, ``var`` (float64 noise variance of
    one group total per marginal; adds on merge), ``frames``. ``plans``:
    states of different configs (windows planned differently) are merged
    one sum per config and fitted together (edgesynth.merge)."""

    kind = KIND
    plans = True

    @classmethod
    def from_payload(cls, m, factor):
        """The state of the decoded map ``m`` of a device whose neighbouring
        relation scales noise by ``factor``; SchemaError naming the field."""
        if not isinstance(m, dict) or sorted(m) != list(KEYS):
            raise SchemaError("marginals keys %s differ from %s" % (sorted(m) if isinstance(m, dict) else m,
                                                                    list(KEYS)))
        if m["kind"] != KIND:
            raise SchemaError("marginals.kind must be %r" % KIND)
        s = cls()
        try:
            s.schema = Schema.from_json(m["schema"])
        except InputError as e:
            raise SchemaError("marginals.schema: %s" % e) from None
        sizes = s.schema.sizes
        d = len(sizes)
        cols = m["cols"]
        if not isinstance(cols, list) or not 1 <= len(cols) <= MAX_MARGINALS:
            raise SchemaError("marginals.cols must list 1..%d marginals" % MAX_MARGINALS)
        s.cols = []
        for w, c in enumerate(cols):
            if not isinstance(c, list) or not 1 <= len(c) <= MAX_WAY or \
                    not all(_is_int(i, 0, d - 1) for i in c) or c != sorted(set(c)):
                raise SchemaError("marginals.cols[%d] must list 1..%d increasing column indices below %d"
                                  % (w, MAX_WAY, d))
            if tuple(c) in s.cols:
                raise SchemaError("marginals.cols[%d] repeats a marginal" % w)
            if math.prod(sizes[i] for i in c) > MAX_CELLS:
                raise SchemaError("marginals.cols[%d] has more than %d cells" % (w, MAX_CELLS))
            s.cols.append(tuple(c))
        n = len(s.cols)
        q = m["q"]
        if not _is_int(q, 1, MAX_Q):
            raise SchemaError("marginals.q must be an integer in [1, 2**48]")
        sigma = m["sigma"]
        if not isinstance(sigma, list) or len(sigma) != n or not all(_is_int(p, 1, MAX_Q) for p in sigma):
            raise SchemaError("marginals.sigma must list %d integers in [1, 2**48]" % n)
        if m["budget"] != [sum(sigma), q]:
            raise SchemaError("marginals.budget does not equal [sum(sigma), q]")
        for w, p in enumerate(sigma):
            check_scale("marginals marginal %d", factor * q, p, w)
        groups = m["groups"]
        if not isinstance(groups, list) or len(groups) != n:
            raise SchemaError("marginals.groups must list %d entries (nil or a bin)" % n)
        s.groups, s.grouped, ngroups = [], [], []
        for w, g in enumerate(groups):
            cells = math.prod(sizes[i] for i in s.cols[w])
            if g is None:  # the identity map, built below once the totals bound the size
                s.groups.append(None)
                s.grouped.append(False)
                ngroups.append(cells)
                continue
            if not isinstance(g, bytes) or len(g) != 2 * cells:
                raise SchemaError("marginals.groups[%d] must be nil or a bin of %d bytes" % (w, 2 * cells))
            lab = np.frombuffer(g, dtype="<u2").astype(np.int32)
            G = int(lab.max()) + 1
            if np.bincount(lab, minlength=G).min() == 0:
                raise SchemaError("marginals.groups[%d]: group ids must run over 0..%d, each used" % (w, G - 1))
            s.groups.append(lab)
            s.grouped.append(True)
            ngroups.append(G)
        total = sum(ngroups)
        if total > MAX_COUNTERS:
            raise SchemaError("marginals state claims more than %d group totals" % MAX_COUNTERS)
        b = m["totals"]
        if not isinstance(b, bytes) or len(b) != 4 * total:
            raise SchemaError("marginals.totals must be a bin of %d bytes" % (4 * total))
        # the nil groups' identity maps only now (their sizes are bounded by the totals' bytes), one
        # read-only arange per size shared by the marginals of that many cells: the frame's bound
        ident = {c: np.arange(c, dtype=np.int32) for c, g in zip(ngroups, s.groups) if g is None}
        for a in ident.values():
            a.setflags(write=False)
        s.groups = [ident[ngroups[w]] if g is None else g for w, g in enumerate(s.groups)]
        flat = np.frombuffer(b, dtype="<i4").astype(np.float64)
        cuts = np.cumsum([0] + ngroups)
        s.totals = [flat[cuts[w]:cuts[w + 1]] for w in range(n)]  # views: the frame's bound (docs/wire-format.md)
        s.names, s.sizes, s.q, s.sigma, s.factor = list(s.schema.names), list(sizes), q, list(sigma), factor
        s.budget = (sum(sigma), q)
        s.var = np.array([dlap_variance(factor * q, p) for p in sigma])
        s.frames = 1
        return s

    def measurements(self):
        """One Measurement per marginal (the M2 model's input)."""
        return [Measurement(c, g, y, v) for c, g, y, v in zip(self.cols, self.groups, self.totals, self.var)]

    def same_config(self, other):
        """True when ``other`` was released under the same public config
        (then the two merge)."""
        return (self.schema.to_json(), self.cols, self.q, self.sigma, self.factor) == \
            (other.schema.to_json(), other.cols, other.q, other.sigma, other.factor) and \
            all(np.array_equal(a, b) for a, b in zip(self.groups, other.groups))

    def config_id(self):
        """Hex digest of every public parameter (schema, marginals, partitions,
        budget split, relation); equal ids merge (edgesynth.merge)."""
        h = hashlib.sha256()
        for part in ("marginals", self.schema.to_json(), self.cols, self.q, self.sigma, self.factor):
            h.update(repr(part).encode())
        for g, grouped in zip(self.groups, self.grouped):
            h.update(g.astype("<i4").tobytes() if grouped else b"nil")
        return h.hexdigest()[:16]

    def copy(self):
        """A state whose totals can be added into without touching this one's."""
        out = MarginalsState()
        out.__dict__.update(self.__dict__)
        out.totals = [t.copy() for t in self.totals]
        out.var = self.var.copy()
        return out

    def accumulate(self, other):
        """Add the totals of ``other`` (the same config, over disjoint
        records: parallel composition) into this state, in place; the
        noise variances add."""
        if not self.same_config(other):
            raise SchemaError("marginals states of different configs do not merge")
        for a, b in zip(self.totals, other.totals):
            a += b
        self.var = self.var + other.var
        self.frames += other.frames
