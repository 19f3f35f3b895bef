"""`edgesynth sample` throughput and peak memory, CSV and Parquet (issue 17
target: >= 10 M rows/s to Parquet at 10^8 rows, memory flat in n).

Each run is the real command in a fresh process (`python -m edgesynth sample
GEN -n N --seed 1 -o OUT`); its peak RSS comes from ``os.wait4`` (that
child's own ru_maxrss). rows/s is end to end, start-up included; the start-up
(`-n 1`) is measured too and "rows/s after start-up" subtracts it. The old
path (numpy.savetxt "%.10g" per block into the same atomic file, what
`sample` did before data/writers.py) runs at the smallest n for the ratio.
The generator: 2-D PrivHP planned for 32 KiB from 20,000 normal readings.
Outputs go to a temporary directory and are deleted after each run.

    python3 benchmarks/bench_write.py [--sizes 1e7,1e8] [--old-size 1e7] [--no-append]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow  # noqa: E402

import edgesynth as es  # noqa: E402

OLD_PATH = """
import sys
import numpy as np
import edgesynth as es
from edgesynth.outputs import atomic_output
gen, n, out = es.load(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
with atomic_output(out, "w", encoding="utf-8", newline="") as fh:
    fh.write(",".join(gen.names) + "\\n")
    for block in gen.blocks(n, 1):
        np.savetxt(fh, block, delimiter=",", fmt="%.10g")
"""


def make_generator(path):
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.normal(50, 8, 20000), rng.normal(20, 3, 20000)])
    cfg = es.plan({"temp": (0.0, 100.0), "hum": (0.0, 40.0)}, epsilon=1, ram="32K")
    es.assemble([es.simulate(cfg, x, seed=1, runtime="numpy")]).save(path)


def run(cmd, out):
    """(wall seconds, CPU seconds (user + system), peak RSS bytes, output bytes) of one child
    process; the output is deleted."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode()
    proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit("%s failed (%d): %s" % (" ".join(cmd), proc.returncode, err))
    size = os.path.getsize(out)
    os.unlink(out)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, size


def sample_cmd(gen, n, out):
    return [sys.executable, "-m", "edgesynth", "sample", gen, "-n", str(n), "--seed", "1", "-o", out]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1e7,1e8", help="row counts, comma separated")
    ap.add_argument("--old-size", default="1e7", help="row count for the old numpy.savetxt path (0: skip)")
    ap.add_argument("--no-append", action="store_true")
    a = ap.parse_args()
    sizes = [int(float(s)) for s in a.sizes.split(",")]
    old_n = int(float(a.old_size))
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="edgesynth-write-", dir="/tmp") as d:
        gen = os.path.join(d, "gen.msgpack")
        make_generator(gen)
        startup = min(run(sample_cmd(gen, 1, os.path.join(d, "s.csv")), os.path.join(d, "s.csv"))[0]
                      for _ in range(3))
        results = []
        for n in sizes:
            for fmt in ("parquet", "csv"):
                out = os.path.join(d, "out." + fmt)
                wall, cpu, rss, size = run(sample_cmd(gen, n, out), out)
                results.append(("`sample -o out.%s`" % fmt, n, wall, cpu, rss, size))
                print(results[-1], flush=True)
        if old_n:
            out = os.path.join(d, "old.csv")
            wall, cpu, rss, size = run([sys.executable, "-c", OLD_PATH, gen, str(old_n), out], out)
            results.append(("old path: numpy.savetxt %.10g (CSV)", old_n, wall, cpu, rss, size))
            print(results[-1], flush=True)
    old = {n: wall for label, n, wall, _, _, _ in results if label.startswith("old")}
    rows = []
    for label, n, wall, cpu, rss, size in results:
        ratio = "%.1fx" % (old[n] / wall) if n in old and not label.startswith("old") and "csv" in label else ""
        rows.append([label, "%.0e" % n, "%.1f" % wall, "%.2f" % (n / wall / 1e6),
                     "%.2f" % (n / max(wall - startup, 1e-9) / 1e6), "%.1f" % cpu, "%.0f" % (rss / 2 ** 20),
                     "%.1f" % (size / n), ratio])
    text = ("2-D PrivHP generator (32 KiB plan), `--seed 1`; one fresh process per row of the table; peak RSS of "
            "that process (os.wait4). Start-up of `sample -n 1` (Python, imports, loading the generator): %.2f s. "
            "pyarrow %s. CSV floats are written exactly (shortest round-trip form), the old path rounded to 10 "
            "significant digits. Drawing and encoding overlap on two threads, so CPU s can exceed wall s; on a "
            "shared machine wall time also counts waiting for a core (see the load average above).\n\n"
            % (startup, pyarrow.__version__))
    text += C.md_table(["writer", "rows", "wall s", "M rows/s", "M rows/s after start-up", "CPU s", "peak RSS MiB",
                        "bytes/row", "CSV speed-up vs old"], rows)
    print(text)
    if not a.no_append:
        C.results_append(text, title="bench_write.py", elapsed=time.monotonic() - t_start)


if __name__ == "__main__":
    main()
