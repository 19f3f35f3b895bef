"""`edgesynth ingest` rate at fleet scale (issue target: >= 5,000 frames/s of ~29 KB
frames into SQLite with group commit on this machine).

The frames: one 32 KiB C-runtime PrivHP config (es.plan, 2-D), one frame
simulated, then re-tagged for each device id ``dev-NNNNNNN`` under a fleet
keyring (es.new_fleet_key: each device's key derived from the master): the
payload's device id is replaced in place (same length, so the msgpack stays
canonical) and the HMAC-SHA256 tag recomputed, exactly what the device would
send. One frame per device, one file per frame, in a spool directory.

Each mode runs the real CLI in a fresh process over the directory into a new
store (`edgesynth ingest SPOOL --store S --keyring K --jobs N`, acks to
/dev/null), side by side and interleaved over rounds, timed by wall clock and
by the CPU of the process and its workers (wait4 rusage); every run must
store every frame. Modes:

* old path: one transaction (one fsync) per frame, as before group commit
  (the same code with BATCH_FRAMES = 1), --jobs 1, into a store of 4 KiB
  pages (SQLite's default, what stores had before), on ``--old-frames``;
* group commit --jobs 1 (verification in the ingest process), 4 KiB pages;
* group commit --jobs 1, 8 KiB pages (new stores);
* group commit --jobs 2 (verification in two worker processes), 8 KiB pages.

"Where the time goes" is measured in this process over the same frames,
stage by stage: reading the files, splitting the envelopes, verify (HMAC +
bounded decode + digest), the store's put_many in 256-frame batches, and the
ack lines.

    python3 benchmarks/bench_ingest_rate.py [--frames 20000] [--old-frames 2000] [--rounds 2] [--no-append]
"""
import argparse
import hashlib
import hmac
import io
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402  (puts the repository root on sys.path)
import numpy as np  # noqa: E402

import edgesynth as es  # noqa: E402
from edgesynth.fleet import store as store_mod  # noqa: E402
from edgesynth.fleet.framefiles import file_frames  # noqa: E402
from edgesynth.fleet.ingest import BATCH_FRAMES, Report  # noqa: E402
from edgesynth.fleet.store import STORED, Store  # noqa: E402
from edgesynth.fleet.verify import Verified, check  # noqa: E402
from edgesynth.frames import split_envelope  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAD = b"\x94\xa4ESF1"   # the envelope: array of 4, the magic string
OLD_PATH = ("import sys, edgesynth.fleet.ingest as m; m.BATCH_FRAMES = 1; from edgesynth.cli import main; "
            "sys.argv[0] = 'edgesynth'; main()")


def device(i):
    return "dev-%07d" % i


def template_frame():
    """One tagged frame of a 32 KiB C-runtime PrivHP device (2-D), and its plan."""
    cfg = es.plan({"temp": (0, 110), "humid": (0, 100)}, epsilon=1, ram="32K", device_runtime="c",
                  hash_seed="bench-ingest")
    data = np.random.default_rng(0).random((5000, 2)) * (110, 100)
    return es.simulate(cfg, data, seed=1, device_id=device(0)), cfg


def retagger(template, ring):
    """frame(i): the template as device i would send it, tagged under its key."""
    dev0, start, end, _, _ = split_envelope(template)
    payload = template[start:end]
    name = b"\xab" + dev0.encode()               # msgpack fixstr of 11 bytes
    at = payload.index(name) + 1
    assert payload.count(name) == 1

    def frame(i):
        dev = device(i).encode()
        p = payload[:at] + dev + payload[at + len(dev):]
        body = HEAD + bytes([0xA0 | len(dev)]) + dev + b"\xc6" + struct.pack(">I", len(p)) + p
        return body + b"\xc4\x20" + hmac.new(ring.key_for(dev.decode()), body, hashlib.sha256).digest()
    return frame


def write_spool(directory, n, frame):
    os.makedirs(directory)
    for i in range(n):
        with open(os.path.join(directory, "%s.bin" % device(i)), "wb") as fh:
            fh.write(frame(i))


def small_page_store(path):
    """An empty store of 4 KiB pages, as stores were made before 8 KiB pages."""
    schema = store_mod._SCHEMA
    store_mod._SCHEMA = schema.replace("PRAGMA page_size = 8192;", "")
    try:
        with Store(path, create=True) as st:
            assert st.db.execute("PRAGMA page_size").fetchone()[0] == 4096
    finally:
        store_mod._SCHEMA = schema


def run_ingest(spool, store, ring, jobs, old=False):
    """(wall s, CPU s of the process and its workers, peak RSS MiB) of one CLI run."""
    args = ["ingest", spool, "--store", store, "--keyring", ring, "--jobs", str(jobs)]
    cmd = [sys.executable, "-c", OLD_PATH] + args if old else [sys.executable, "-m", "edgesynth"] + args
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read()
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit("ingest failed (%d): %s" % (proc.returncode, err.decode()[-2000:]))
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024


def stages(spool, n, ring, directory):
    """Seconds per frame of each stage of ingest, measured one after the other in this process."""
    keyring = es.load_keyring(ring)
    names = sorted(os.path.join(spool, f) for f in os.listdir(spool))[:n]
    out = {}
    t0 = time.perf_counter()
    blobs = []
    for name in names:
        with open(name, "rb") as fh:
            blobs.append(fh.read())
    out["read the files (open + read, 1 per frame)"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for b in blobs:
        split_envelope(b)
        bytes(memoryview(b)[:])
    out["split the envelope, copy the frame"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    fields = [check(b, keyring.key_for) for b in blobs]
    out["verify: HMAC + bounded decode + schema + payload digest (parse_frame)"] = time.perf_counter() - t0
    rels = [Verified(b, f) for b, f in zip(blobs, fields)]
    db = os.path.join(directory, "stages.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.unlink(db + suffix)
    with Store(db, create=True) as st:
        t0 = time.perf_counter()
        results = []
        for i in range(0, n, BATCH_FRAMES):
            results += st.put_many(rels[i:i + BATCH_FRAMES])
        out["store: put_many, %d frames per transaction (one fsync)" % BATCH_FRAMES] = time.perf_counter() - t0
    assert results == [STORED] * n
    sink = io.StringIO()
    t0 = time.perf_counter()
    for i, (name, r) in enumerate(zip(names, rels)):
        sink.write(Report(name, 0, STORED, r).text() + "\n")
    out["ack line (Report.text)"] = time.perf_counter() - t0
    assert sum(1 for _ in file_frames(names[0])) == 1
    return {k: v / n for k, v in out.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=20000)
    ap.add_argument("--old-frames", type=int, default=2000, help="frames of the old path (1 fsync each)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--keep", default=None, help="build the spool here and keep it (default: a temporary dir)")
    ap.add_argument("--no-append", action="store_true")
    a = ap.parse_args()
    t_start = time.monotonic()
    work = a.keep or tempfile.mkdtemp(prefix="edgesynth-ingest-rate-", dir=os.environ.get("TMPDIR"))
    os.makedirs(work, exist_ok=True)
    try:
        ring = os.path.join(work, "ring.json")
        if not os.path.exists(ring):
            es.new_fleet_key(ring)
        keyring = es.load_keyring(ring)
        template, cfg = template_frame()
        frame = retagger(template, keyring)
        spool, old_spool = os.path.join(work, "spool"), os.path.join(work, "spool-old")
        if not os.path.isdir(spool):
            write_spool(spool, a.frames, frame)
            write_spool(old_spool, a.old_frames, frame)
        size = len(frame(0))
        modes = [("old path: a transaction per frame, 4 KiB pages, --jobs 1", old_spool, a.old_frames, 1, True, True),
                 ("group commit, 4 KiB pages, --jobs 1", spool, a.frames, 1, False, True),
                 ("group commit, 8 KiB pages, --jobs 1", spool, a.frames, 1, False, False),
                 ("group commit, 8 KiB pages, --jobs 2", spool, a.frames, 2, False, False)]
        got = {m[0]: [] for m in modes}
        empty = os.path.join(work, "empty")
        os.makedirs(empty, exist_ok=True)
        startup = []
        for rnd in range(a.rounds):
            startup.append(run_ingest(empty, os.path.join(work, "empty.db"), ring, 1)[:2])
            for name, sp, n, jobs, old, small in modes:
                db = os.path.join(work, "run.db")
                if small:
                    small_page_store(db)
                wall, cpu, rss = run_ingest(sp, db, ring, jobs, old)
                with Store(db) as st:
                    assert st.count() == n, (name, st.count())
                got[name].append((wall, cpu, rss, os.path.getsize(db)))
                for suffix in ("", "-wal", "-shm"):
                    if os.path.exists(db + suffix):
                        os.unlink(db + suffix)
                print("round %d: %s: %.2f s wall, %.2f s CPU" % (rnd, name, wall, cpu), file=sys.stderr)
        start_wall = float(np.median([w for w, _ in startup]))
        start_cpu = float(np.median([c for _, c in startup]))
        rows = []
        base = None
        for name, sp, n, jobs, old, small in modes:
            wall = float(np.median([g[0] for g in got[name]]))
            cpu = float(np.median([g[1] for g in got[name]]))
            rate = n / wall
            base = base or rate
            rows.append([name, n, "%.2f" % wall, "%.2f" % cpu, "%.0f" % rate, "%.1fx" % (rate / base),
                         "%.0f" % (n / (wall - start_wall)), "%.0f" % ((cpu - start_cpu) / n * 1e6),
                         "%.0f" % max(g[2] for g in got[name]), "%.0f" % (got[name][0][3] / 2 ** 20)])
        per = stages(spool, min(a.frames, 4000), ring, work)
        total = sum(per.values())
        stage_rows = [[k, "%.0f" % (v * 1e6), "%.0f%%" % (100 * v / total)] for k, v in per.items()]
        stage_rows.append(["sum (one process, no overlap)", "%.0f" % (total * 1e6),
                           "%.0f frames/s" % (1 / total)])
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    text = ("Frames: %d bytes each (one 32 KiB C-runtime PrivHP config, 2-D, k=%d; one frame re-tagged per "
            "device id under a fleet keyring), one file per frame in a spool directory. Each run is the CLI "
            "in a fresh process into a new SQLite store (WAL, synchronous=FULL), acks to /dev/null; median "
            "of %d interleaved rounds; CPU = user + system of the process and its workers; frames/s = "
            "frames / wall (start-up included); start-up (the CLI over an empty directory: imports, "
            "keyring, store) took %.2f s wall, %.2f s CPU and is taken out of the two 'after start-up' "
            "columns.\n\n" % (size, cfg["mechanisms"][0]["k"], a.rounds, start_wall, start_cpu))
    text += C.md_table(["mode", "frames", "wall (s)", "CPU (s)", "frames/s", "vs old",
                        "frames/s after start-up", "CPU µs / frame after start-up", "peak RSS (MiB)",
                        "store (MiB)"], rows)
    text += ("\n\nWhere the time goes (one process, stages one after the other over %d of the frames):\n\n"
             % min(a.frames, 4000))
    text += C.md_table(["stage", "µs / frame", "share"], stage_rows)
    print(text)
    if not a.no_append:
        C.results_append(text, title="bench_ingest_rate.py", elapsed=time.monotonic() - t_start)


if __name__ == "__main__":
    main()
