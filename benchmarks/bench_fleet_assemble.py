"""`edgesynth assemble --store` at fleet scale (issue 16 items 1, 5, 6): wall,
CPU, peak RSS and store size for 10^3..10^6 one-frame devices, the fitted
exponent of CPU time in the frame count, and the Dask merge at 1 and 2 workers.

The stores are built fast, which is not what is measured: one genuine frame of
a 32 KiB C-runtime PrivHP config (es.simulate, 29 KB) is copied for every
device id, the id spliced into its envelope and payload (same length) and a new
tag computed under that device's key (derived from a fleet master key,
es.new_fleet_key), and the rows go into the store with Store.put_many in
batches. Each assemble runs as its own process tree under a fresh parent, whose
getrusage(RUSAGE_CHILDREN) gives the CPU and the peak RSS. Stores are deleted
after each size.

    python3 benchmarks/bench_fleet_assemble.py [--sizes 1000,10000,100000,1000000] [--dask-at 100000]
        [--dir DIR] [--no-append]
"""
import argparse
import hashlib
import hmac
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import md_table, results_append  # noqa: E402  (puts the repository root on sys.path)

import edgesynth as es  # noqa: E402
from edgesynth.fleet.store import Store  # noqa: E402
from edgesynth.frames import parse_frame, split_envelope  # noqa: E402

TEMPLATE_ID = "d0000000"
BATCH = 2000

# a fresh parent per measurement: RUSAGE_CHILDREN's peak is then this assemble's alone
MEASURE = """
import json, resource, subprocess, sys, time
t0 = time.monotonic()
r = subprocess.run(sys.argv[1:], capture_output=True, text=True)
wall = time.monotonic() - t0
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": r.returncode, "err": r.stderr[-2000:], "wall": wall, "cpu": u.ru_utime + u.ru_stime,
                  "rss_kib": u.ru_maxrss}))
"""


class Row:
    """What Store.put_many reads of a Release, without decoding each copy."""

    def __init__(self, device, raw, digest, mechs):
        self.device, self.epoch, self.seq, self.raw = device, 0, 0, raw
        self.payload_digest, self.mechs = digest, mechs


def template(keyring):
    cfg = es.plan({"t": (0, 50), "h": (0, 100)}, epsilon=1, ram="32K", device_runtime="c")
    x = np.random.default_rng(0).uniform(0, 50, size=(20000, 2))
    return es.simulate(cfg, x, seed=1, runtime="numpy", device_id=TEMPLATE_ID, keyring=keyring)


def copies(frame, ring, n):
    """Frame bytes of devices d0000000.. (n of them), each tagged under its own key."""
    device, start, end, tag, stop = split_envelope(frame)
    assert device == TEMPLATE_ID and tag is not None and stop == len(frame)
    body = bytearray(frame[:end])                       # envelope and payload: what the tag covers
    at = frame.index(b"\xa6device\xa8" + TEMPLATE_ID.encode(), start) + 8
    for i in range(n):
        dev = b"d%07d" % i
        body[7:15] = dev                                # the envelope's id (fixstr of 8 bytes at 6)
        body[at:at + 8] = dev                           # the payload's "device"
        key = ring.key_for(dev.decode())
        yield dev.decode(), bytes(body) + b"\xc4\x20" + hmac.digest(key, body, "sha256"), (start, end)


def build_store(path, frame, ring, n):
    rel = parse_frame(frame, key_for=ring.key_for, require_tag=True)[0]
    mechs = rel.mechs
    t0 = time.monotonic()
    with Store(path, create=True) as st:
        batch = []
        for device, raw, (a, b) in copies(frame, ring, n):
            batch.append(Row(device, raw, hashlib.sha256(memoryview(raw)[a:b]).hexdigest(), mechs))
            if len(batch) == BATCH:
                st.put_many(batch)
                batch = []
        if batch:
            st.put_many(batch)
    return time.monotonic() - t0


def measure(args):
    out = subprocess.run([sys.executable, "-c", MEASURE] + args, capture_output=True, text=True, check=True)
    r = json.loads(out.stdout)
    if r["rc"] != 0:
        raise SystemExit("assemble failed: %s" % r["err"])
    return r


def assemble_cmd(store, gen, *extra):
    return [sys.executable, "-m", "edgesynth", "assemble", "--store", store, "-o", gen] + list(extra)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000,1000000")
    ap.add_argument("--dask-at", type=int, default=100000, help="size at which Dask runs at 1 and 2 workers (0: none)")
    ap.add_argument("--dir", default=None, help="where the stores go (default: a temporary directory)")
    ap.add_argument("--no-append", action="store_true")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    t_start = time.monotonic()
    work = tempfile.mkdtemp(prefix="edgesynth-fleet-", dir=a.dir)
    rows, points, dask_rows = [], [], []
    try:
        ring_path = os.path.join(work, "fleet.keys")
        es.new_fleet_key(ring_path)
        ring = es.load_keyring(ring_path)
        frame = template(ring)
        one = os.path.join(work, "one.db")
        build_store(one, frame, ring, 1)
        startup = measure(assemble_cmd(one, os.path.join(work, "one.bin")))["cpu"]  # imports, open, growth
        ref = None
        for n in sizes:
            store = os.path.join(work, "s%d.db" % n)
            build_s = build_store(store, frame, ring, n)
            size = os.path.getsize(store)
            gen = os.path.join(work, "g%d.bin" % n)
            r = measure(assemble_cmd(store, gen))
            points.append((n, r["cpu"] - startup))
            rows.append([n, "%.0f" % build_s, "%.2f GB" % (size / 1e9), "%.1f" % r["wall"], "%.1f" % r["cpu"],
                         "%.0f MiB" % (r["rss_kib"] / 1024), "%.0f" % (n / r["wall"])])
            print(rows[-1], flush=True)
            if n == a.dask_at:
                ref = open(gen, "rb").read()
                for w in (1, 2):
                    g = os.path.join(work, "g%d-w%d.bin" % (n, w))
                    d = measure(assemble_cmd(store, g, "--workers", str(w)))
                    same = open(g, "rb").read() == ref
                    dask_rows.append([n, w, "%.1f" % d["wall"], "%.1f" % d["cpu"], "%.1f" % r["wall"],
                                      "%.2f" % (d["wall"] / r["wall"]), "yes" if same else "NO"])
                    print(dask_rows[-1], flush=True)
            os.unlink(store)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    slope = exponent(points)
    text = ("Before (issue 16, the list of Releases: fetchall, ~114 KiB a frame): 10^3 frames 0.9 s / "
            "194 MiB, 10^4 3.0 s / 1.19 GiB, 10^5 40 s / 11.2 GiB (wall / peak RSS of `assemble --store`).\n\n"
            "One-frame devices (29 KB tagged frames of a 32 KiB C-runtime PrivHP config), `edgesynth "
            "assemble --store S -o G` as its own process: wall, CPU (user + system) and peak RSS of that "
            "process. Build: the store made from re-tagged copies of one genuine frame (put_many, batches "
            "of %d; not the measure). Shared 2-core AMD EPYC, 24 GiB; other helpers ran at the same time.\n\n"
            % BATCH + md_table(["frames", "store build (s)", "store size", "assemble wall (s)", "assemble CPU (s)",
                                "peak RSS", "frames/s"], rows)
            + "\n\nFitted exponent of CPU time in the frame count (least squares on log-log over %s frames, "
              "of the CPU above a one-frame store's %.2f s of start-up, imports and tree growth): **%.3f** "
              "(1 = linear).\n" % (", ".join(str(n) for n, _ in points), startup, slope))
    if dask_rows:
        text += ("\nDask (`--workers N`: a local cluster of N worker processes, each streaming a device range "
                 "of the store; partial merges combined pairwise), side by side with the single-process run "
                 "above; CPU counts every process of the cluster:\n\n"
                 + md_table(["frames", "workers", "wall (s)", "CPU (s)", "single-process wall (s)",
                             "wall ratio", "generator identical"], dask_rows) + "\n")
    print(text)
    if not a.no_append:
        results_append(text, title="bench_fleet_assemble.py", elapsed=time.monotonic() - t_start)


def exponent(points):
    """Slope of log(cpu) against log(frames)."""
    if len(points) < 2:
        return float("nan")
    x = np.log([n for n, _ in points])
    y = np.log([max(c, 1e-3) for _, c in points])
    return float(np.polyfit(x, y, 1)[0])


if __name__ == "__main__":
    main()
