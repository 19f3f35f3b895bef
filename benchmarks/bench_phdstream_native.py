"""PHDStream on the C core (agent/c/es_phdstream.c) beside the Python agent, in one run.

    python3 benchmarks/bench_phdstream_native.py            # full (3 rounds)
    python3 benchmarks/bench_phdstream_native.py --quick    # 1 round, 20k-sample circles
    python3 benchmarks/bench_phdstream_native.py --no-append

The stream is the PHDStream paper's concentric circles with deletion
(benchmarks/phd_streams.py: 100,000 samples, 50 % kept, first window t0 = 0.1
of the events, then 500 per window), readings on [0, 2**16)^2, depth 16,
eps = 1 per event (rate_bound: batch_max holds the largest window), a pool of
2**15 nodes (unbounded for this stream) and of 64 KiB. Per counter (Simple,
Block-8), one agent over every window on each path:

* cpython: ``agent.Agent`` (``update`` per event, ``release`` = the window's
  step, ``next_window``);
* native: ``NativeAgent`` (``update_rows`` once per window, int32 rows; the
  same release and next_window in C).

Every window's frame is checked byte-identical between the paths. Reported:
events/s of the updates alone and of the whole run (updates + steps + frames),
the step time per window, and the ratio native/cpython (interleaved rounds,
medians). Then the C state's memory: bytes per pool node and per batch slot
(es_phdstream_mem_size), the state struct (x86-64 here; Cortex-M from
``edgesynth firmware build`` when the ARM toolchain is installed).
"""
import argparse
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import numpy as np  # noqa: E402
import phd_streams  # noqa: E402

from edgesynth import agent, ccore  # noqa: E402
from edgesynth.runtimes import native  # noqa: E402

SEED = b"bench-phd-native"
POOLS = {"2**15 nodes": 1 << 15, "64 KiB": None}


def spec(counter, max_nodes, batch_max):
    s = {"kind": "phdstream", "names": ["x", "y"], "lo": [0, 0], "hi": [phd_streams.SPAN, phd_streams.SPAN],
         "depth": 16, "eps": [1, 1], "counter": counter, "max_nodes": max_nodes, "batch_max": batch_max,
         "snap": 16, "rate_bound": True}
    if counter == "block":
        s["block"] = 8
    return s


def config(s):
    return {"format": 1, "epsilon": [1, 1], "mechanisms": [s]}


def pool_for(counter, batch_max, ram):
    """The largest max_nodes whose C memory fits ``ram`` bytes."""
    lo, hi = 3, 1 << 22
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ccore.core_params(config(spec(counter, mid, batch_max)))["mem_bytes"] <= ram:
            lo = mid
        else:
            hi = mid
    return lo


def run(make, events, st):
    """One agent over every window: (update seconds, step+frame seconds, frames)."""
    t_up = t_rel = 0.0
    frames = []
    a = None
    for k in range(st.windows):
        s, e = st.window(k)
        if a is None:
            a = make()
        else:
            a.next_window()
        t0 = time.perf_counter()
        events(a, s, e)
        t1 = time.perf_counter()
        frames.append(bytes(a.release()))
        t_rel += time.perf_counter() - t1
        t_up += t1 - t0
    return t_up, t_rel, frames


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-append", action="store_true")
    args = ap.parse_args(argv)
    if not native.available():
        sys.exit("the native core is not built (pip install -e . with a C compiler)")
    t_start = time.time()
    info = C.machine_info()
    st = phd_streams.circles(seed=0, n_samples=20_000 if args.quick else 100_000)
    rounds = 1 if args.quick else 3
    ev = np.column_stack([st.xy, st.op]).astype(np.int64)
    rows_py = [tuple(r) for r in ev.tolist()]
    n_ev = len(ev)
    batch_max = int(np.diff(np.concatenate([[0], st.ends])).max())

    def py_events(a, s, e):
        up = a.update
        for x in rows_py[s:e]:
            up(x)

    def c_events(a, s, e):
        if e > s:
            a.update_rows(ev[s:e])

    out = []
    identical = True
    for counter in ("simple", "block"):
        for pool_name, n in POOLS.items():
            n = n or pool_for(counter, batch_max, 64 * 1024)
            cfg = config(spec(counter, n, batch_max))
            paths = {"cpython": (lambda: agent.Agent(cfg, seed=SEED), py_events),
                     "native": (lambda: native.NativeAgent(cfg, seed=SEED), c_events)}
            times = {k: [] for k in paths}
            frames = {}
            for _ in range(rounds):
                for k, (make, events) in paths.items():
                    t_up, t_rel, frames[k] = run(make, events, st)
                    times[k].append((t_up, t_rel))
            identical &= frames["cpython"] == frames["native"]
            med = {k: (float(np.median([t[0] for t in v])), float(np.median([t[1] for t in v])))
                   for k, v in times.items()}
            for k in paths:
                up, rel = med[k]
                out.append((counter, pool_name + " (%d)" % n, k, "%.3g M" % (n_ev / up / 1e6),
                            "%.3g ms" % (1e3 * rel / st.windows), "%.3g M" % (n_ev / (up + rel) / 1e6),
                            "" if k == "cpython" else "%.0fx / %.0fx / %.0fx" % (
                                med["cpython"][0] / up, med["cpython"][1] / rel, sum(med["cpython"]) / (up + rel))))
    table = C.md_table(["counter", "pool (max_nodes)", "path", "update events/s", "step + frame per window",
                        "whole run events/s", "native vs cpython (update / step / whole)"], out)

    mem = []
    for counter in ("simple", "block", "tree"):
        s = spec(counter, 1 << 12, 1)
        if counter == "tree":
            s["horizon"] = 128
        one = ccore.core_params(config(s))["mem_bytes"]
        two = ccore.core_params(config(dict(s, max_nodes=(1 << 12) + (1 << 13))))["mem_bytes"]
        slot = ccore.core_params(config(dict(s, batch_max=(1 << 12) + 1)))["mem_bytes"] - one
        mem.append((counter + (" (T_h 128)" if counter == "tree" else " (B 8)" if counter == "block" else ""),
                    "%.2f B" % ((two - one) / (1 << 13)), "%.3g B" % (slot / (1 << 12))))
    sizes = "es_phdstream_t: %d B on x86-64" % native.ffi.sizeof("es_phdstream_t")
    if shutil.which("arm-none-eabi-gcc"):
        from edgesynth.targets.firmware import build
        r = build("cortex-m4")
        sizes += ", %d B on Cortex-M4 (of which the DRBG it keeps: %d B); es_agent_t %d B" % (
            r["state"]["es_phdstream_t"], r["state"]["es_drbg_t"], r["state"]["es_agent_t"])
        sizes += "; worst stack chain of a phdstream device (release: step, noise, frame) %d B" % (
            r["stack_by_kind"]["phdstream"])
    md = "\n".join([
        "### PHDStream: the C core beside the Python agent",
        "",
        "Stream: %s; %d events in %d windows; depth 16, eps 1 per event, snapshots every 16 steps. "
        "Medians over %d interleaved round(s); every window's frame byte-identical between the paths: **%s**."
        % (st.note, n_ev, st.windows, rounds, "yes" if identical else "NO"),
        "",
        table,
        "",
        "### PHDStream: C memory per node",
        "",
        C.md_table(["counter", "bytes per pool node", "bytes per batch slot"], mem),
        "",
        "Per node: Cn, Cd, first child, the counter's arrays, the step's BFS queue (node, segment, floor(Ca), "
        "depth, P(parent)) and leaf increment (int32 each), two bitmap bits. The same arrays as the Python "
        "agent's counter_bytes(). Fixed: %s." % sizes])
    print(md)
    if not identical:
        sys.exit("frames differ between cpython and native")
    if not args.no_append:
        C.results_append(md, title="PHDStream: the C core (bench_phdstream_native.py)", elapsed=time.time() - t_start,
                         info=info)


if __name__ == "__main__":
    main()
