"""Golden-vector cases shared by the native and QEMU runtime tests: configs
covering d = 1, 2, 3; cms and cs; j = 1..3; tagged and untagged; PMM-style
k = 2**r (no sketch levels); integer, float and mixed bounds; both relations;
readings outside the box, on its edges, and NaN."""
from fractions import Fraction

import numpy as np

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
    return out
