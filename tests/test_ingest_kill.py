"""kill -9 during `edgesynth ingest`: no acknowledged frame is ever lost.

``kill_campaign`` runs the real CLI in a subprocess over frame files, kills it
with SIGKILL at a random moment, then reopens the store and checks that it
passes SQLite's integrity check and holds every frame the killed process had
acknowledged (an ack line is written only after the frame's commit). Rounds of
kills reuse one store, so each restart also resumes on a store left by a kill;
each round ends with an uninterrupted run that must store everything. The
suite runs a few kills; benchmarks/kill_ingest.py runs >= 50 and records them.
"""
import os
import random
import signal
import subprocess
import sys
import threading
import time

from edgesynth import agent
from edgesynth.fleet.keys import load, new_key
from edgesynth.fleet.store import Store

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CFG = {"format": 1, "epsilon": [1, 1], "relation": "add-remove",
       "mechanisms": [{"kind": "privhp", "names": ["x"], "lo": [0], "hi": [1023], "r": 5, "k": 32, "w": 4,
                       "j": 1, "sketch": "cms", "hash_seed": "kill", "q": 12, "sigma": [2] * 6, "clamp_p": 0}]}


def make_frames(directory, devices=3, per_device=120):
    """Keyring and one frame file per device; returns (keyring path, files, n frames)."""
    ring = os.path.join(directory, "ring.json")
    for d in range(devices):
        new_key(ring, "dev-%d" % d)
    keys = load(ring)
    files = []
    for d in range(devices):
        dev = "dev-%d" % d
        path = os.path.join(directory, "%s.bin" % dev)
        with open(path, "wb") as fh:
            for e in range(per_device):
                a = agent.Agent(CFG, seed=b"kill-%d-%d" % (d, e), device_id=dev, epoch=e, seq=e,
                                key=keys.require(dev))
                a.update(((e * 37) % 1024,))
                fh.write(a.release())
        files.append(path)
    return ring, files, devices * per_device


def _ingest_cmd(files, db, ring):
    return [sys.executable, "-m", "edgesynth.cli", "ingest"] + files + ["--store", db, "--keyring", ring]


def _acked(lines):
    out = set()
    for line in lines:
        p = line.split()
        if len(p) == 8 and p[0] == "ack":
            out.add((p[4], int(p[5]), int(p[6])))
    return out


def _run_killed(cmd, delay):
    """Start ``cmd``, SIGKILL it after ``delay`` s; returns (ack lines, exited by itself)."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout))
    reader.start()
    try:
        proc.wait(timeout=delay)
        finished = True
    except subprocess.TimeoutExpired:
        finished = False
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    reader.join()
    return lines, finished


def check_store(db, acked):
    """Open the store as a fresh process would; returns the frames of
    ``acked`` it lacks (lost after an ack) and its keys."""
    with Store(db) as st:  # read-only, as `store stats` opens it
        assert st.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        keys = set(st.keys())
    return acked - keys, keys


def kill_campaign(directory, kills, seed=0, per_round=5, devices=3, per_device=120):
    """Run ``kills`` random SIGKILLs; returns a dict of figures (``lost``:
    acknowledged frames missing from the store after a kill). Raises
    AssertionError on an unusable store."""
    rng = random.Random(seed)
    ring, files, total = make_frames(directory, devices, per_device)
    # kill moments are uniform over [start-up, full run]: two uninterrupted
    # probe runs (an empty file, then every file) measure both ends
    empty = os.path.join(directory, "empty.bin")
    open(empty, "wb").close()
    t0 = time.monotonic()
    _run_killed(_ingest_cmd([empty], os.path.join(directory, "probe0.db"), ring), 600)
    startup = time.monotonic() - t0
    t0 = time.monotonic()
    lines, _ = _run_killed(_ingest_cmd(files, os.path.join(directory, "probe.db"), ring), 600)
    full = time.monotonic() - t0
    assert len(_acked(lines)) == total
    stats = {"kills": 0, "mid_ingest": 0, "acked": 0, "lost": 0, "frames": total, "full_run_s": full,
             "startup_s": startup}
    rnd = 0
    while stats["kills"] < kills:
        db = os.path.join(directory, "store-%d.db" % rnd)
        acked, lost = set(), set()
        for _ in range(min(per_round, kills - stats["kills"])):
            lines, finished = _run_killed(_ingest_cmd(files, db, ring), rng.uniform(startup, full))
            got = _acked(lines)
            acked |= got
            stats["kills"] += 0 if finished else 1
            stats["mid_ingest"] += 1 if got and not finished else 0
            if os.path.exists(db):
                lost |= check_store(db, acked)[0]
            else:
                assert not acked
        lines, finished = _run_killed(_ingest_cmd(files, db, ring), 600)
        assert finished and len(_acked(lines)) == total
        missing, keys = check_store(db, acked | _acked(lines))
        stats["lost"] += len(lost | missing)
        assert len(keys) == total
        stats["acked"] += len(acked)
        rnd += 1
    return stats


def test_kill_minus_9_loses_no_acknowledged_frame(tmp_path):
    # enough frames for ~20 group commits per run: a run lasts long enough for kills to land
    # between commits (with 120 frames, one batch, runs ended before most kills)
    s = kill_campaign(str(tmp_path), kills=6, seed=1, per_round=3, devices=2, per_device=2500)
    assert s["kills"] == 6 and s["lost"] == 0
    assert s["mid_ingest"] >= 3          # half the kills landed after an ack and before the end
