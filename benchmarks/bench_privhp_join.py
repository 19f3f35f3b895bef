"""PrivHP joined to per-channel private CDFs (es.plan cdf_share; issue 13, item 2).

For each case (d, n, C-core RAM) and share F of epsilon = 1, the script plans
with ``cdf_share=F``, always given explicitly (F = 0: privhp alone, the plain
config; es.plan's default need not be 0), runs the device
(es.simulate, runtime "numpy") on the multifractal family
(edgesynth.data.synthdata.multifractal, B = 0.8, a fixed seed per (d, n)) and
assembles: the default (joined) generator, and from the same frames the
privhp part alone. Side by side in one run, seeds 0..reps-1 (the hash seed
and the noise seed change per repetition).

Metrics, normalised box [0, 1)^d, x 1e3:
* per-column W1: exact, between each column's data and the generator's
  marginal CDF on a 2**16-point grid (the joined generator's marginal is
  the raked masses spread by the CDF's shape inside each leaf), averaged over
  columns;
* joint: es.sliced_w1 over 64 fixed random directions between the data and
  10**5 synthetic points.

A second table measures the raking's convergence: the largest per-channel
bin gap |model - CDF| of the marginals after R rounds and the per-column W1.

--timing instead times, side by side in one run, loading the generator file
(the joined one rakes at load) and sampling 10**6 points, joined (cdf_share
0.3) vs plain (the privhp part of the same frames), median of --reps
interleaved repetitions.

    python3 benchmarks/bench_privhp_join.py [--quick] [--reps N] [--d 2 4] [--n 20000 300000] [--no-append]
    python3 benchmarks/bench_privhp_join.py --timing [--reps 5] [--d 2 4] [--no-append]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import common as C  # noqa: E402
import numpy as np  # noqa: E402

import edgesynth as es  # noqa: E402
from edgesynth.data.synthdata import multifractal  # noqa: E402
from edgesynth.mechanisms import load_generator  # noqa: E402
from edgesynth.mechanisms.privhp.join import Shape, marginal, rake  # noqa: E402

SHARES = ("0.1", "0.2", "0.3", "0.5")
GRID = 1 << 16
DIRECTIONS = 64
SLICED_M = 100_000
TIMING_SAMPLES = 10 ** 6
TIMING_N = 300_000
TIMING_RAM = 65536


def data(d, n):
    return multifractal(np.random.default_rng([d, n, 80, 17]), n, d, 0.8)


def model(gen):
    return getattr(gen, "model", gen)


def w1_columns(g, x):
    """Mean over columns of the W1 between each column's data and the
    generator's marginal, exact up to a 2**-16 grid (the box is [0, 1)^d):
    the marginal's mass per grid cell is join.marginal's, with the joined
    CDF's shape (interpolated at the grid) or, plain, the uniform one."""
    edges = np.arange(GRID + 1) / GRID
    out = []
    for c in range(x.shape[1]):
        P = edges if g.cdf is None else Shape(g.cdf[c], g.lo[c], g.hi[c]).G(edges)
        fine = Shape(P[1:], 0.0, 1.0)
        Fg = np.cumsum(marginal(g.box_lo, g.box_hi, g.prob, fine, c))
        Fd = np.searchsorted(np.sort(x[:, c]), edges[1:], side="right") / x.shape[0]
        out.append(np.abs(Fd - Fg).mean())
    return float(np.mean(out))


def sliced(g, x, rng_seed):
    s = g.sample(SLICED_M, np.random.default_rng([rng_seed, 9]))
    return float(es.sliced_w1(x, s, 0.0, 1.0, rng=np.random.default_rng([rng_seed, 7]), directions=DIRECTIONS))


def run_case(d, n, ram, reps, table, conv):
    x = data(d, n)
    bounds = ",".join(["0:1"] * d)
    res = {}
    for share in ("0",) + SHARES:
        for rep in range(reps):
            cfg = es.plan(bounds, epsilon=1, ram=ram, device_runtime="c", hash_seed="j%d" % rep, cdf_share=share)
            frames = es.simulate(cfg, x, seed=1000 + rep, runtime="numpy")
            g = model(es.assemble(frames))
            row = {"joined_col": w1_columns(g, x), "joined_sw": sliced(g, x, rep)}
            if share != "0":
                gp = model(es.assemble(frames, mechanism="privhp"))
                row["part_col"] = w1_columns(gp, x)
                row["bins"] = cfg["plan"]["cdf"]["bins"]
                if rep == 0 and share == "0.2":
                    conv.append(((d, n, ram), convergence(g, x)))
            else:
                row["w"] = cfg["mechanisms"][0]["w"]
            res.setdefault(share, []).append(row)
    base_col = [r["joined_col"] for r in res["0"]]
    base_sw = [r["joined_sw"] for r in res["0"]]
    for share in SHARES:
        rows = res[share]
        col = [r["joined_col"] for r in rows]
        sw = [r["joined_sw"] for r in rows]
        table.append([str(d), "%.0e" % n, C.fmt_bytes(ram), share, str(rows[0]["bins"]),
                      C.fmt_ci([1e3 * v for v in base_col]), C.fmt_ci([1e3 * v for v in col]),
                      "%.2f" % (np.mean(col) / np.mean(base_col)),
                      C.fmt_ci([1e3 * r["part_col"] for r in rows]),
                      C.fmt_ci([1e3 * v for v in base_sw]), C.fmt_ci([1e3 * v for v in sw]),
                      "%.2f" % (np.mean(sw) / np.mean(base_sw))])
        print(" | ".join(table[-1]), flush=True)


def convergence(g, x):
    """[(rounds, max bin gap over channels, per-column W1)] for the joined
    generator ``g``'s leaves and CDFs."""
    shapes = {c: Shape(g.cdf[c], g.lo[c], g.hi[c]) for c in range(g.d)}
    out = []
    for rounds in (0, 1, 2, 4, 8, 16, 32):
        m = rake(g.box_lo, g.box_hi, g.leaves.mass, shapes, np.exp2(-g.leaves.level), rounds)
        gen = type(g)(g.names, g.lo, g.hi, type(g.leaves)(g.leaves.level, g.leaves.path, m), g.meta, g.integer)
        gen.cdf = g.cdf  # the joined marginal (in-leaf shape) without raking again
        gap = max(float(np.abs(marginal(g.box_lo, g.box_hi, m / m.sum(), s, c) - np.diff(s.P)).max())
                  for c, s in shapes.items())
        out.append((rounds, gap, w1_columns(gen, x)))
    return out


def timing(d, reps):
    """A markdown row: (d, leaves, bins, load and 10**6-point sample times,
    joined vs plain, medians over ``reps`` interleaved repetitions)."""
    x = data(d, TIMING_N)
    cfg = es.plan(",".join(["0:1"] * d), epsilon=1, ram=TIMING_RAM, device_runtime="c", hash_seed="t",
                  cdf_share="0.3")
    frames = es.simulate(cfg, x, seed=5, runtime="numpy")
    files = {"joined": model(es.assemble(frames)).to_bytes(),
             "plain": model(es.assemble(frames, mechanism="privhp")).to_bytes()}
    t = {(k, w): [] for k in files for w in ("load", "sample")}
    for rep in range(reps):
        for kind, raw in files.items():
            t0 = time.perf_counter()
            g = load_generator(raw)
            t1 = time.perf_counter()
            g.sample(TIMING_SAMPLES, np.random.default_rng(rep))
            t[kind, "load"].append(t1 - t0)
            t[kind, "sample"].append(time.perf_counter() - t1)
    med = {k: float(np.median(v)) for k, v in t.items()}
    row = [str(d), C.fmt_bytes(TIMING_RAM), str(g.leaves.level.size), str(cfg["plan"]["cdf"]["bins"])]
    for w in ("load", "sample"):
        row += ["%.3f" % med["plain", w], "%.3f" % med["joined", w], "%.2f" % (med["joined", w] / med["plain", w])]
    print(" | ".join(row), flush=True)
    return row


def main_timing(args):
    t0 = time.time()
    rows = [timing(d, args.reps) for d in args.d]
    header = ["d", "RAM (C)", "leaves", "cdf bins", "plain load s", "joined load s", "ratio",
              "plain sample s", "joined sample s", "ratio"]
    text = ("Seconds, median of %d interleaved repetitions: load = load_generator of the file (the joined one "
            "rakes at load), sample = 10^6 points; joined = es.assemble's default of the cdf_share 0.3 config, "
            "plain = the same frames with mechanism='privhp'; multifractal B = 0.8, n = %d, epsilon = 1.\n\n%s"
            % (args.reps, TIMING_N, C.md_table(header, rows)))
    print(text)
    if not args.no_append:
        C.results_append(text, title="bench_privhp_join.py --timing: joined vs plain load and sampling time",
                         elapsed=time.time() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="d = 2, n = 2e4, 32 KiB, 1 rep")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--d", type=int, nargs="+", default=[2, 4], help="channel counts (default 2 4)")
    ap.add_argument("--n", type=int, nargs="+", default=[20000, 300000], help="readings (default 20000 300000)")
    ap.add_argument("--no-append", action="store_true")
    ap.add_argument("--timing", action="store_true", help="time loading and sampling, joined vs plain (64 KiB)")
    args = ap.parse_args()
    if args.timing:
        return main_timing(args)
    cases = [(2, 20000, 32768)] if args.quick else \
        [(d, n, ram) for d in args.d for n in args.n for ram in (32768, 65536)]
    reps = 1 if args.quick else args.reps
    t0 = time.time()
    table, conv = [], []
    for d, n, ram in cases:
        run_case(d, n, ram, reps, table, conv)
    header = ["d", "n", "RAM (C)", "share F", "cdf bins", "plain col W1", "joined col W1", "ratio",
              "privhp part alone col W1", "plain sliced W1", "joined sliced W1", "ratio"]
    ctab = [["d=%d n=%.0e %s" % (d, n, C.fmt_bytes(ram)), str(r), "%.2e" % gap, "%.3f" % (1e3 * w)]
            for (d, n, ram), rows in conv for r, gap, w in rows]
    text = ("W1 x 1e3 (mean ± 95%% CI over %d seeds), epsilon = 1, multifractal B = 0.8, C core; "
            "plain = cdf_share 0 (privhp alone), joined = es.assemble's default of the cdf_share F config, "
            "privhp part alone = the same frames assembled with mechanism='privhp'.\n\n%s\n\n"
            "Raking convergence (share 0.2, seed 0): largest bin gap |model - CDF| over channels after R rounds, "
            "and the per-column W1 x 1e3.\n\n%s"
            % (reps, C.md_table(header, table), C.md_table(["case", "rounds R", "max bin gap", "col W1"], ctab)))
    print(text)
    if not args.no_append:
        C.results_append(text, title="bench_privhp_join.py: PrivHP joined to per-channel CDFs (cdf_share)",
                         elapsed=time.time() - t0)


if __name__ == "__main__":
    main()
