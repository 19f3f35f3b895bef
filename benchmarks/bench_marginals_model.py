"""Marginals host model benchmark (issue 18, first slice): on real public
tables, every 2-way marginal measured with discrete Laplace noise at eps,
the graphical model fitted (edgesynth.mechanisms.marginals.model.fit) and
sampled; average and max 2-way and 3-way total variation against the real
table (edgesynth.evaluation.table_metrics.tv), fit time and peak RSS.

    python3 benchmarks/bench_marginals_model.py            # ~1 min: both tables, 3 seeds, 300 steps
    python3 benchmarks/bench_marginals_model.py --quick    # ~10 s: cps1988, 1 seed
    python3 benchmarks/bench_marginals_model.py --limit    # ~10 s: memory and time at MAX_CELLS

The device is simulated, not run: each of the C(d, 2) marginals gets eps /
C(d, 2) (one record changes one cell of each marginal by 1 under add/remove,
so the L1 sensitivity of them all is C(d, 2)): discrete Laplace noise with
alpha = exp(-eps / C(d, 2)) on every cell, variance 2 alpha / (1 - alpha)^2,
drawn with numpy (``common.dlap_numpy``, the device's distribution). No
partitions: every cell is its own group. Baselines, both NOT private:
independent columns drawn from the true 1-way marginals, and a 10% sample
of the real rows without replacement. The synthetic table has round(n_hat)
rows (the model's estimated total).

Tables and schemas: benchmarks/marginals_data.py (shared with the baselines).
"""
import argparse
import itertools
import math
import os
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402  (puts the checkout on sys.path)
from marginals_data import TABLES, load  # noqa: E402

from edgesynth.evaluation.table_metrics import tv  # noqa: E402
from edgesynth.mechanisms.marginals.measure import Measurement  # noqa: E402
from edgesynth.mechanisms.marginals.model import fit  # noqa: E402


def measure(cells, sizes, eps, rng):
    """Every 2-way marginal of ``cells`` with discrete Laplace noise, eps
    split equally: a list of Measurements."""
    pairs = list(itertools.combinations(range(len(sizes)), 2))
    alpha = math.exp(-eps / len(pairs))
    var = 2 * alpha / (1 - alpha) ** 2
    out = []
    for c in pairs:
        shape = [sizes[i] for i in c]
        counts = np.bincount(np.ravel_multi_index(cells[:, c].T, shape), minlength=math.prod(shape))
        out.append(Measurement.ungrouped(c, counts + common.dlap_numpy(rng, alpha, counts.size), var))
    return out


def independent(cells, sizes, n, rng):
    """n rows, each column drawn i.i.d. from its true 1-way marginal."""
    cols = [rng.choice(s, size=n, p=np.bincount(cells[:, i], minlength=s) / len(cells)) for i, s in enumerate(sizes)]
    return np.stack(cols, axis=1)


def rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run(name, eps, seeds, iters):
    schema, cells, _ = load(name)
    sizes = schema.sizes
    n = len(cells)
    rows = {"edgesynth marginals (all 2-way, no partitions)": [], "independent columns (true 1-ways, not private)": [],
            "10% subsample (not private)": []}
    fits = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        ms = measure(cells, sizes, eps, rng)
        rss0 = rss_mib()
        t0 = time.perf_counter()
        model = fit(sizes, ms, iters=iters)
        fits.append((time.perf_counter() - t0, model.iters, rss0, rss_mib()))
        synth = model.sample(round(model.total), rng)
        tables = [synth, independent(cells, sizes, n, rng), cells[rng.choice(n, size=n // 10, replace=False)]]
        for key, t in zip(rows, tables):
            rows[key].append(tv(cells, t, sizes, 2) + tv(cells, t, sizes, 3))
    print("\n### %s: n = %d, %d columns, sizes %s (%d joint cells), eps = %g, %d seed(s)\n"
          % (name, n, len(sizes), "x".join(map(str, sizes)), math.prod(sizes), eps, len(seeds)))
    print("| system | avg 2-way TV | max 2-way TV | avg 3-way TV | max 3-way TV |")
    print("|---|---|---|---|---|")
    for key, vals in rows.items():
        v = np.mean(vals, axis=0)
        print("| %s | %.4f | %.4f | %.4f | %.4f |" % (key, v[0], v[1], v[2], v[3]))
    f = np.array(fits)
    print("\nfit: %.1f s mean (%.1f-%.1f), %d-%d mirror-descent steps; peak RSS %.0f MiB before the first fit, "
          "%.0f MiB after the last" % (f[:, 0].mean(), f[:, 0].min(), f[:, 0].max(), f[:, 1].min(), f[:, 1].max(),
                                       f[0, 2], f[-1, 3]))


def limit_run(steps=5):
    """Memory and time at the full-joint limit: 6 columns of 16x16x16x16x16x4
    = 2**22 cells, all 15 pairs measured (Poisson(50) totals, variance 100:
    only the cost is of interest), ``steps`` mirror-descent steps, then
    100,000 records sampled."""
    from edgesynth.mechanisms.marginals.model import MAX_CELLS
    sizes = (16, 16, 16, 16, 16, 4)
    assert math.prod(sizes) == MAX_CELLS
    rng = np.random.default_rng(0)
    ms = [Measurement.ungrouped(c, rng.poisson(50, sizes[c[0]] * sizes[c[1]]).astype(float), 100.0)
          for c in itertools.combinations(range(6), 2)]
    rss0 = rss_mib()
    t0 = time.perf_counter()
    model = fit(sizes, ms, iters=steps)
    dt = time.perf_counter() - t0
    rss1 = rss_mib()
    model.sample(100000, rng)
    print("\n### full-joint limit: %d cells, 15 pairs\n\nfit: %.2f s per step (%d steps); peak RSS %.0f MiB before, "
          "%.0f MiB after the fit, %.0f MiB after sampling 100,000 records"
          % (MAX_CELLS, dt / model.iters, model.iters, rss0, rss1, rss_mib()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="cps1988 only, one seed")
    ap.add_argument("--eps", type=float, default=1.0)
    ap.add_argument("--iters", type=int, default=300, help="mirror-descent steps at most")
    ap.add_argument("--limit", action="store_true", help="only the cost at MAX_CELLS (synthetic measurements)")
    a = ap.parse_args()
    info = common.machine_info()
    print("command: %s\nmachine: %s, %s cores, python %s, numpy %s; load %s; commit %s"
          % (common.command_line(), info["cpu"], info["cores"], info["python"], info["numpy"], info["loadavg"],
             info["commit"]))
    if a.limit:
        return limit_run()
    for name in (["cps1988"] if a.quick else list(TABLES)):
        run(name, a.eps, [0] if a.quick else [0, 1, 2], a.iters)


if __name__ == "__main__":
    main()
