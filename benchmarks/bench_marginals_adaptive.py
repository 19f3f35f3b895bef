"""Adaptive marginals over windows (issue 18), on the product path: does
planning windows 2-4 from the generator of the windows before beat one
window of the same stream on 3-way total variation, and does the drift
check flag a drifting stream?

On each public table (benchmarks/marginals_data.py), at each eps, every
system goes through the library as a user would: es.plan -> es.simulate (the
raw rows, encoded by the config's schema; ``--runtime`` numpy by default,
the device's bytes) -> es.assemble of the frames -> the generator's sample:

* one window: every 1- and 2-way marginal of all n rows (es.plan);
* adaptive, 4 windows: the rows split in 4 in their order (disjoint records,
  one frame per window, epoch k; each window its own eps: parallel
  composition, every record spends eps); window 1 the base plan, window k+1
  planned by es.plan(from_generator=es.assemble(frames of windows 1..k));
  the final es.assemble of all 4 windows' frames (windows of different
  plans fitted together, each plan its own record count);
* 4 windows, the base plan in each (no adaptivity: what windowing alone costs;
  one plan, so its frames sum and the drift check has nothing to compare);
* independent columns (true 1-way marginals, NOT private) and a 10% sample
  of the rows (NOT private).

The synthetic table has the generator's estimated number of records.
Figures: average 2-way and 3-way TV (edgesynth.evaluation.table_metrics.tv),
the final assemble's time (verification + fit), the drift check of the final
assemble (the largest plan statistic over its limit dof + 6 sqrt(2 dof), and
the runs that warned), the process's peak RSS.

    python3 benchmarks/bench_marginals_adaptive.py                  # both tables, eps 0.3/1/3, 3 seeds at eps 1
    python3 benchmarks/bench_marginals_adaptive.py --eps 1          # eps 1 only (3 seeds)
    python3 benchmarks/bench_marginals_adaptive.py --quick          # cps1988, eps 1, 1 seed
"""
import argparse
import os
import resource
import sys
import time
from fractions import Fraction

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402  (puts the checkout on sys.path)
from marginals_data import TABLES, load  # noqa: E402

import edgesynth as es  # noqa: E402
from edgesynth.evaluation.table_metrics import tv  # noqa: E402

WINDOWS = 4


def rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def timed_assemble(frames):
    t0 = time.perf_counter()
    gen = es.assemble(frames)
    return gen, time.perf_counter() - t0


def shape(cfg):
    return "%d/%d" % (len(cfg["mechanisms"][0]["cols"]), cfg["plan"]["group_totals"])


def one_window(schema, df, eps, seed, runtime):
    cfg = es.plan(mechanism="marginals", schema=schema, epsilon=eps)
    gen, secs = timed_assemble(es.simulate(cfg, df, seed=seed * 100, runtime=runtime))
    return gen, secs, "%d marginals" % len(cfg["mechanisms"][0]["cols"])


def windowed(schema, df, eps, seed, runtime, adapt=True):
    """The rows in WINDOWS windows, one frame each: the base plan in window 1,
    then es.plan(from_generator=...) of the frames so far (``adapt``) or the
    base plan again; the final es.assemble over every window's frames."""
    cfg = es.plan(mechanism="marginals", schema=schema, epsilon=eps)
    frames, shapes = [], []
    for k, part in enumerate(np.array_split(np.arange(len(df)), WINDOWS)):
        if k and adapt:
            cfg = es.plan(mechanism="marginals", epsilon=eps, from_generator=es.assemble(frames))
        shapes.append(shape(cfg))
        frames.append(es.simulate(cfg, df.iloc[part], seed=seed * 100 + 1 + k, runtime=runtime, epoch=k))
    gen, secs = timed_assemble(frames)
    return gen, secs, "marginals/group totals per window " + ", ".join(shapes)


def independent(cells, sizes, n, rng):
    """n rows, each column drawn i.i.d. from its true 1-way marginal."""
    cols = [rng.choice(s, size=n, p=np.bincount(cells[:, i], minlength=s) / len(cells)) for i, s in enumerate(sizes)]
    return np.stack(cols, axis=1)


def run(name, eps, seeds, runtime, shuffle):
    schema, cells, df = load(name)
    if shuffle:  # a stationary stream: the same rows in a fixed random order
        order = np.random.default_rng(12345).permutation(len(cells))
        cells, df = cells[order], df.iloc[order].reset_index(drop=True)
    sizes, n = schema.sizes, len(cells)
    systems = {"edgesynth, one window (1- and 2-way)": lambda s: one_window(schema, df, eps, s, runtime),
               "edgesynth, 4 windows, base plan in each": lambda s: windowed(schema, df, eps, s, runtime, False),
               "edgesynth, adaptive over 4 windows": lambda s: windowed(schema, df, eps, s, runtime)}
    rows = {k: [] for k in systems}
    rows["independent columns (true 1-ways, not private)"] = []
    rows["10% subsample (not private)"] = []
    info, drift = {}, {k: [] for k in systems}
    for seed in seeds:
        rng = np.random.default_rng(seed)
        for key, go in systems.items():
            gen, secs, what = go(seed)
            synth = gen.model.sample(gen.model.default_rows(), rng)
            rows[key].append([tv(cells, synth, sizes, 2)[0], tv(cells, synth, sizes, 3)[0], secs])
            info[key] = what
            drift[key].append((max(st / lim for st, _, lim in gen.model.drift), gen.model.drifting,
                               len(gen.model.drift)))
        rows["independent columns (true 1-ways, not private)"].append(
            [tv(cells, t, sizes, k)[0] for t in [independent(cells, sizes, n, rng)] for k in (2, 3)] + [0.0])
        sub = cells[rng.choice(n, size=n // 10, replace=False)]
        rows["10% subsample (not private)"].append([tv(cells, sub, sizes, 2)[0], tv(cells, sub, sizes, 3)[0], 0.0])
    print("\n### %s (%s): n = %d, eps = %s, %d seed(s), runtime %s\n"
          % (name, "rows shuffled" if shuffle else "rows in stored order", n, eps, len(seeds), runtime))
    print("| system | avg 2-way TV | avg 3-way TV | final assemble (s) | plans | drift: max statistic/limit | warned |")
    print("|---|---|---|---|---|---|---|")
    for key, vals in rows.items():
        v = np.mean(vals, axis=0)
        d = drift.get(key)
        tail = ("%d | %.2f | %d of %d" % (d[0][2], max(x[0] for x in d), sum(x[1] for x in d), len(d))
                if d else "- | - | -")
        print("| %s | %.4f | %.4f | %s | %s |" % (key, v[0], v[1], "%.1f" % v[2] if key in systems else "-", tail))
    print("\n%s; peak RSS %.0f MiB so far" % ("; ".join("%s: %s" % kv for kv in info.items()), rss_mib()),
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="cps1988, eps 1, one seed")
    ap.add_argument("--eps", default=None, help="one eps only (e.g. 1); default 0.3, 1 and 3")
    ap.add_argument("--runtime", default="numpy", choices=["numpy", "cpython"], help="es.simulate's runtime")
    ap.add_argument("--shuffle", action="store_true",
                    help="rows in a fixed random order (a stationary stream) instead of the stored order")
    a = ap.parse_args()
    info = common.machine_info()
    print("command: %s\nmachine: %s, %s cores, python %s, numpy %s; load %s; commit %s"
          % (common.command_line(), info["cpu"], info["cores"], info["python"], info["numpy"], info["loadavg"],
             info["commit"]), flush=True)
    epss = [Fraction(a.eps)] if a.eps else [Fraction(3, 10), Fraction(1), Fraction(3)]
    for name in (["cps1988"] if a.quick else list(TABLES)):
        for eps in ([Fraction(1)] if a.quick else epss):
            seeds = [0] if a.quick or eps != 1 else [0, 1, 2]
            run(name, eps, seeds, a.runtime, a.shuffle)


if __name__ == "__main__":
    main()
