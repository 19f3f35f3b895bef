"""The ingest store: durability settings, replay rules, the CLI's acks and exit codes."""
import json
import sqlite3

import pytest
from click.testing import CliRunner

import agent
from host_tools.cli import main
from host_tools.frames import parse_frame
from host_tools.keys import load, new_key
from host_tools.store import DUPLICATE, STORED, Rejected, Store


def run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture
def env(tmp_path, make_config):
    ring = str(tmp_path / "ring.json")
    for dev in ("a", "b"):
        new_key(ring, dev)
    keys = load(ring)
    cfg = make_config(d=1, r=4, k=16, w=4, j=1)

    def frame(dev, epoch, seq, seed=b"s", n=10, cfg=cfg):
        a = agent.Agent(cfg, seed=b"%s-%d-%d-%s" % (dev.encode(), epoch, seq, seed), device_id=dev,
                        epoch=epoch, seq=seq, key=keys.require(dev))
        for i in range(n):
            a.update((i / n,))
        return bytes(a.release())

    return tmp_path, ring, keys, frame


def rel(buf):
    return parse_frame(buf)[0]


def test_store_is_wal_with_full_sync(tmp_path):
    with Store(str(tmp_path / "s.db")) as st:
        assert st.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert st.db.execute("PRAGMA synchronous").fetchone()[0] == 2   # FULL
    with pytest.raises(Exception, match="no such store"):
        Store(str(tmp_path / "missing.db"), create=False)
    (tmp_path / "junk.db").write_bytes(b"not sqlite" * 100)
    with pytest.raises(Exception, match="not a usable"):
        Store(str(tmp_path / "junk.db"))


def test_replay_rules(env):
    tmp, ring, keys, frame = env
    with Store(str(tmp / "s.db")) as st:
        f1, f3 = frame("a", 1, 1), frame("a", 3, 3)
        assert st.put(rel(f1)) == STORED and st.put(rel(f3)) == STORED
        assert st.put(rel(f1)) == DUPLICATE                         # old but identical: a resend
        with pytest.raises(Rejected, match="conflict"):
            st.put(rel(frame("a", 3, 3, seed=b"other")))            # same key, other noise
        with pytest.raises(Rejected, match="replay or rollback"):
            st.put(rel(frame("a", 2, 2)))                            # older seq, never seen
        with pytest.raises(Rejected, match="released once"):
            st.put(rel(frame("a", 3, 4)))                            # second frame for epoch 3
        assert st.put(rel(frame("b", 1, 1))) == STORED              # sequences are per device
        assert st.put(rel(frame("a", 4, 5))) == STORED
        assert st.stats()["frames"] == 4 and st.stats()["devices"] == 2
        assert sorted(st.keys()) == [("a", 1, 1), ("a", 3, 3), ("a", 4, 5), ("b", 1, 1)]


def test_ingest_cli_acks_rejects_and_exit_codes(env):
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
    assert "frame 0: conflict" in lines[0] and "frame 1: tag of the frame" in lines[1]
    assert "frame 3: frame truncated" in lines[2]
    assert out.splitlines() == ["ack %s frame 2 a 6 6 stored" % bad]
    code, out, err = run("store", "stats", "--store", db, "--json")
    s = json.loads(out)
    assert code == 0 and s["frames"] == 4 and s["devices"] == 2


def test_assemble_from_store_filters(env, make_config):
    tmp, ring, keys, frame = env
    db = str(tmp / "s.db")
    other_cfg = make_config(d=1, r=4, k=4, w=4, j=1, hash_seed="another")
    with Store(db) as st:
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


def test_store_survives_an_open_transaction_dying(env):
    """A writer that dies mid-transaction leaves no partial row (rolled back on reopen)."""
    tmp, ring, keys, frame = env
    db = str(tmp / "s.db")
    with Store(db) as st:
        st.put(rel(frame("a", 0, 0)))
    raw = sqlite3.connect(db, isolation_level=None)
    raw.execute("BEGIN IMMEDIATE")
    raw.execute("INSERT INTO frames VALUES ('a', 9, 9, 'x', 'y', x'00')")
    del raw  # never committed
    with Store(db) as st:
        assert list(st.keys()) == [("a", 0, 0)]
