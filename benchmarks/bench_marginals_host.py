"""The marginals host glue end to end (issue 18): records read as raw values
(text, numbers) and encoded to cells by the schema, the agent on each runtime
(frames checked byte-identical), assemble (the fit), writing a synthetic
table of 10**6 records as CSV and Parquet, and evaluate --schema (TV of every
2- and 3-way marginal), all timed side by side in one run.

The table: n records over 4 columns (site: 3 categories + an unknown one,
status: 3 dependent on site, hour: 24 integer categories, temp: 30 bins of
[-20, 40]); every 1- and 2-way marginal at epsilon 1, 64 KiB on the C runtime.

    python3 benchmarks/bench_marginals_host.py [--n 200000] [--no-append]
"""
import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import edgesynth as es  # noqa: E402
from edgesynth.runtimes import native  # noqa: E402

SCHEMA = {"columns": [{"name": "site", "values": ["north", "south", "east"]},
                      {"name": "status", "values": ["ok", "warn", "fail"]},
                      {"name": "hour", "values": list(range(24))},
                      {"name": "temp", "bounds": [-20, 40], "bins": 30}]}


def table(n, seed=0):
    rng = np.random.default_rng(seed)
    site = rng.choice(["north", "south", "east", "west"], n, p=[.5, .3, .15, .05])
    status = np.where(site == "north", rng.choice(["ok", "warn", "fail"], n, p=[.8, .15, .05]),
                      rng.choice(["ok", "warn", "fail"], n, p=[.4, .4, .2]))
    temp = np.where(status == "fail", rng.normal(25, 4, n), rng.normal(10, 8, n))
    return pd.DataFrame({"site": site, "status": status, "hour": rng.integers(0, 24, n), "temp": temp})


def timed(call):
    t = time.perf_counter()
    out = call()
    return time.perf_counter() - t, out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--no-append", action="store_true")
    args = ap.parse_args(argv)
    t_start = time.time()
    info = C.machine_info()
    df = table(args.n)
    cfg = es.plan(mechanism="marginals", schema=SCHEMA, epsilon=1, ram="64K")
    runtimes = ["numpy", "cpython"] + (["native"] if native.available() else [])
    rows, frames = [], {}
    for r in runtimes:
        t, frames[r] = timed(lambda: es.simulate(cfg, df, seed=1, runtime=r))
        rows.append(("simulate --runtime %s (%d records, encoding included)" % (r, args.n), "%.2f" % t,
                     "%.3g" % (args.n / t / 1e6)))
    same = len(set(frames.values())) == 1
    t, gen = timed(lambda: es.assemble(frames["numpy"]))
    rows.append(("assemble (fit, %d joint cells)" % np.prod(gen.model.schema.sizes), "%.2f" % t, ""))
    with tempfile.TemporaryDirectory() as d:
        for ext in ("csv", "parquet"):
            path = os.path.join(d, "s." + ext)
            t, n = timed(lambda: gen.write(path, 1_000_000, seed=1))
            rows.append(("write 10^6 records, %s (%.1f MB)" % (ext, os.path.getsize(path) / 1e6), "%.2f" % t,
                         "%.3g" % (n / t / 1e6)))
    synth = gen.sample(seed=2)
    t, rep = timed(lambda: es.evaluate(df, synth, schema=SCHEMA))
    rows.append(("evaluate --schema (%d real, %d synthetic)" % (len(df), len(synth)), "%.2f" % t, ""))
    md = ["The marginals host glue on a %d-record, 4-column table (text, integer and binned columns, 5%% of sites "
          "outside the schema), every 1- and 2-way marginal at epsilon 1 (%d group totals). Frames of %s "
          "byte-identical: %s. Average / max TV of the sample (round(n_hat) = %d records): 2-way %.4f / %.4f, "
          "3-way %.4f / %.4f; generator file %d B." % (
              args.n, cfg["plan"]["group_totals"], ", ".join(runtimes), same, len(synth), rep["tv_2way"]["average"],
              rep["tv_2way"]["max"], rep["tv_3way"]["average"], rep["tv_3way"]["max"], len(gen.to_bytes())), "",
          C.md_table(["step", "seconds", "million records/s"], rows)]
    text = "\n".join(md)
    print(text)
    if not args.no_append:
        C.results_append(text, title="bench_marginals_host.py", elapsed=time.time() - t_start, info=info)


if __name__ == "__main__":
    main()
