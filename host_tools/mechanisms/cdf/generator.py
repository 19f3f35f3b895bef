"""CDF generator: per-channel private CDFs from merged tree releases.

assemble: GLS on each channel's tree, then PAVA on the cumulative counts
(host_tools/mechanisms/cdf/estimate.py). The generator samples each channel from its CDF
(a bin with probability F_j - F_{j-1}, then uniformly inside it, or a
uniform integer of it on an integer channel), channels independently: the
mechanism releases marginals only. Post-processing: any number of samples
is free.
"""
from fractions import Fraction

import msgpack
import numpy as np

from edgesynth.errors import InputError
from edgesynth.genfile import read_file_map
from edgesynth.mechanisms.cdf.estimate import cdf_from_leaves, cdf_what, gls_leaves, gls_need, quantiles
from edgesynth.mechanisms.integers import cell_integers, check_flags, draw
from edgesynth.merge import merge_releases, refuse_force_sum
from edgesynth.ram import require_host_memory

FORMAT = 1
FILE_KIND = "edgesynth-cdf-generator"
QUANTILES = (0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99)


class CDFGenerator:
    """``F`` (d, K) monotone CDF values at the bin right edges of [lo, hi);
    ``integer`` one bool per channel (None: none), whose channels get
    whole-number values."""

    def __init__(self, names, lo, hi, F, meta, integer=None):
        self.names = list(names)
        self.lo = np.asarray(lo, dtype=np.float64)
        self.hi = np.asarray(hi, dtype=np.float64)
        self.F = np.asarray(F, dtype=np.float64)
        self.meta = dict(meta)
        self.K = self.F.shape[1]
        self.prob = np.diff(self.F, axis=1, prepend=0.0)
        self.prob = np.maximum(self.prob, 0.0)
        self.prob /= self.prob.sum(axis=1, keepdims=True)
        self.integer = check_flags(integer, self.names, self.lo, self.hi, "generator")
        self._cells = {c: cell_integers(np.arange(self.K), self.K, self.lo[c], self.hi[c])
                       for c in range(self.d) if self.integer[c]}

    @property
    def d(self):
        return len(self.names)

    def sample(self, n, rng):
        """``n`` synthetic rows, shape (n, d), from numpy Generator ``rng``."""
        out = np.empty((n, self.d))
        w = (self.hi - self.lo) / self.K
        for c in range(self.d):
            j = rng.choice(self.K, size=n, p=self.prob[c])
            u = rng.random(n)
            if c in self._cells:
                first, count = self._cells[c]
                out[:, c] = draw(first[j], count[j], u)
                continue
            x = self.lo[c] + (j + u) * w[c]
            # keep bins half-open despite rounding in lo + (j + u) * w
            out[:, c] = np.minimum(x, np.nextafter(self.lo[c] + (j + 1) * w[c], -np.inf))
        return out

    def quantiles(self, qs=QUANTILES):
        """(d, len(qs)) quantiles."""
        return np.array([quantiles(self.F[c], self.lo[c], self.hi[c], qs) for c in range(self.d)])

    def to_bytes(self):
        return msgpack.packb({"fmt": FORMAT, "kind": FILE_KIND, "names": self.names, "lo": self.lo.tolist(),
                              "hi": self.hi.tolist(), "bins": self.K, "integer": self.integer,
                              "cdf": self.F.astype("<f8").tobytes(), "meta": self.meta})

    @classmethod
    def from_bytes(cls, data, source="generator"):
        m = read_file_map(data, source, FILE_KIND, FORMAT, "CDF generator")
        try:
            d, K = len(m["names"]), int(m["bins"])
            F = np.frombuffer(m["cdf"], "<f8").reshape(d, K).copy()
            lo, hi = np.array(m["lo"], float), np.array(m["hi"], float)
        except (KeyError, TypeError, ValueError) as e:
            raise InputError("%s: malformed CDF generator (%s)" % (source, e))
        if lo.shape != (d,) or hi.shape != (d,) or not np.all(lo < hi) or not np.all(np.isfinite(F)) \
                or np.any(np.diff(F, axis=1) < 0) or np.any(F[:, -1] != 1.0) or np.any(F < 0):
            raise InputError("%s: CDF generator arrays are inconsistent" % source)
        # files written before integer channels existed carry no flags: all real-valued
        return cls(m["names"], lo, hi, F, m.get("meta", {}), check_flags(m.get("integer"), m["names"], lo, hi, source))

    def summary(self):
        """JSON-ready: quantiles (one channel: numbers; several: a list per q)."""
        Q = self.quantiles()
        keys = [repr(q) for q in QUANTILES]
        if self.d == 1:
            quant = {k: float(Q[0, i]) for i, k in enumerate(keys)}
        else:
            quant = {k: Q[:, i].tolist() for i, k in enumerate(keys)}
        return {"kind": FILE_KIND, "channels": self.names, "lo": self.lo.tolist(), "hi": self.hi.tolist(),
                "integer": [n for n, f in zip(self.names, self.integer) if f], "bins": self.K, "quantiles": quant,
                **self.meta}


def assemble_cdf(releases, force_sum=False):
    """CDF generator for the merged CDF state of ``releases`` (``force_sum``:
    profile only); its integer channels are those the frames state
    (integer bounds)."""
    return build(*merge_releases(releases, "cdf"), force_sum=force_sum)


def build(merges, state, force_sum=False):
    """CDF generator for the summed CDF ``state`` of the frames ``merges``
    (edgesynth.merge.Merges) folded in."""
    refuse_force_sum(force_sum, "cdf")
    require_host_memory(gls_need(state.K, state.branching, state.d),
                        "assembling " + cdf_what(state.K, state.branching, state.d))
    F, totals = [], []
    for c in range(state.d):
        x = gls_leaves(state.levels[c], state.var, state.K, state.branching)
        Fc, total = cdf_from_leaves(x)
        F.append(Fc)
        totals.append(total)
    meta = {
        "mechanism": "cdf",
        "epsilon": str(Fraction(merges.eps[0], merges.eps[1])),
        "mechanism_epsilon": str(Fraction(*state.budget)),
        "relation": merges.relation,
        "privacy_unit": "one reading (event-level)",
        "devices": merges.sorted_devices(),
        "frames": merges.frames,
        "config_id": state.config_id(),
        "branching": state.branching,
        "noise_sd_per_level": np.sqrt(state.var).tolist(),
        "estimated_readings": totals,
    }
    return CDFGenerator(state.names, state.lo, state.hi, np.array(F), meta, state.integer)
