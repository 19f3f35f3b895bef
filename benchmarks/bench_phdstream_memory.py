"""PHDStream's MicroPython heap beyond its arrays, and the planner's charge.

Over a grid of phdstream configs (1..3 channels, Simple, Block-8 and
tree-128 counters, pools of 63..4095 nodes, batches of 64..4096 slots, some
folding every step: fold K = 1, which loads pool.py and its arrays), a
continual run of 6 windows with insertions and deletions (construction,
updates, steps and streamed releases, a snapshot among them) on the MicroPython
unix port loading the .mpy bundle: the smallest heap it runs in (raw 64-bit
bytes), the 32-bit GC pool beyond the arrays it implies
(edgesynth.ram.mp_pool_beyond_counters, which halves everything beyond the
arrays, plus half the construction's transient again: the zero buffers the
arrays are built from are bytes, the same size on 32 bits) against the
planner's charge (RUNTIME_OVERHEAD["micropython"]["phdstream"] + SHAPE_BYTES
per channel + the transient, construction_transient), and the base the grid
calls for. Then configs planned for 48..256 KiB (the planner's fold default:
K = 8 when the pool cannot hold the whole tree): the 32-bit heap estimate,
whether each runs in its --ram (-X heapsize=Nw) and the base each calls for
(their batches are larger than the grid's: the base reported is the largest
of both tables).

    python benchmarks/bench_phdstream_memory.py [--quick] [--no-record]
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import edgesynth as es  # noqa: E402
from benchmarks.common import results_append  # noqa: E402
from edgesynth.config import with_names  # noqa: E402
from edgesynth.mechanisms.phdstream.plan import construction_transient, state_bytes  # noqa: E402
from edgesynth.ram import RUNTIME_OVERHEAD, SHAPE_BYTES, mcu_heap, mp_pool_beyond_counters  # noqa: E402
from edgesynth.runtimes import micropython as mp_runtime  # noqa: E402

SEED = b"bench-phd-seed00"


def config(d, nodes, batch, counter="simple", fold=0, **extra):
    spec = {"kind": "phdstream", "names": ["x%d" % i for i in range(d)], "lo": [0] * d, "hi": [4095] * d,
            "depth": min(12 * d, 20), "eps": [1, 2], "counter": counter, "max_nodes": nodes, "batch_max": batch,
            "snap": 3, "fold": fold}
    spec.update(extra)
    horizon = spec.get("horizon", 128 if counter == "tree" else 0)
    return {"format": 1, "epsilon": [1, 1], "relation": "add-remove", "mechanisms": [spec],
            "plan": {"counter_bytes": state_bytes(nodes, batch, counter, horizon, fold)}}


def transient(cfg):
    m = cfg["mechanisms"][0]
    return construction_transient(m["max_nodes"], m["batch_max"], m.get("counter", "simple"),
                                  m.get("horizon", 128 if m.get("counter") == "tree" else 0), m.get("fold", 0))


def windows(cfg, n_windows=6, per_window=None, seed=0):
    """[(epoch, seq, rows)] of a stream with about one deletion in four: rows
    are tuples of d ints and the op, as simulate passes them."""
    m = cfg["mechanisms"][0]
    d = len(m["lo"])
    rng = np.random.default_rng(seed)
    n = per_window or min(m["batch_max"], 400)
    out = []
    for e in range(n_windows):
        xy = rng.integers(0, 4096, size=(n, d))
        op = np.where(rng.random(n) < 0.25, -1, 1)
        out.append((e, e, [tuple(int(v) for v in r) + (int(o),) for r, o in zip(xy, op)]))
    return out


def inputs(cfg):
    m = cfg["mechanisms"][0]
    return with_names(cfg, m["names"] + [m.get("op", "op")])


def grid(quick):
    """(d, nodes, batch, counter, fold K): the folding rows load pool.py and
    fold every step (K = 1), the planner's default K = 8 folds less often."""
    g = [(1, 63, 64, "simple", 0), (2, 511, 512, "simple", 0), (2, 511, 512, "block", 0), (2, 255, 256, "tree", 0),
         (2, 511, 512, "simple", 1)]
    if not quick:
        g += [(3, 2047, 1024, "simple", 0), (2, 4095, 4096, "block", 0), (1, 1023, 64, "tree", 0),
              (3, 127, 4096, "simple", 0), (2, 383, 500, "block", 1), (1, 1023, 64, "tree", 1)]
    return g


def planned(ram_kib, quick):
    opts = [("simple", {}), ("block:8", {"max_events": 500})]
    if not quick:
        opts.append(("tree:128", {}))
    out = []
    for counter, kw in opts:
        label = "%s%s" % (counter, ", --max-events %d" % kw["max_events"] if kw else "")
        try:
            out.append((label, es.plan("0:4095,0:4095", epsilon=1, ram="%dK" % ram_kib, mechanism="phdstream",
                                       counter=counter, **kw)))
        except es.InputError as e:
            out.append((label, str(e)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a smaller grid and fewer plans")
    ap.add_argument("--no-record", action="store_true", help="print only; do not append to RESULTS.md")
    args = ap.parse_args()
    t0 = time.time()
    base = RUNTIME_OVERHEAD["micropython"]["phdstream"]
    per_channel = SHAPE_BYTES["phdstream"][0]
    rows = ["| d | nodes | batch | counter | fold | array B | transient B | min heap, raw 64-bit B | 32-bit pool "
            "beyond arrays B | charged: base + shape + transient B | covered |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    need = 0
    for d, nodes, batch, counter, fold in grid(args.quick):
        cfg = inputs(config(d, nodes, batch, counter, fold))
        c, big = cfg["plan"]["counter_bytes"], transient(cfg)
        raw = mp_runtime.min_heap(cfg, [], SEED, words=False, windows=windows(cfg))
        beyond = mp_pool_beyond_counters(raw, c) + big // 2
        need = max(need, beyond - per_channel * d - big)
        rows.append("| %d | %d | %d | %s | %d | %d | %d | %d | %d | %d + %d + %d | %s |" % (
            d, nodes, batch, counter, fold, c, big, raw, beyond, base, per_channel * d, big,
            "yes" if base + per_channel * d + big >= beyond else "NO"))
    rows += ["", "Base the grid calls for (largest pool beyond the arrays minus %d B per channel and the "
             "transient): %d B." % (per_channel, need), "",
             "| plan --ram | counter | pool nodes | fold K | batch_max | array B | planned peak B | "
             "32-bit heap estimate B | base it calls for B | runs in its --ram |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for ram in ((64,) if args.quick else (48, 64, 128, 256)):
        for label, cfg in planned(ram, args.quick):
            if isinstance(cfg, str):
                rows.append("| %d KiB | %s | - | - | - | - | - | - | - | %s |" % (ram, label, cfg))
                continue
            p = cfg["plan"]
            cfg = inputs(cfg)
            c = p["counter_bytes"]
            w = windows(cfg, per_window=min(p["batch_max"], 300))
            raw = mp_runtime.min_heap(cfg, [], SEED, words=False, windows=w)
            beyond = mp_pool_beyond_counters(raw, c) + transient(cfg) // 2
            est = mcu_heap(c + beyond)
            calls = beyond - per_channel * len(cfg["mechanisms"][0]["lo"]) - transient(cfg)
            need = max(need, calls)
            fits = mp_runtime._run(cfg, [], ram * 1024, SEED, windows=w)[0] == "ok"
            rows.append("| %d KiB | %s | %d | %d | %d | %d | %d | %d | %d | %s |" % (
                ram, label, p["pool_nodes"], cfg["mechanisms"][0]["fold"], p["batch_max"], c,
                p["expected_peak_bytes"], est, calls, "yes" if fits and est <= ram * 1024 else "NO"))
    rows += ["", "Base both tables call for, rounded up to 1 KiB: %d B; charged: %d B."
             % (-(-need // 1024) * 1024, base)]
    section = "\n".join(["### PHDStream: MicroPython heap beyond the arrays (%s, .mpy bundle, continual runs of 6 "
                         "windows)" % mp_version(), ""] + rows)
    print(section)
    print(json.dumps({"base_needed": -(-need // 1024) * 1024}))
    if not args.no_record:
        results_append(section, title="PHDStream MicroPython memory", elapsed=time.time() - t0)


def mp_version():
    import subprocess
    out = subprocess.run([mp_runtime.find_micropython(), "-c", "import sys; print(sys.version)"],
                         capture_output=True, text=True)
    return "MicroPython " + out.stdout.strip()


if __name__ == "__main__":
    main()
