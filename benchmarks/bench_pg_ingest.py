"""Store write rate, PostgreSQL vs SQLite, side by side in one run: ~29 KB
verified frames put through ``put_many`` in 256-frame transactions, by one
writer and by 2 concurrent writer processes.

The frames are bench_ingest_rate.py's: one 32 KiB C-runtime PrivHP config
(es.plan), one frame simulated, re-tagged per device id under a fleet keyring;
verified once up front (fleet/verify.check), which is not timed: this measures
the store, which is all that differs between the backends (verification is
the same code for both; bench_ingest_rate.py measures the whole ingest).

PostgreSQL is a throwaway server (tests/pg_server.py) on this machine with its
defaults (fsync on, synchronous_commit on), reached over TCP on 127.0.0.1;
SQLite is a file in WAL mode with synchronous=FULL, on the same disk. Each
round writes every mode into a new store; modes are interleaved over rounds
and the median is reported. CPU: this process (client) and, for PostgreSQL,
the server's processes (from /proc: the postmaster, its live children and the
children it reaped). Two writers: two forked processes, disjoint halves of the
devices, started together; wall time until both committed their last batch.

    python3 benchmarks/bench_pg_ingest.py [--frames 10000] [--rounds 2] [--no-append]
"""
import argparse
import multiprocessing
import os
import resource
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402  (puts the repository root on sys.path)
import numpy as np  # noqa: E402
from bench_ingest_rate import retagger, template_frame  # noqa: E402

import edgesynth as es  # noqa: E402
from edgesynth.fleet.backends import connect  # noqa: E402
from edgesynth.fleet.store import STORED  # noqa: E402
from edgesynth.fleet.verify import Verified, check  # noqa: E402
from tests.pg_server import Server  # noqa: E402

BATCH = 256
TICK = os.sysconf("SC_CLK_TCK")


def server_cpu(pid):
    """CPU seconds of the postmaster ``pid``, its live children and the children it reaped."""
    def stat(p):
        with open("/proc/%d/stat" % p) as fh:
            f = fh.read().rsplit(")", 1)[1].split()
        return int(f[1]), [int(x) for x in f[11:15]]   # ppid; utime, stime, cutime, cstime
    total = sum(stat(pid)[1])
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != pid:
            try:
                ppid, t = stat(int(d))
            except OSError:
                continue
            if ppid == pid:
                total += t[0] + t[1]
    return total / TICK


def client_cpu():
    """CPU seconds of this process and its reaped children (the forked writers)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def put_all(target, rels):
    """Write ``rels`` in BATCH-frame transactions into ``target``; put seconds."""
    with connect(target, create=True) as st:
        t0 = time.perf_counter()
        for i in range(0, len(rels), BATCH):
            assert st.put_many(rels[i:i + BATCH]) == [STORED] * len(rels[i:i + BATCH])
        return time.perf_counter() - t0


def _writer(target, rels, barrier, out):
    with connect(target, create=True) as st:
        barrier.wait(60)
        for i in range(0, len(rels), BATCH):
            st.put_many(rels[i:i + BATCH])
    out.put(time.perf_counter())


def put_two(target, rels):
    """Two forked writers, one half of ``rels`` each; wall seconds from the start to the last commit."""
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(3), ctx.Queue()
    half = len(rels) // 2
    procs = [ctx.Process(target=_writer, args=(target, part, barrier, out)) for part in (rels[:half], rels[half:])]
    for p in procs:
        p.start()
    barrier.wait(60)
    t0 = time.perf_counter()
    ends = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    return max(ends) - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-append", action="store_true")
    a = ap.parse_args()
    t_start = time.monotonic()
    work = tempfile.mkdtemp(prefix="edgesynth-pg-ingest-", dir=os.environ.get("TMPDIR"))
    srv = Server()
    try:
        ring = os.path.join(work, "ring.json")
        es.new_fleet_key(ring)
        keyring = es.load_keyring(ring)
        template, cfg = template_frame()
        frame = retagger(template, keyring)
        rels = []
        for i in range(a.frames):
            b = frame(i)
            rels.append(Verified(b, check(b, keyring.key_for)))
        size = len(rels[0].raw)
        modes = ["SQLite, 1 writer", "PostgreSQL, 1 writer", "SQLite, 2 writers", "PostgreSQL, 2 writers"]
        got = {m: [] for m in modes}
        for rnd in range(a.rounds):
            for m in modes:
                name = "r%d_%d" % (rnd, modes.index(m))
                pg = m.startswith("PostgreSQL")
                target = srv.database(name) if pg else os.path.join(work, name + ".db")
                cpu0, srv0 = client_cpu(), server_cpu(srv.proc.pid)
                wall = (put_two if "2 writers" in m else put_all)(target, rels)
                cpu = client_cpu() - cpu0
                with connect(target) as st:
                    assert st.count() == a.frames
                    store_bytes = (st.db.execute("SELECT pg_total_relation_size('frames')").fetchone()[0]
                                   if pg else None)
                time.sleep(0.2)  # the backends exit; the postmaster reaps them (their CPU joins its cutime)
                server = server_cpu(srv.proc.pid) - srv0 if pg else 0.0
                if not pg:
                    store_bytes = sum(os.path.getsize(target + s) for s in ("", "-wal") if os.path.exists(target + s))
                    for s in ("", "-wal", "-shm"):
                        if os.path.exists(target + s):
                            os.unlink(target + s)
                else:
                    with srv.admin() as db:
                        db.execute('DROP DATABASE "%s"' % name)
                got[m].append((wall, cpu, server, store_bytes))
                print("round %d: %s: %.2f s, %.0f frames/s" % (rnd, m, wall, a.frames / wall), file=sys.stderr)
    finally:
        srv.stop()
        shutil.rmtree(work, ignore_errors=True)
    rows, base = [], {}
    for m in modes:
        wall = float(np.median([g[0] for g in got[m]]))
        rate = a.frames / wall
        base.setdefault(m.split(",")[1], rate)
        rows.append([m, a.frames, "%.2f" % wall, "%.0f" % rate, "%.2fx" % (rate / base[m.split(",")[1]]),
                     "%.0f" % (float(np.median([g[1] for g in got[m]])) / a.frames * 1e6),
                     "%.0f" % (float(np.median([g[2] for g in got[m]])) / a.frames * 1e6) if m[0] == "P" else "-",
                     "%.0f" % (got[m][0][3] / 2 ** 20)])
    text = ("Frames: %d bytes each (32 KiB C-runtime PrivHP config, k=%d, re-tagged per device id), verified "
            "before timing; `put_many` of %d frames per transaction; every frame stored. SQLite: WAL, "
            "synchronous=FULL. PostgreSQL %s: a local server with its defaults (fsync on, "
            "synchronous_commit on) over TCP 127.0.0.1, on the same disk. Median of %d interleaved rounds; "
            "'vs SQLite' compares the same number of writers; client CPU is the writing process(es)', "
            "server CPU the PostgreSQL processes'; store = the SQLite file (+ WAL) or the frames table with "
            "its TOAST and index.\n\n" % (size, cfg["mechanisms"][0]["k"], BATCH, srv.version, a.rounds))
    text += C.md_table(["store, writers", "frames", "wall (s)", "frames/s", "vs SQLite", "client CPU µs / frame",
                        "server CPU µs / frame", "store (MiB)"], rows)
    print(text)
    if not a.no_append:
        C.results_append(text, title="bench_pg_ingest.py", elapsed=time.monotonic() - t_start)


if __name__ == "__main__":
    main()
