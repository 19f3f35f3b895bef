"""Assembling profile sketches: merge rules, inversion, the saved result.

Merging (derived from the profile reconstruction paper's noise model;
docs/mechanisms/profile.md): sketches over disjoint id
domains concatenate (d grows, one inversion, error ~ kappa/sqrt(D)). Sketches
over the *same* ids (several devices, or one device over several epochs) add
independently noised counters: the noise becomes a sum of k discrete
Laplaces, the inverse noise matrix grows to kappa**k, and accuracy collapses
beyond k = 2-3. That is refused unless forced; forced, every sketch is
unfolded first and the inversion uses the k-fold kernel. Partial overlaps
are refused always.
"""
import math
from fractions import Fraction

import msgpack
import numpy as np

from edgesynth.errors import InputError, MergeError
from edgesynth.genfile import read_file_map
from edgesynth.mechanisms.profile.invert import (
    DEFAULT_BETA,
    DEFAULT_P,
    inversion_need,
    invert,
    naive_profile,
    profile_what,
    tails,
    thresholds,
    unfold,
)
from edgesynth.merge import merge_releases
from edgesynth.ram import require_host_memory

FORMAT = 1
FILE_KIND = "edgesynth-profile"


class ProfileResult:
    """A private profile ``profile`` (t = 0..n) with its statistics in ``stats``."""

    names = ["count"]
    integer = [True]  # per-id counts are whole numbers

    def __init__(self, profile, stats):
        self.profile = np.asarray(profile, dtype=np.float64)
        self.stats = dict(stats)

    @property
    def d(self):
        return 1

    def sample(self, n, rng):
        """``n`` synthetic per-id counts drawn i.i.d. from the profile, shape (n, 1)."""
        p = np.maximum(self.profile, 0.0)
        return rng.choice(p.size, size=n, p=p / p.sum()).astype(np.float64)[:, None]

    def to_bytes(self):
        return msgpack.packb({"fmt": FORMAT, "kind": FILE_KIND, "profile": self.profile.astype("<f8").tobytes(),
                              "stats": self.stats})

    @classmethod
    def from_bytes(cls, data, source="profile"):
        m = read_file_map(data, source, FILE_KIND, FORMAT, "profile")
        try:
            f = np.frombuffer(m["profile"], "<f8").copy()
        except (KeyError, TypeError, ValueError) as e:
            raise InputError("%s: malformed profile (%s)" % (source, e))
        if f.size < 2 or not np.all(np.isfinite(f)) or np.any(f < 0) or abs(f.sum() - 1) > 1e-6:
            raise InputError("%s: profile is not a distribution" % source)
        return cls(f, m.get("stats", {}))

    def summary(self):
        return {"kind": FILE_KIND, "profile": self.profile.tolist(), **self.stats}


def _universe(s, d, f0):
    """Hashed ids: the counters are a sample of d ids of 2**bits; scale up."""
    if not s.bits:
        return {}
    u = 1 << s.bits
    return {"universe": u, "sample_fraction": d / u, "distinct_universe_estimate": float(u * (1.0 - f0)),
            "note": "sampled ids: f is the profile of the sample; tiny f[t >= 1] drown in kappa/sqrt(d)"}


def _segments(states, force):
    """Group sketches by domain; returns (list of (lo, hi, [states]), k)."""
    groups = {}
    for s in states:
        groups.setdefault((s.lo, s.hi), []).append(s)
    doms = sorted(groups)
    for (a, b), (c, _) in zip(doms, doms[1:]):
        if c < b:
            raise MergeError("profile domains [%d, %d) and [%d, ...) overlap partly; sketches must "
                             "cover disjoint or identical id ranges" % (a, b, c))
    ks = {len(g) for g in groups.values()}
    k = max(ks)
    if k > 1:
        kappa = ((1 + states[0].alpha) / (1 - states[0].alpha)) ** 2
        if not force:
            raise MergeError("%d sketches count the same ids: summing independently noised sketches "
                             "multiplies the error by kappa**%d (kappa = %.3g, so x%.3g); route each id "
                             "to one device per epoch, or pass --force-sum" % (k, k - 1, kappa, kappa ** (k - 1)))
        if len(ks) != 1:
            raise MergeError("forced sum needs the same number of sketches on every id range, got %s"
                             % sorted(ks))
    return [(lo, hi, groups[(lo, hi)]) for lo, hi in doms], k


def assemble_profile(releases, force_sum=False, p=DEFAULT_P, beta=DEFAULT_BETA, seed=0):
    """Invert the profile sketches of ``releases``; returns a ProfileResult."""
    return build(*merge_releases(releases, "profile"), force_sum=force_sum, p=p, beta=beta, seed=seed)


def build(merges, states, force_sum=False, p=DEFAULT_P, beta=DEFAULT_BETA, seed=0):
    """Invert the profile sketches ``states`` (one configuration, in the
    order their frames came) of the frames ``merges`` (edgesynth.merge.Merges)
    folded in; returns a ProfileResult."""
    segs, k = _segments(states, force_sum)
    s0 = states[0]
    d = sum(hi - lo for lo, hi, _ in segs)
    require_host_memory(inversion_need(d, s0.alpha, k * s0.cap, k, beta),
                        "assembling " + profile_what(d, s0.cap, Fraction(*s0.budget), s0.alpha, k, beta))
    rng = np.random.default_rng(seed)  # unfolding is host randomness: seeded, reproducible
    values = np.concatenate([sum(unfold(s.counts, s.cap, s.alpha, rng) for s in g) for _, _, g in segs])
    raw = np.concatenate([sum(s.counts for s in g) for _, _, g in segs])
    n = k * s0.cap
    fhat, ft, diag = invert(values, n, s0.alpha, beta=beta, p=p, k=k)
    naive = naive_profile(raw, n)
    kappa = ((1 + s0.alpha) / (1 - s0.alpha)) ** 2
    th = thresholds(n)
    stats = {
        "mechanism": "profile",
        "epsilon": str(Fraction(merges.eps[0], merges.eps[1])),
        "mechanism_epsilon": str(Fraction(*s0.budget)),
        "relation": merges.relation,
        "privacy_unit": "one reading (one occurrence of one id, event-level)",
        "devices": merges.sorted_devices(),
        "frames": merges.frames,
        "domains": [[lo, hi] for lo, hi, _ in segs],
        "ids": d,
        "cap": s0.cap,
        "max_count": n,
        "distinct": float(d * (1.0 - fhat[0])),
        **_universe(s0, d, fhat[0]),
        "never_seen": float(fhat[0]),
        "tails": {str(a): v for a, v in tails(ft, diag["radius"], s0.alpha, th).items()} if k == 1 else
                 {str(a): float(fhat[a:].sum()) for a in th},
        "tail_estimator": "telescoped three-tap" if k == 1 else "sum of the profile (k-fold noise)",
        "naive": {"profile": naive.tolist(), "distinct": float(d * (1.0 - naive[0])),
                  "never_seen": float(naive[0]),
                  "tails": {str(a): float(naive[a:].sum()) for a in th}},
        "norm_p": p,
        "beta": beta,
        "summed_sketches": k,
        "kappa": kappa,
        "error_growth": kappa ** k,
        "error_scale_l2": kappa ** k / math.sqrt(d),
        **diag,
    }
    return ProfileResult(fhat, stats)
