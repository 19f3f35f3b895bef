"""The synthetic-data generator: leaf boxes with masses, saved as msgpack.

Sampling picks a leaf with probability mass/total, then a point uniformly in
its half-open box: the vectorised form of the PrivHP paper's tree walk (§6),
which subtracts the left child's count when it branches right. On an integer
channel the point is a uniform integer of the box instead (integers.py).
It is post-processing of a private release, so any number of samples is free.

A joined generator (join.py) also carries the cdf mechanism's per-channel
CDFs of the same channels: its leaf masses are raked to them and its real
channels are drawn inside a leaf by the CDF's shape; post-processing of the
two releases.
"""
import math
from fractions import Fraction

import msgpack
import numpy as np

from edgesynth.agent.cdf.build import MAX_BINS
from edgesynth.errors import InputError
from edgesynth.genfile import read_file_map
from edgesynth.mechanisms.integers import cell_integers, check_flags, draw
from edgesynth.mechanisms.privhp.growth import (
    Leaves,
    generator_need,
    grow,
    leaf_boxes,
    leaf_cells,
    leaf_count,
    privhp_host_need,
)
from edgesynth.mechanisms.privhp.join import RAKE_ROUNDS, InLeaf, Shape, check_cdf, join_need, rake
from edgesynth.mechanisms.privhp.wire import MAX_CHANNELS
from edgesynth.merge import merge_releases, refuse_force_sum
from edgesynth.ram import require_host_memory

FORMAT = 1
FILE_KIND = "edgesynth-generator"
SAMPLE_BLOCK = 1 << 20  # points per block: bounds memory for any n


class Generator:
    """Piecewise-uniform distribution over leaf boxes.

    ``names`` channel names; ``lo``/``hi`` the public box; ``leaves`` a
    growth.Leaves; ``meta`` JSON-ready provenance (epsilon, devices, frames,
    noise variances); ``integer`` one bool per channel (None: none), whose
    channels get whole-number values; ``cdf`` None, or the joined CDFs, a
    (d, K) array of each channel's CDF at the right edges of K equal bins of
    [lo, hi) (join.py: the leaf masses are raked to them and the real
    channels drawn by their shape inside a leaf).
    """

    def __init__(self, names, lo, hi, leaves, meta, integer=None, cdf=None):
        self.names = list(names)
        self.lo = np.asarray(lo, dtype=np.float64)
        self.hi = np.asarray(hi, dtype=np.float64)
        self.leaves = leaves
        self.meta = dict(meta)
        self.integer = check_flags(integer, self.names, self.lo, self.hi, "generator")
        q, bits = leaf_cells(leaves, len(self.names))
        self._int_cols = [c for c in range(self.d) if self.integer[c]]
        cells = [cell_integers(q[:, c], 1 << bits[:, c], self.lo[c], self.hi[c]) for c in self._int_cols]
        self._int_first = np.stack([f for f, _ in cells], axis=1) if cells else None
        self._int_count = np.stack([n for _, n in cells], axis=1) if cells else None
        self.box_lo, self.box_hi = leaf_boxes(q, bits, self.lo, self.hi)
        del q, bits, cells
        self.cdf = None if cdf is None else np.asarray(cdf, np.float64)
        shapes = {} if cdf is None else {c: Shape(self.cdf[c], self.lo[c], self.hi[c])
                                         for c in range(self.d) if not self.integer[c]}
        # a leaf of level l holds 2**-l of the box's volume, exact whatever the bounds (the volume in data
        # units overflows or underflows: +-1e300, or tiny spans over many channels)
        vol = np.exp2(-leaves.level)
        mass = rake(self.box_lo, self.box_hi, leaves.mass, shapes, vol) if shapes else np.maximum(leaves.mass, 0.0)
        self._in_leaf = InLeaf(self.box_lo, self.box_hi, shapes) if shapes else None
        total = mass.sum()
        if not total > 0:
            mass = vol  # no signal: uniform on the box
            total = mass.sum()
        self.prob = mass / total
        self._leaf = np.arange(self.prob.size)
        # per leaf: width, low corner, largest value below the high corner; one
        # array so that a block takes all three in one np.take (5x faster than
        # three fancy-indexed gathers, which dominated sampling)
        self._cell = np.stack([self.box_hi - self.box_lo, self.box_lo, np.nextafter(self.box_hi, -np.inf)], axis=1)

    @property
    def d(self):
        return len(self.names)

    def sample(self, n, rng):
        """``n`` synthetic points, shape (n, d), from numpy Generator ``rng``.

        Per block: multinomial leaf counts, each leaf index repeated that many
        times and the sequence shuffled (a uniformly shuffled multinomial
        sequence is an i.i.d. categorical one, so rows are exchangeable), then
        a uniform point in each leaf's half-open box (on an integer channel,
        a uniform integer of it). Two to three times faster than inverse-CDF
        search per point (benchmarks/bench_speed.py).
        """
        out = np.empty((n, self.d))
        for start in range(0, n, SAMPLE_BLOCK):
            m = min(SAMPLE_BLOCK, n - start)
            idx = np.repeat(self._leaf, rng.multinomial(m, self.prob))
            rng.shuffle(idx)
            block = out[start:start + m]
            u = rng.random((m, self.d))
            if self._int_cols:
                ints = draw(self._int_first[idx], self._int_count[idx], u[:, self._int_cols])
            cell = np.take(self._cell, idx, axis=0)
            np.multiply(u, cell[:, 0], out=block)
            block += cell[:, 1]
            # keep cells half-open despite rounding in lo + u * width
            np.minimum(block, cell[:, 2], out=block)
            if self._in_leaf is not None:
                self._in_leaf.apply(block, idx, u, cell)
            if self._int_cols:
                block[:, self._int_cols] = ints
        return out

    def to_bytes(self):
        lv = self.leaves
        joined = {} if self.cdf is None else {"cdf_bins": int(self.cdf.shape[1]),
                                              "cdf": self.cdf.astype("<f8").tobytes()}
        return msgpack.packb({
            "fmt": FORMAT, "kind": FILE_KIND, "names": self.names,
            "lo": self.lo.tolist(), "hi": self.hi.tolist(),
            "level": lv.level.astype("<u1").tobytes(),
            "path": lv.path.astype("<u4").tobytes(),
            "mass": lv.mass.astype("<f8").tobytes(),
            "integer": self.integer,
            "meta": self.meta, **joined,
        })

    @classmethod
    def from_bytes(cls, data, source="generator"):
        m = read_file_map(data, source, FILE_KIND, FORMAT, "generator (assemble writes one)")
        try:
            d = len(m["names"])
            level = np.frombuffer(m["level"], "<u1").astype(np.int64)
            path = np.frombuffer(m["path"], "<u4").astype(np.int64)
            mass = np.frombuffer(m["mass"], "<f8").copy()
            lo, hi = np.array(m["lo"], float), np.array(m["hi"], float)
        except (KeyError, TypeError, ValueError) as e:
            raise InputError("%s: malformed generator (%s)" % (source, e))
        if not (level.size == path.size == mass.size > 0) or not 1 <= d <= MAX_CHANNELS or lo.shape != (d,) \
                or hi.shape != (d,) or not np.all(lo < hi) or np.any(level > 29) or np.any(path >> level != 0) \
                or not np.all(np.isfinite(mass)):
            raise InputError("%s: generator arrays are inconsistent" % source)
        cdf = _read_cdf(m, d, source)
        # the leaf boxes take 56 d bytes per leaf, 13 in the file: bounded before they are built
        need = generator_need(level.size, d) + (0 if cdf is None else join_need(level.size, cdf.shape[1], d))
        require_host_memory(need, "%s: loading a generator of %d leaves over %d channel(s)%s" % (
            source, level.size, d, "" if cdf is None else " joined to CDFs of %d bins" % cdf.shape[1]))
        # files written before integer channels existed carry no flags: all real-valued
        return cls(m["names"], lo, hi, Leaves(level, path, mass), m.get("meta", {}),
                   check_flags(m.get("integer"), m["names"], lo, hi, source), cdf)

    def summary(self):
        """JSON-ready description for `inspect` and `assemble --json`."""
        depth = self.leaves.level
        return {
            "kind": FILE_KIND, "channels": self.names, "lo": self.lo.tolist(), "hi": self.hi.tolist(),
            "integer": [n for n, f in zip(self.names, self.integer) if f],
            "leaves": int(depth.size), "depth_min": int(depth.min()), "depth_max": int(depth.max()),
            "noisy_total": float(max(self.leaves.mass.sum(), 0.0)),
            "smallest_cell_fraction": float(math.ldexp(1.0, -int(depth.max()))),
            **self.meta,
            **({} if self.cdf is None else {"joined_cdf": {
                "bins": int(self.cdf.shape[1]), "rake_rounds": RAKE_ROUNDS,
                "channels": [n for n, f in zip(self.names, self.integer) if not f]}}),
        }


def _read_cdf(m, d, source):
    """The joined CDFs of file map ``m`` ((d, K) float64), None when the file
    has none (a plain generator); InputError unless both keys are there, K is
    in [2, MAX_BINS], the bytes are d K float64 and check_cdf holds."""
    if "cdf" not in m and "cdf_bins" not in m:
        return None
    K, raw = m.get("cdf_bins"), m.get("cdf")
    if not isinstance(K, int) or isinstance(K, bool) or not 2 <= K <= MAX_BINS or not isinstance(raw, bytes) \
            or len(raw) != 8 * d * K:
        raise InputError("%s: the joined CDFs must be cdf_bins in [2, %d] and d * cdf_bins float64 values"
                         % (source, MAX_BINS))
    F = np.frombuffer(raw, "<f8").reshape(d, K).copy()
    if not check_cdf(F, d):
        raise InputError("%s: the joined CDFs are not CDFs (finite, non-decreasing, in [0, 1], ending at 1)" % source)
    return F


def with_cdf(gen, F, cdf_meta):
    """The joined generator: privhp generator ``gen`` with the cdf
    mechanism's CDFs ``F`` ((d, K), over the same channels and bounds) and
    that release's provenance ``cdf_meta`` (its epsilon, frames) in meta
    "joined_with"."""
    F = np.asarray(F, np.float64)
    if not check_cdf(F, gen.d):
        raise InputError("the cdf release's CDFs do not match the privhp channels")
    require_host_memory(join_need(gen.leaves.level.size, F.shape[1], gen.d),
                        "joining %d leaves to CDFs of %d bins over %d channel(s)"
                        % (gen.leaves.level.size, F.shape[1], gen.d))
    meta = dict(gen.meta)
    meta["joined_with"] = cdf_meta
    return Generator(gen.names, gen.lo, gen.hi, gen.leaves, meta, gen.integer, F)


def assemble_privhp(releases, force_sum=False):
    """Generator for the merged PrivHP state of ``releases`` (``force_sum``:
    profile only); its integer channels are those the frames state
    (integer bounds)."""
    return build(*merge_releases(releases, "privhp"), force_sum=force_sum)


def build(merges, state, force_sum=False):
    """Generator for the summed PrivHP ``state`` of the frames ``merges``
    (edgesynth.merge.Merges) folded in."""
    refuse_force_sum(force_sum, "privhp")
    require_host_memory(privhp_host_need(state.L, state.r, state.k, state.j, state.d),
                        "assembling a PrivHP state with r = %d, k = %d (%d leaves) over %d channel(s)"
                        % (state.r, state.k, leaf_count(state.L, state.r, state.k), state.d))
    eps = Fraction(merges.eps[0], merges.eps[1])
    mech_eps = Fraction(state.budget[0], state.budget[1])
    meta = {
        "mechanism": "privhp",
        "epsilon": str(eps),
        "mechanism_epsilon": str(mech_eps),
        "relation": merges.relation,
        "privacy_unit": "one reading (event-level)",
        "devices": merges.sorted_devices(),
        "frames": merges.frames,
        "config_id": state.config_id(),
        "params": {"r": state.r, "k": state.k, "L": state.L, "w": state.w, "j": state.j,
                   "sketch": state.sketch},
        "noise_sd_root": math.sqrt(state.tree_var[0]),
        "noisy_clamped": state.clamp,
    }
    return Generator(state.names, state.lo, state.hi, grow(state), meta, state.integer)
