"""`edgesynth ingest`: any delivery order and concurrent runs store every frame
exactly once; a store that cannot be written stops the run with a report of
what is safe; names cannot forge ack lines; --json gives one object per frame."""
import json
import os
import random
import sqlite3
import subprocess
import sys

import pytest

from edgesynth.fleet.store import Store
from tests.test_store import run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def acks(out):
    """[(device, epoch, seq, result)] of the ack lines of a text run."""
    return [(p[4], int(p[5]), int(p[6]), p[7]) for p in (l.split() for l in out.splitlines()) if p[0] == "ack"]


def test_shuffled_delivery_with_resends_stores_every_frame_once(env):
    tmp, ring, keys, frame = env
    frames = {(d, e): frame(d, e, e) for d in ("a", "b") for e in range(10)}
    order = list(frames) * 2                      # every frame delivered twice
    random.Random(5).shuffle(order)
    f = tmp / "shuffled.bin"
    f.write_bytes(b"".join(frames[k] for k in order))
    code, out, err = run("ingest", f, "--store", tmp / "s.db", "--keyring", ring)
    assert code == 0, err
    got = acks(out)
    assert len(got) == 40
    assert sorted((d, e) for d, e, s, r in got if r == "stored") == sorted(frames)
    assert sum(r == "duplicate" for *_, r in got) == 20
    with Store(str(tmp / "s.db")) as st:
        assert sorted((d, e) for d, e, s in st.keys()) == sorted(frames)


def test_concurrent_ingests_of_overlapping_sets_store_every_frame_once(env):
    """Four `edgesynth ingest` processes (gateways) race on one new store, each
    with an overlapping, shuffled share of the fleet's frames."""
    tmp, ring, keys, frame = env
    frames = {(d, e): frame(d, e, e) for d in ("a", "b") for e in range(24)}
    rng = random.Random(11)
    shares = [[] for _ in range(4)]
    for k in frames:
        for g in rng.sample(range(4), rng.choice((2, 3))):
            shares[g].append(k)
    files = []
    for g, share in enumerate(shares):
        rng.shuffle(share)
        files.append(tmp / ("gw-%d.bin" % g))
        files[-1].write_bytes(b"".join(frames[k] for k in share))
    db = str(tmp / "fleet.db")
    env_vars = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = [subprocess.Popen([sys.executable, "-m", "edgesynth.cli", "ingest", str(f), "--store", db,
                               "--keyring", ring], cwd=ROOT, env=env_vars, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for f in files]
    outs = [p.communicate() for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [e for _, e in outs]
    got = [a for out, _ in outs for a in acks(out)]
    assert len(got) == sum(len(s) for s in shares)                 # every delivery acknowledged
    stored = sorted((d, e) for d, e, s, r in got if r == "stored")
    assert stored == sorted(frames)                                # each frame stored by exactly one run
    with Store(db) as st:
        assert sorted((d, e) for d, e, s in st.keys()) == sorted(frames) and st.stats()["conflicts"] == 0


class FullOnCommit:
    """A connection whose COMMIT fails as on a full disk after ``ok`` good
    commits: SQLite rolls the transaction back itself, then reports SQLITE_FULL."""

    def __init__(self, db, ok):
        self._db, self.ok = db, ok

    def execute(self, sql, *args):
        if sql == "COMMIT":
            if self.ok == 0:
                self._db.execute("ROLLBACK")
                raise sqlite3.OperationalError("database or disk is full")
            self.ok -= 1
        return self._db.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self._db, name)


def _limit_store(monkeypatch, limit):
    """Every Store the CLI opens gets ``limit(store)`` applied after opening."""
    real = Store.__init__

    def init(self, *args, **kw):
        real(self, *args, **kw)
        limit(self)
    monkeypatch.setattr(Store, "__init__", init)


@pytest.mark.parametrize("how", ["max_page_count", "failing_commit"])
def test_full_disk_stops_with_what_is_stored_and_loses_nothing(env, monkeypatch, how):
    tmp, ring, keys, frame = env
    frames = [frame("a", e, e, n=200) for e in range(40)]
    f = tmp / "many.bin"
    f.write_bytes(b"".join(frames))
    db = tmp / "s.db"
    with Store(str(db), create=True):
        pass
    if how == "max_page_count":   # the database may not grow: SQLITE_FULL, as on a full disk
        def limit(st):
            pages = st.db.execute("PRAGMA page_count").fetchone()[0]
            st.db.execute("PRAGMA max_page_count=%d" % (pages + 1))
    else:
        def limit(st):
            st.db = FullOnCommit(st.db, ok=7)
    with monkeypatch.context() as m:
        _limit_store(m, limit)
        m.setattr("edgesynth.fleet.ingest.BATCH_FRAMES", 2)   # several commits before the disk fills
        m.setattr("edgesynth.fleet.ingest.BATCH_SECONDS", 1e9)  # no commit by time: batches of exactly 2
        code, out, err = run("ingest", f, "--store", db, "--keyring", ring)
    first = acks(out)
    assert code == 2 and 0 < len(first) < 40 and "internal error" not in err, err
    assert len(first) % 2 == 0                                   # whole batches acknowledged, no part of one
    (line,) = [l for l in err.splitlines() if l.startswith("error:")]
    assert "frame %d: not stored" % len(first) in line and "database or disk is full" in line
    assert "none was lost" in line and "%d stored" % len(first) in line and "run the same command again" in line
    with Store(str(db)) as st:
        assert sorted(st.keys()) == sorted((d, e, s) for d, e, s, r in first)
    code, out, err = run("ingest", f, "--store", db, "--keyring", ring)          # space freed: carry on
    again = acks(out)
    assert code == 0 and len(again) == 40
    assert [r for *_, r in again] == ["duplicate"] * len(first) + ["stored"] * (40 - len(first))


def test_names_cannot_forge_ack_lines_and_json_gives_one_object_per_frame(env):
    tmp, ring, keys, frame = env
    name = tmp / "x\nack forged.bin frame 0 a 9 9 stored\n.bin"
    name.write_bytes(frame("a", 0, 0) + frame("b", 0, 0) + b"junk")
    code, out, err = run("ingest", name, "--store", tmp / "s.db", "--keyring", ring)
    assert code == 2 and len(out.splitlines()) == 2, out
    shown = str(name).replace("\n", "%0A").replace(" ", "%20")
    assert out.splitlines()[0] == "ack %s frame 0 a 0 0 stored" % shown
    assert err.splitlines()[0].startswith("%s: frame 2: " % shown)
    code, out, err = run("ingest", name, "--store", tmp / "s.db", "--keyring", ring, "--json")
    docs = [json.loads(l) for l in out.splitlines()]
    assert code == 2 and [(d["file"], d["frame"], d["device"], d["epoch"], d["result"]) for d in docs] == [
        (str(name), 0, "a", 0, "duplicate"), (str(name), 1, "b", 0, "duplicate"),
        (str(name), 2, None, None, "rejected")]
    assert "rest of the file skipped" in docs[2]["reason"]
