"""Utility of PrivHP: W1 against k, w, epsilon and n, with PMM and the exact
histogram measured in the same run.

    python3 benchmarks/bench_utility.py --quick   # smoke run: n <= 1e4, 3 reps (~1 min)
    python3 benchmarks/bench_utility.py           # full: n up to 1e6, 5 reps (~10-15 min)
    options: --reps N, --exact-noise, --no-append

Methods (all through agent.Agent -> edgesynth.mechanisms.privhp.vector.ingest -> release ->
iter_frames -> assemble_privhp, except T_X):
* PrivHP   defaults eps=1, k=64, w=256, j=1, count-min, r=ceil(log2(eps n));
* PMM      PrivHP with k = 2**r (complete noisy tree, no sketches), memory
           4 (2**(r+1) - 1) bytes, same eps, same Eq. (23) split;
* T_X      non-private: exact counts of the depth-r cells, uniform inside
           each cell (the resolution floor; no noise, no pruning).
Both private methods spend 1/50 of eps on the noisy clamp count, like the
planner's configs.

Data: uniform (= multifractal B=0.5) and multifractal B=0.7, 0.8, 0.9
(edgesynth.data.synthdata), d=1 and d=2; one fixed data set per (data, d, n).
Repetitions differ in noise seed and hash seed; tables give the mean and the
95% t confidence interval.

W1 is in normalised coordinates. "W1 marg" is the exact 1-D W1 between each
channel of the data and the generator's marginal, averaged over channels (for
d=1 this is the exact W1). For d=2 two joint figures (l-infinity): "OT" is
edgesynth.evaluation.metrics.w1_joint on m=2000-point subsamples (its floor, the same
estimator between two halves of the data, is given: values near it cannot be
told apart), and "TB" is a deterministic tree-metric upper bound over all n
points (benchmarks/common.TreeBound, depth 28).

By default the counters' noise is drawn with numpy from the same discrete
Laplace distribution as the agent's exact sampler (2**21 exact draws take
~20 s, which a sweep of PMM states cannot afford); --exact-noise uses the
agent's sampler throughout.
"""
import argparse
import os
import sys
import time
from fractions import Fraction

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import numpy as np  # noqa: E402

from edgesynth.data.synthdata import multifractal, uniform  # noqa: E402

TB_DEPTH = 28
SCALE = 1e3  # tables show W1 x 1e3


class Bench:
    def __init__(self, reps, noise, m_joint):
        self.reps, self.noise, self.m_joint = reps, noise, m_joint
        self.data = {}
        self.cache = {}
        self.count = 0

    # ---- data -----------------------------------------------------------------
    def dataset(self, name, d, n):
        key = (name, d, n)
        if key not in self.data:
            B = {"uniform": 0.5, "MF 0.7": 0.7, "MF 0.8": 0.8, "MF 0.9": 0.9}[name]
            rng = np.random.default_rng([d, n, int(round(B * 100)), 20240])
            x = uniform(rng, n, d) if B == 0.5 else multifractal(rng, n, d, B)
            tb = C.TreeBound(x, TB_DEPTH) if d >= 2 else None
            self.data[key] = (x, tb)
        return self.data[key]

    # ---- one method, all repetitions ------------------------------------------------
    def run(self, method, name, d, n, eps, k=64, w=256, j=1):
        eps = Fraction(eps)
        r = C.depth_for(eps, n, 1)
        key = (method, name, d, n, eps, k, w, j)
        if key in self.cache:
            return self.cache[key]
        x, tb = self.dataset(name, d, n)
        res = {"w1m": [], "ot": [], "floor": [], "tb": [], "r": r}
        if method == "PrivHP":
            res["bytes"] = C.counter_bytes(r, k, w, j)
        elif method == "PMM":
            res["bytes"] = C.pmm_bytes(r)
        else:
            res["bytes"] = 0
        tx = C.histogram_generator(x, r) if method == "T_X" else None
        for rep in range(self.reps):
            tag = "%s|%s|%d|%d|%s|%d|%d|%d|%d" % (method, name, d, n, eps, k, w, j, rep)
            rng = np.random.default_rng([rep, d, n, k, w, j, 7])
            if method == "T_X":
                gen = tx
            else:
                cfg = (C.make_config(d, r, k, w, j, eps=eps, hash_seed="util-hash-%d" % rep)
                       if method == "PrivHP" else
                       C.pmm_config(d, r, eps=eps, hash_seed="util-hash-%d" % rep))
                gen, _ = C.privhp_generator(cfg, x, "util-noise-" + tag, self.noise)
            if method != "T_X" or rep == 0:
                res["w1m"].append(C.w1_marginal(gen, x))
                if tb is not None:
                    res["tb"].append(tb(gen.leaves, gen.prob))
            if d >= 2:
                ot, fl = C.w1_joint_ot(gen, x, rng, self.m_joint)
                res["ot"].append(ot)
                res["floor"].append(fl)
            self.count += 1
        self.cache[key] = res
        return res


def f(values):
    if not values:
        return "-"
    return C.fmt_ci([v * SCALE for v in values])


def ratio(a, b):
    return "%.2f" % (np.mean(a) / np.mean(b))


def table_n(bench, d, datasets, ns, eps=1):
    rows = []
    for name in datasets:
        for n in ns:
            p = bench.run("PrivHP", name, d, n, eps)
            m = bench.run("PMM", name, d, n, eps)
            t = bench.run("T_X", name, d, n, eps)
            row = [name, "%.0e" % n, p["r"], C.fmt_bytes(p["bytes"]), C.fmt_bytes(m["bytes"]),
                   f(p["w1m"]), f(m["w1m"]), f(t["w1m"]), ratio(p["w1m"], m["w1m"])]
            if d >= 2:
                row += [f(p["tb"]), f(m["tb"]), f(t["tb"]), f(p["ot"]), f(m["ot"]), f(t["ot"]),
                        "%.1f" % (SCALE * np.mean(p["floor"] + m["floor"] + t["floor"]))]
            rows.append(row)
    head = ["data", "n", "r", "PrivHP bytes", "PMM bytes", "W1 marg PrivHP", "W1 marg PMM",
            "W1 marg T_X", "PrivHP/PMM"]
    if d >= 2:
        head += ["TB PrivHP", "TB PMM", "TB T_X", "OT PrivHP", "OT PMM", "OT T_X", "OT floor"]
    return C.md_table(head, rows)


def table_param(bench, d, datasets, n, param, values, eps=1):
    rows = []
    for name in datasets:
        m = bench.run("PMM", name, d, n, eps)
        t = bench.run("T_X", name, d, n, eps)
        for v in values:
            kw = {"k": 64, "w": 256}
            kw[param] = v
            p = bench.run("PrivHP", name, d, n, eps, **kw)
            row = [name, v, C.fmt_bytes(p["bytes"]), f(p["w1m"]), ratio(p["w1m"], m["w1m"])]
            if d >= 2:
                row += [f(p["tb"]), f(p["ot"])]
            rows.append(row)
        ref = [name, "PMM (T_X)", "%s (-)" % C.fmt_bytes(m["bytes"]),
               "%s (%s)" % (f(m["w1m"]), f(t["w1m"])), "1"]
        if d >= 2:
            ref += ["%s (%s)" % (f(m["tb"]), f(t["tb"])), "%s (%s)" % (f(m["ot"]), f(t["ot"]))]
        rows.append(ref)
    head = ["data", param, "PrivHP bytes", "W1 marg", "/PMM"]
    if d >= 2:
        head += ["TB", "OT"]
    return C.md_table(head, rows)


def table_eps(bench, d, datasets, n, epss):
    rows = []
    for name in datasets:
        for e in epss:
            p = bench.run("PrivHP", name, d, n, e)
            m = bench.run("PMM", name, d, n, e)
            t = bench.run("T_X", name, d, n, e)
            row = [name, e, p["r"], f(p["w1m"]), f(m["w1m"]), f(t["w1m"]), ratio(p["w1m"], m["w1m"])]
            if d >= 2:
                row += [f(p["tb"]), f(m["tb"]), f(p["ot"]), f(m["ot"])]
            rows.append(row)
    head = ["data", "eps", "r", "W1 marg PrivHP", "W1 marg PMM", "W1 marg T_X", "PrivHP/PMM"]
    if d >= 2:
        head += ["TB PrivHP", "TB PMM", "OT PrivHP", "OT PMM"]
    return C.md_table(head, rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: small n, 3 repetitions")
    ap.add_argument("--reps", type=int, default=None, help="repetitions per point (default 5; quick 3)")
    ap.add_argument("--exact-noise", action="store_true", help="use the agent's exact sampler for all noise")
    ap.add_argument("--no-append", action="store_true", help="print only; do not append to RESULTS.md")
    args = ap.parse_args(argv)
    info = C.machine_info()
    t0 = time.perf_counter()
    quick = args.quick
    reps = args.reps or (3 if quick else 5)
    if quick:
        C.selfcheck()
        datasets = ["uniform", "MF 0.8"]
        ns, n_sweep, n_eps = [1000, 10000], 10000, 10000
        ks, ws, epss = [16, 64, 256], [64, 256, 1024], [0.5, 1, 2]
        m_joint = 500
    else:
        datasets = ["uniform", "MF 0.7", "MF 0.8", "MF 0.9"]
        ns, n_sweep, n_eps = [10 ** 4, 10 ** 5, 10 ** 6], 10 ** 6, 10 ** 5
        ks, ws, epss = [16, 64, 256, 1024, 4096], [16, 64, 256, 1024, 4096], [0.25, 0.5, 1, 2, 4]
        m_joint = 2000
    sweep_data = ["uniform", "MF 0.8"]
    bench = Bench(reps, "exact" if args.exact_noise else "numpy", m_joint)

    parts = []
    for d in (1, 2):
        t = time.perf_counter()
        tab = table_n(bench, d, datasets, ns)
        print("d=%d n-sweep done (%.0f s)" % (d, time.perf_counter() - t), flush=True)
        parts.append("#### d=%d: W1 vs n and data (eps=1, k=64, w=256, j=1)\n\n%s" % (d, tab))
    for d in (1, 2):
        t = time.perf_counter()
        tk = table_param(bench, d, sweep_data, n_sweep, "k", ks)
        tw = table_param(bench, d, sweep_data, n_sweep, "w", ws)
        print("d=%d k/w sweeps done (%.0f s)" % (d, time.perf_counter() - t), flush=True)
        parts.append("#### d=%d: W1 vs k (n=%.0e, eps=1, w=256, j=1)\n\n%s" % (d, n_sweep, tk))
        parts.append("#### d=%d: W1 vs w (n=%.0e, eps=1, k=64, j=1)\n\n%s" % (d, n_sweep, tw))
    for d in (1, 2):
        t = time.perf_counter()
        te = table_eps(bench, d, sweep_data, n_eps, epss)
        print("d=%d eps sweep done (%.0f s)" % (d, time.perf_counter() - t), flush=True)
        parts.append("#### d=%d: W1 vs epsilon (n=%.0e, k=64, w=256, j=1; r = ceil(log2(eps n)))\n\n%s"
                     % (d, n_eps, te))

    elapsed = time.perf_counter() - t0
    intro = ("### Utility%s\n\nW1 values are **x 1e-3** in normalised coordinates, mean ± 95%% CI over %d "
             "repetitions (noise seed and hash seed vary; the data set is fixed per data/d/n). "
             "\"W1 marg\": exact marginal W1 averaged over channels (exact W1 for d=1). "
             "\"TB\": deterministic tree-metric upper bound on the joint l-inf W1 over all n points. "
             "\"OT\": `w1_joint` on m=%d subsamples, one subsample per repetition; \"OT floor\" is "
             "the estimator between two halves of the real data (OT values near it carry no signal). "
             "T_X is exact (non-private) so its marginal W1 has no spread. Noise: %s. "
             "PrivHP/PMM is the ratio of mean marginal W1. %d method-repetitions in %.0f s."
             % (" (quick mode)" if quick else "", reps, m_joint,
                "agent's exact sampler" if args.exact_noise else
                "numpy draws of the agent's discrete-Laplace distribution (see common.build_agent)",
                bench.count, elapsed))
    md = intro + "\n\n" + "\n\n".join(parts) + "\n"
    print()
    print(md)
    if not args.no_append:
        C.results_append(md, title="bench_utility" + (" --quick" if quick else ""),
                         elapsed=elapsed, info=info)


if __name__ == "__main__":
    main()
