"""The ingest store: durability settings, the store rules, conflicts, who may
create or write a store, and the CLI's acks and exit codes."""
import hashlib
import json
import os
import random
import sqlite3

import pytest
from click.testing import CliRunner

from edgesynth.cli import main
from edgesynth.fleet.store import APPLICATION_ID, CONFLICT, DUPLICATE, SCHEMA_VERSION, STORED, Store, StoreError
from edgesynth.frames import parse_frame


def run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def rel(buf):
    return parse_frame(buf)[0]


def digest(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def test_store_is_marked_wal_with_full_sync_and_readers_are_read_only(tmp_path):
    db = str(tmp_path / "s.db")
    with pytest.raises(StoreError, match="no such store"):
        Store(db)                                  # reading never creates
    assert not os.path.exists(db)
    with Store(db, create=True) as st:
        assert st.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert st.db.execute("PRAGMA synchronous").fetchone()[0] == 2   # FULL
        assert st.db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert st.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    before = digest(db)
    with Store(db) as st:
        assert st.stats()["frames"] == 0
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            st.db.execute("CREATE TABLE x (y)")
    assert digest(db) == before


def test_out_of_order_frames_are_stored_and_conflicts_kept_aside(env):
    tmp, ring, keys, frame = env
    with Store(str(tmp / "s.db"), create=True) as st:
        assert st.put(rel(frame("a", 5, 5))) == STORED
        assert [st.put(rel(frame("a", e, e))) for e in range(5)] == [STORED] * 5   # older epochs, later
        assert st.put(rel(frame("a", 1, 1))) == DUPLICATE                        # an exact resend
        other = rel(frame("a", 3, 3, seed=b"other"))                             # epoch 3 noised again
        assert st.put(other) == CONFLICT and st.put(other) == CONFLICT
        assert st.put(rel(frame("a", 3, 9))) == CONFLICT                         # epoch 3 under another seq
        assert st.put(rel(frame("b", 0, 0))) == STORED
        s = st.stats()
        assert (s["frames"], s["devices"], s["conflicts"]) == (7, 2, 2)
        assert sorted(st.keys()) == [("a", e, e) for e in range(6)] + [("b", 0, 0)]
        assert [c[:3] for c in st.conflicts()] == sorted([("a", 3, 3), ("a", 3, 9)])
        got = st.releases(devices=["a"])
        assert [r.epoch for r in got] == list(range(6))
        assert got[3].raw == frame("a", 3, 3) and other.raw not in [r.raw for r in got]


def test_ingest_cli_acks_conflicts_rejects_and_exit_codes(env):
    tmp, ring, keys, frame = env
    good = tmp / "good.bin"
    good.write_bytes(frame("a", 0, 0) + frame("a", 1, 1) + frame("b", 0, 0))
    db = tmp / "s.db"
    code, out, err = run("ingest", good, "--store", db, "--keyring", ring)
    assert code == 0, err
    assert out.splitlines() == ["ack %s frame 0 a 0 0 stored" % good, "ack %s frame 1 a 1 1 stored" % good,
                                "ack %s frame 2 b 0 0 stored" % good]
    code, out, err = run("ingest", good, "--store", db, "--keyring", ring)
    assert code == 0 and out.count("duplicate") == 3
    forged = bytearray(frame("a", 5, 5))
    forged[-1] ^= 1
    bad = tmp / "bad.bin"
    bad.write_bytes(frame("a", 0, 0, seed=b"x") + bytes(forged) + frame("a", 6, 6) + b"\x94\xa4ESF1\xa1")
    code, out, err = run("ingest", bad, "--store", db, "--keyring", ring)
    lines = [l for l in err.splitlines() if l.startswith(str(bad))]
    assert code == 2 and len(lines) == 3, err
    assert "frame 0: conflict" in lines[0] and "kept aside" in lines[0]
    assert "frame 1: tag of the frame" in lines[1] and "frame 3: frame truncated" in lines[2]
    assert out.splitlines() == ["ack %s frame 2 a 6 6 stored" % bad]
    assert "1 stored, 0 duplicate(s), 1 conflict(s), 2 rejected" in err
    code, out, err = run("store", "stats", "--store", db, "--json")
    s = json.loads(out)
    assert code == 0 and (s["frames"], s["devices"], s["conflicts"]) == (4, 2, 1)
    assert [(c["device"], c["epoch"]) for c in s["conflict_frames"]] == [("a", 0)]
    code, out, err = run("store", "stats", "--store", db)
    assert code == 0 and "1 conflict(s)" in out and "conflict: device a epoch 0 seq 0" in out


def test_assemble_from_store_filters(env, make_config):
    tmp, ring, keys, frame = env
    db = str(tmp / "s.db")
    other_cfg = make_config(d=1, r=4, k=4, w=4, j=1, hash_seed="another")
    with Store(db, create=True) as st:
        for e in range(3):
            st.put(rel(frame("a", e, e)))
        st.put(rel(frame("b", 0, 0, cfg=other_cfg)))
        ids = sorted(st.stats()["configs"])
    code, out, err = run("assemble", "--store", db, "-o", tmp / "g.bin")
    assert code == 2 and "2 configurations" in err
    code, out, err = run("assemble", "--store", db, "--device", "a", "-o", tmp / "g.bin", "--json")
    assert code == 0 and json.loads(out)["frames"] == 3, err
    cid = [i for i in ids if i != json.loads(out)["config_id"]][0]
    code, out, err = run("assemble", "--store", db, "--config-hash", cid, "--json")
    assert code == 0 and json.loads(out)["devices"] == ["b"]
    code, out, err = run("assemble", "--store", db, "--device", "zz")
    assert code == 2 and "no stored frames" in err
    code, out, err = run("assemble", tmp / "x.bin", "--store", db)
    assert code == 2 and "not both" in err


def _foreign_files(tmp):
    """Files at a store path that no command may touch: another program's
    SQLite databases (rollback journal and WAL), an empty file, random bytes,
    and a truncated store."""
    files = {}
    for mode in ("delete", "wal"):
        path = str(tmp / ("other-%s.db" % mode))
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("PRAGMA journal_mode=%s" % mode)
        db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        db.execute("INSERT INTO notes (body) VALUES ('not frames')")
        db.close()
        files["sqlite-" + mode] = path
    files["empty"] = str(tmp / "empty.db")
    open(files["empty"], "wb").close()
    files["random"] = str(tmp / "random.db")
    with open(files["random"], "wb") as fh:
        fh.write(random.Random(4).randbytes(8192))
    files["truncated"] = str(tmp / "truncated.db")
    with Store(files["truncated"], create=True):
        pass
    with open(files["truncated"], "r+b") as fh:
        fh.truncate(50)
    return files


def test_foreign_empty_or_damaged_files_are_refused_and_left_byte_for_byte(env):
    tmp, ring, keys, frame = env
    (tmp / "f.bin").write_bytes(frame("a", 0, 0))
    for name, path in _foreign_files(tmp).items():
        before, listing = digest(path), sorted(os.listdir(tmp))
        for args in (("store", "stats", "--store", path), ("assemble", "--store", path, "-o", tmp / "g.bin"),
                     ("ingest", tmp / "f.bin", "--store", path, "--keyring", ring)):
            code, out, err = run(*args)
            assert code == 2 and err.startswith("error: %s: " % path) and "store" in err, (name, args, err)
            assert "internal error" not in err and len(err.splitlines()) == 1
        assert digest(path) == before, name
        assert sorted(os.listdir(tmp)) == listing, name     # no -wal/-shm or store created beside it
    code, out, err = run("store", "stats", "--store", tmp / "empty.db")
    assert "empty file" in err and "restore it from a backup" in err
    code, out, err = run("store", "stats", "--store", tmp / "other-wal.db")
    assert "without the edgesynth store mark" in err


def test_empty_store_file_does_not_accept_a_renoised_released_window(env):
    """The audit's path: a store truncated to 0 bytes read as empty, so a
    re-noised frame of an already released window was stored as new."""
    tmp, ring, keys, frame = env
    db = tmp / "s.db"
    (tmp / "f.bin").write_bytes(frame("a", 0, 0))
    assert run("ingest", tmp / "f.bin", "--store", db, "--keyring", ring)[0] == 0
    db.write_bytes(b"")
    (tmp / "again.bin").write_bytes(frame("a", 0, 0, seed=b"renoised"))
    code, out, err = run("ingest", tmp / "again.bin", "--store", db, "--keyring", ring)
    assert code == 2 and out == "" and "empty file" in err
    assert db.read_bytes() == b""


def test_store_survives_an_open_transaction_dying(env):
    """A writer that dies mid-transaction leaves no partial row (rolled back on reopen)."""
    tmp, ring, keys, frame = env
    db = str(tmp / "s.db")
    with Store(db, create=True) as st:
        st.put(rel(frame("a", 0, 0)))
    raw = sqlite3.connect(db, isolation_level=None)
    raw.execute("BEGIN IMMEDIATE")
    raw.execute("INSERT INTO frames VALUES ('a', 9, 9, 'x', 'y', x'00')")
    del raw  # never committed
    with Store(db) as st:
        assert list(st.keys()) == [("a", 0, 0)]


def test_a_schema_1_store_is_named_and_migrated_without_losing_a_frame(env):
    """Stores of the previous release (no application id, a meta table) are not
    foreign files: they are refused by name, left as they were, and `store
    migrate` copies every frame into a new store."""
    tmp, ring, keys, frame = env
    old = tmp / "old.db"
    db = sqlite3.connect(old)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript("CREATE TABLE meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);"
                     "CREATE TABLE frames (device TEXT NOT NULL, epoch INTEGER NOT NULL, seq INTEGER NOT NULL, "
                     "digest TEXT NOT NULL, config_id TEXT NOT NULL, raw BLOB NOT NULL, "
                     "PRIMARY KEY (device, epoch, seq));")
    frames = [frame(dev, e, e) for dev in ("a", "b") for e in range(3)]
    with db:
        db.execute("INSERT INTO meta VALUES ('schema', '1')")
        db.executemany("INSERT INTO frames VALUES (?, ?, ?, '', '', ?)",
                       [(parse_frame(f)[0].device, parse_frame(f)[0].epoch, parse_frame(f)[0].seq, f) for f in frames])
    db.close()
    before = digest(old)
    code, _, err = run("store", "stats", "--store", old)
    assert code == 2 and "schema 1" in err and "store migrate" in err, err
    code, out, err = run("store", "migrate", old, "--to", tmp / "new.db", "--keyring", ring)
    assert code == 0 and "6 stored" in err and out.count("stored") == 6, err
    assert digest(old) == before
    with Store(str(tmp / "new.db")) as st:
        assert sorted(bytes(r.raw) for r in st.releases()) == sorted(frames)
    code, _, err = run("store", "migrate", tmp / "new.db", "--to", tmp / "x.db", "--keyring", ring)
    assert code == 2 and "not an edgesynth store of schema 1" in err and not (tmp / "x.db").exists()
