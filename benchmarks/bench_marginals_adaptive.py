"""Adaptive marginals over windows (issue 18): does planning windows 2-4 from
the model of the windows before (edgesynth.mechanisms.marginals.adapt) beat
one window of the same stream on 3-way total variation?

On each public table (benchmarks/marginals_data.py), at each eps:

* one window: every 1- and 2-way marginal of all n rows (plan_marginals);
* adaptive, 4 windows: the rows split in 4 in their order (disjoint records,
  each window its own eps: parallel composition, every record spends eps);
  window 1 the same base plan, windows 2-4 planned by plan_from_model from
  the fit of the windows so far; the final fit on all windows
  (fit(..., windows=...));
* 4 windows, the base plan in each (no adaptivity: what windowing alone costs);
* independent columns (true 1-way marginals, NOT private) and a 10% sample
  of the rows (NOT private).

Every window's state is the real device's (edgesynth.agent.marginals
Marginals: exact discrete Laplace from a seeded DRBG, one update per row),
encoded, decoded by the host (MarginalsState) and fitted. The synthetic table
has round(n_hat) rows. Figures: average 2-way and 3-way TV
(edgesynth.evaluation.table_metrics.tv), the final fit's time, the process's
peak RSS.

    python3 benchmarks/bench_marginals_adaptive.py            # ~15 min: both tables, eps 0.3/1/3, 3 seeds at eps 1
    python3 benchmarks/bench_marginals_adaptive.py --quick    # ~1 min: cps1988, eps 1, 1 seed
"""
import argparse
import os
import resource
import sys
import time
from fractions import Fraction

import msgpack
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402  (puts the checkout on sys.path)
from marginals_data import TABLES, load  # noqa: E402

from edgesynth.agent.marginals import Marginals  # noqa: E402
from edgesynth.agent.msgpack_out import Encoder  # noqa: E402
from edgesynth.evaluation.table_metrics import tv  # noqa: E402
from edgesynth.firmware_shims.drbg import seeded_source  # noqa: E402
from edgesynth.mechanisms.marginals.adapt import plan_from_model  # noqa: E402
from edgesynth.mechanisms.marginals.model import fit  # noqa: E402
from edgesynth.mechanisms.marginals.plan import plan_marginals  # noqa: E402
from edgesynth.mechanisms.marginals.wire import MarginalsState  # noqa: E402

WINDOWS = 4


def release(cfg, cells, seed):
    """The device's measurements of ``cells`` (int (n, d)) under config ``cfg``."""
    m = Marginals(cfg["mechanisms"][0])
    m.draw_noise(seeded_source(seed))
    for r in cells.tolist():
        m.update(r)
    out = bytearray()
    enc = Encoder()
    enc.reset(lambda buf, n: out.extend(bytes(buf[:n])))
    m.prepare_release()
    m.encode(enc)
    return MarginalsState.from_payload(msgpack.unpackb(bytes(out)), 1).measurements()


def rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def one_window(schema, cells, eps, seed, iters):
    ms = release(plan_marginals(schema, eps), cells, b"one-%d" % seed)
    t0 = time.perf_counter()
    model = fit(schema.sizes, ms, iters=iters)
    return model, time.perf_counter() - t0, "%d marginals" % len(ms)


def windowed(schema, cells, eps, seed, iters, plan_iters, adapt=True):
    """The rows in WINDOWS windows: the base plan in window 1, then planned by
    plan_from_model (``adapt``) or the base plan again; the final fit on all."""
    ms, ws, shapes = [], [], []
    cfg = plan_marginals(schema, eps)
    for k, part in enumerate(np.array_split(cells, WINDOWS)):
        if k and adapt:
            cfg = plan_from_model(fit(schema.sizes, ms, iters=plan_iters, windows=ws), schema, eps)
        spec = cfg["mechanisms"][0]
        shapes.append("%d/%d" % (len(spec["cols"]), cfg["plan"]["group_totals"]))
        new = release(cfg, part, b"win-%d-%d" % (seed, k))
        ms += new
        ws += [k] * len(new)
    t0 = time.perf_counter()
    model = fit(schema.sizes, ms, iters=iters, windows=ws)
    return model, time.perf_counter() - t0, "marginals/group totals per window " + ", ".join(shapes)


def independent(cells, sizes, n, rng):
    """n rows, each column drawn i.i.d. from its true 1-way marginal."""
    cols = [rng.choice(s, size=n, p=np.bincount(cells[:, i], minlength=s) / len(cells)) for i, s in enumerate(sizes)]
    return np.stack(cols, axis=1)


def run(name, eps, seeds, iters, plan_iters, shuffle):
    schema, cells, _ = load(name)
    if shuffle:  # a stationary stream: the same rows in a fixed random order
        cells = cells[np.random.default_rng(12345).permutation(len(cells))]
    sizes, n = schema.sizes, len(cells)
    systems = {"edgesynth, one window (1- and 2-way)": lambda s: one_window(schema, cells, eps, s, iters),
               "edgesynth, 4 windows, base plan in each": lambda s: windowed(schema, cells, eps, s, iters, 0, False),
               "edgesynth, adaptive over 4 windows": lambda s: windowed(schema, cells, eps, s, iters, plan_iters)}
    rows = {k: [] for k in systems}
    rows["independent columns (true 1-ways, not private)"] = []
    rows["10% subsample (not private)"] = []
    info = {}
    for seed in seeds:
        rng = np.random.default_rng(seed)
        for key, go in systems.items():
            model, secs, shape = go(seed)
            synth = model.sample(round(model.total), rng)
            rows[key].append([tv(cells, synth, sizes, 2)[0], tv(cells, synth, sizes, 3)[0], secs])
            info[key] = shape
        rows["independent columns (true 1-ways, not private)"].append(
            [tv(cells, t, sizes, k)[0] for t in [independent(cells, sizes, n, rng)] for k in (2, 3)] + [0.0])
        sub = cells[rng.choice(n, size=n // 10, replace=False)]
        rows["10% subsample (not private)"].append([tv(cells, sub, sizes, 2)[0], tv(cells, sub, sizes, 3)[0], 0.0])
    print("\n### %s (%s): n = %d, eps = %s, %d seed(s)\n"
          % (name, "rows shuffled" if shuffle else "rows in stored order", n, eps, len(seeds)))
    print("| system | avg 2-way TV | avg 3-way TV | final fit (s) |")
    print("|---|---|---|---|")
    for key, vals in rows.items():
        v = np.mean(vals, axis=0)
        print("| %s | %.4f | %.4f | %s |" % (key, v[0], v[1], "%.1f" % v[2] if key in systems else "-"))
    print("\n%s; peak RSS %.0f MiB so far" % ("; ".join("%s: %s" % kv for kv in info.items()), rss_mib()),
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="cps1988, eps 1, one seed")
    ap.add_argument("--iters", type=int, default=300, help="mirror-descent steps of the final fits")
    ap.add_argument("--shuffle", action="store_true",
                    help="rows in a fixed random order (a stationary stream) instead of the stored order")
    ap.add_argument("--plan-iters", type=int, default=150, help="steps of the fits that plan windows 2-4")
    a = ap.parse_args()
    info = common.machine_info()
    print("command: %s\nmachine: %s, %s cores, python %s, numpy %s; load %s; commit %s"
          % (common.command_line(), info["cpu"], info["cores"], info["python"], info["numpy"], info["loadavg"],
             info["commit"]), flush=True)
    for name in (["cps1988"] if a.quick else list(TABLES)):
        for eps in ([Fraction(1)] if a.quick else [Fraction(3, 10), Fraction(1), Fraction(3)]):
            seeds = [0] if a.quick or eps != 1 else [0, 1, 2]
            run(name, eps, seeds, a.iters, a.plan_iters, a.shuffle)


if __name__ == "__main__":
    main()
