"""PHDStream fold-pruning (issue 14, item 1): the circles-with-deletion stream
on the 64 KiB MicroPython plan with and without folding, beside the unbounded
pool on the same cadence.

    python3 benchmarks/bench_phdstream_fold.py            # ~3 min: 3 seeds, K in 1, 2, 4, 8, 16, 32
    python3 benchmarks/bench_phdstream_fold.py --quick    # 1 seed, K = 8, 1/10 of the queries

As bench_phdstream.py's "@64KiB" rows: the device class with a seeded DRBG,
payloads through decode and the host Mirror, the first (t0) window fed as
windows of 500 events. Pools are the planner's (plan_phdstream, --max-events
the largest window): with --fold 0 for the plain pool, with --fold K for the
folding ones (5 B/node more, so a few nodes fewer). Reported per variant:
refused splits over the run, the first window with a refusal (as % of the
run), the pool in use at the end, and the small/medium/large range-query
relative error (metric.relative_error) at the last step.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_phdstream as bp  # noqa: E402
import common  # noqa: E402
import phd_streams  # noqa: E402

from edgesynth.mechanisms.phdstream import metric  # noqa: E402

BATCH = 500


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 seed, K = 8 only, 1/10 of the queries")
    ap.add_argument("--seeds", type=int, default=None, help="noise seeds (default 3, 1 with --quick)")
    ap.add_argument("--no-append", action="store_true", help="print only; do not append to RESULTS.md")
    args = ap.parse_args()
    seeds = args.seeds or (1 if args.quick else 3)
    ks = (8,) if args.quick else (1, 2, 4, 8, 16, 32)
    started = time.perf_counter()
    info = common.machine_info()

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    stream = phd_streams.circles(seed=0)
    rows = np.column_stack([stream.xy, stream.op]).tolist()
    wins = [stream.window(k) for k in range(stream.windows)]
    a0, b0 = wins[0]
    chunked = [(a, min(a + BATCH, b0)) for a in range(a0, b0, BATCH)] + wins[1:]
    cbatch = max(b - a for a, b in chunked)
    last = stream.windows - 1
    qrng = np.random.default_rng(12345)
    queries = {c: metric.query_set(qrng, [0, 0], [bp.SPAN, bp.SPAN], c) for c in bp.CLASSES}
    if args.quick:
        queries = {c: q[: len(q) // 10] for c, q in queries.items()}
    truth = bp.Truth(stream, [last], queries)
    variants = [("unbounded pool", bp.BIG_POOL, 0)]
    variants.append(("64 KiB, no fold", bp.planned("simple", cbatch, fold=0)["mechanisms"][0]["max_nodes"], 0))
    for k in ks:
        variants.append(("64 KiB, fold K=%d" % k, bp.planned("simple", cbatch, fold=k)["mechanisms"][0]["max_nodes"],
                         k))
    table = []
    for label, pool, k in variants:
        errs, refused, first, used, secs = [], [], [], [], []
        for s in range(seeds):
            t = time.perf_counter()
            tag = ("circles-%d-fold" % s).encode()  # one noise stream per seed, shared by the variants
            r = bp.run_phd(rows, chunked, "simple", pool, cbatch, tag, {len(chunked) - 1: last}, fold=k)
            secs.append(time.perf_counter() - t)
            rng = np.random.default_rng([s, 7])
            errs.append(truth.errors(last, bp.sample_gen(r["gens"][last], rng)))
            refused.append(int(r["refused"][-1]))
            f = bp.first_refusal(r)
            first.append(None if f is None else 100.0 * f / len(chunked))
            used.append(int(r["used"][-1]))
            log("  %-20s seed %d: %5.1f s, pool %d/%d, %d refused, first at %s"
                % (label, s, secs[-1], used[-1], pool, refused[-1], "-" if f is None else "%.0f%%" % first[-1]))
        firsts = [f for f in first if f is not None]
        table.append([label, pool if pool < bp.BIG_POOL else "2^20", "%.0f" % np.mean(refused),
                      "never" if not firsts else "%.0f%%%s" % (min(firsts), "" if len(firsts) == seeds else
                                                               " (%d of %d seeds)" % (len(firsts), seeds)),
                      int(np.mean(used))]
                     + ["%.3f" % np.mean([e[c] for e in errs]) for c in bp.CLASSES] + ["%.0f" % np.mean(secs)])
    text = "\n".join([
        "### Fold-pruning on the 64 KiB plan (bench_phdstream_fold.py)", "",
        "Circles with deletion (%d windows after chunking the t0 window into %d-event windows, eps = 1, D = 20, "
        "Simple counters), %d seed(s); pools from `plan_phdstream` for a 64 KiB MicroPython device "
        "(`--max-events %d`, `--fold 0` or `--fold K`). Errors: mean relative error of the small/medium/large range "
        "queries (%s each) at the last step. First refusal: the earliest window with a refused split over the seeds, "
        "as %% of the run." % (len(chunked), BATCH, seeds, cbatch, "/".join(str(len(q)) for q in queries.values())),
        "",
        common.md_table(["variant", "pool", "refused splits", "first refusal", "pool in use at end", "small",
                         "medium", "large", "s/run"], table)])
    print(text)
    if not args.no_append:
        common.results_append(text, title="PHDStream fold-pruning (bench_phdstream_fold.py)",
                              elapsed=time.perf_counter() - started, info=info)


if __name__ == "__main__":
    main()
