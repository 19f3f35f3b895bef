"""Golden-vector cases shared by the native and QEMU runtime tests.

PrivHP: d = 1, 2, 3; cms and cs; j = 1..3; tagged and untagged; PMM-style
k = 2**r (no sketch levels); integer, float and mixed bounds; both relations;
readings outside the box, on its edges, and NaN. CDF: integer bounds with
integer and float readings (both exact-division modes, and a float reading just
below hi whose x - lo rounds up to the span), float bounds with a padded tree.
Profile: dense and Feistel-sampled ids, ids outside the domain and the
universe, counters driven to the cap. Several mechanisms on one device, reading
their columns in another order than the input's, integer and float paths.
Mechanisms read channels named c0, c1, ..."""
import math
from fractions import Fraction

import numpy as np

from edgesynth.config import combine
from edgesynth.mechanisms.cdf.plan import plan_cdf
from edgesynth.mechanisms.profile.plan import plan_profile
from tests.conftest import privhp_config

KEY = bytes(range(1, 33))


def _data(rng, n, lo, hi, integral):
    cols = []
    for a, b in zip(lo, hi):
        span = b - a
        c = rng.uniform(a - 0.05 * span, b + 0.05 * span, n)  # ~9% outside the box
        if integral:
            c = np.floor(c)
        c[::53] = a
        c[1::59] = b
        cols.append(c)
    return np.stack(cols, axis=1)


def cases(n=3000):
    """[(name, cfg, data (n, d) float64, seed, key)] with fixed seeds."""
    rng = np.random.default_rng(20240704)
    out = []

    def add(name, cfg, integral, seed, key):
        m = cfg["mechanisms"][0]
        m["names"] = ["c%d" % i for i in range(len(m["lo"]))]
        out.append((name, cfg, _data(rng, n, m["lo"], m["hi"], integral), seed, key))

    add("d1-cms-j1-int", privhp_config(d=1, r=10, k=8, w=64, j=1, lo=[0], hi=[1000]), True,
        b"s1", None)
    add("d1-cs-j2-float-tag", privhp_config(d=1, r=12, k=16, w=128, j=2, sketch="cs",
                                            lo=[-2.5], hi=[7.75]), False, b"seed-two", KEY)
    add("d2-cms-j2-r16-tag", privhp_config(d=2, r=16, k=256, w=512, j=2, lo=[0, -40], hi=[4095, 85]),
        True, b"sixteen-level-seed-0001", KEY)
    add("d2-cs-j3-int", privhp_config(d=2, r=14, k=32, w=256, j=3, sketch="cs", lo=[-500, 0],
                                      hi=[500, 65535]), True, b"s4", None)
    add("d3-cms-j3-float-replace", privhp_config(d=3, r=15, k=64, w=128, j=3, relation="replace",
                                                 eps=Fraction(1, 2), lo=[0.0, -1.0, 10.0],
                                                 hi=[1.0, 1.0, 20.5]), False, b"s5", KEY)
    add("d2-pmm-k2r", privhp_config(d=2, r=8, k=256, w=16, j=1, lo=[0, 0], hi=[255, 255]), True,
        b"pmm", None)
    cfg = privhp_config(d=2, r=11, k=16, w=64, j=2, sketch="cs", lo=[0, 0.0], hi=[1023, 3.3])
    add("d2-mixed-cs-tag", cfg, True, b"mixed-seed", KEY)
    out[-1][2][:, 1] = rng.uniform(-0.2, 3.5, n)   # channel 1 floats on float bounds
    add("d3-r2-cms", privhp_config(d=3, r=2, k=2, w=8, j=1, lo=[0, 0, 0], hi=[9, 9, 9]), True,
        b"r-below-d", None)
    out[2][2][7, 0] = np.nan                        # NaN lands in the lowest cell, clamped
    return out + sketch_cases(rng, n)


def _named(cfg, *names):
    for m, nm in zip(cfg["mechanisms"], names):
        m["names"] = list(nm)
    return cfg


def sketch_cases(rng, n):
    """CDF, profile and several-mechanism cases (see the module docstring)."""
    out = []
    cdf = plan_cdf([0], [1023], Fraction(1), 256, names=["c0"])
    out.append(("cdf-int", cdf, _data(rng, n, [0], [1023], True), b"cdf-1", None))
    cdf = plan_cdf([0.0, -5], [1.0, 5.5], Fraction(1, 2), 997, names=["c0", "c1"])  # padded (10,10,10)
    x = _data(rng, n, [0.0, -5], [1.0, 5.5], False)
    x[5, 1] = np.nan
    out.append(("cdf-float-d2-tag", cdf, x, b"cdf-2", KEY))
    lo, hi = -(1 << 27), (1 << 27) - 1             # span * K >= 2**30: the long division
    cdf = plan_cdf([lo], [hi], Fraction(1), 1024, names=["c0"], relation="replace")
    x = _data(rng, n, [lo], [hi], False)
    x[::3] = np.floor(x[::3])
    x[9, 0] = math.nextafter(float(hi), 0)          # x - lo rounds up to the span: the top bin
    out.append(("cdf-mode2-replace", cdf, x, b"cdf-3", None))
    ids = rng.poisson(3, n) + rng.integers(-20, 320, n) * (rng.random(n) < 0.3)
    out.append(("profile-dense", plan_profile(0, 300, 6, Fraction(1), names=["c0"]),
                ids[:, None].astype(float), b"prof-1", None))
    prof = plan_profile(100, 1124, 40, Fraction(2), names=["c0"], relation="replace", sample_bits=20,
                        sample_seed="fleet-k1")
    from edgesynth.agent.profile import Profile
    from edgesynth.mechanisms.profile.vector import feistel
    images = feistel(Profile(prof["mechanisms"][0]), np.arange(1 << 20))
    hot = int(np.flatnonzero((images >= 100) & (images < 1124))[0])    # a sampled id: driven to the cap
    ids = np.r_[rng.integers(-50, (1 << 20) + 50, n), np.full(300, hot)]
    out.append(("profile-sampled-tag", prof, ids[:, None].astype(float), b"prof-2", KEY))
    hp = privhp_config(d=2, r=11, k=16, w=64, j=2, sketch="cs", lo=[0.0, 0], hi=[1.0, 1023])
    cfg = combine([_named(hp, ("c2", "c1")), plan_cdf([0], [1023], Fraction(1, 4), 64, names=["c1"]),
                   plan_profile(0, 300, 50, Fraction(1, 4), names=["c0"], sample_bits=10, sample_seed="s")])
    x = np.c_[rng.integers(-5, 320, n), np.floor(rng.uniform(-20, 1050, n)), rng.uniform(-0.1, 1.1, n)]
    out.append(("combo-float-tag", cfg, x, b"combo-1", KEY))
    hp = privhp_config(d=1, r=10, k=8, w=32, j=1, lo=[0], hi=[4095])   # reads a prefix of the inputs
    cfg = combine([_named(hp, ("c0",)), plan_cdf([0], [4095], Fraction(1), 128, names=["c0"]),
                   plan_profile(0, 64, 20, Fraction(1), names=["c1"])])
    x = np.c_[rng.integers(-100, 4200, n), rng.integers(-5, 70, n)].astype(float)
    out.append(("combo-int", cfg, x, b"combo-2", None))
    return out
