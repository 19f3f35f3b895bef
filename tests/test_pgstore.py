"""The PostgreSQL store against a real server (tests/pg_server.py): the SQLite
store's rules in any order, racing writers, the CLI on a postgresql:// URL
byte-identical to SQLite, the gateway, and one-line errors."""
import itertools
import multiprocessing
import os
import random
import re
import sys

import pytest

from edgesynth import agent
from edgesynth.errors import InputError, StoreError, StoreWriteError
from edgesynth.fleet import pgstore
from edgesynth.fleet.backends import connect
from edgesynth.fleet.store import CONFLICT, DUPLICATE, STORED, config_id_of
from edgesynth.frames import parse_frame
from tests.pg_server import PASSWORD, Server, binaries, free_port
from tests.test_store import run

psycopg = pytest.importorskip("psycopg", reason="psycopg 3 is not installed (pip install 'edgesynth[postgres]')")

KEY = bytes(range(32))
_names = itertools.count()


@pytest.fixture(scope="session")
def pg():
    if binaries() is None:
        pytest.skip("PostgreSQL server binaries not found (apt-get install postgresql; .ci/run installs it)")
    srv = Server(fsync=False)  # nothing here tests power loss; fsync off keeps the suite fast
    yield srv
    srv.stop()


@pytest.fixture
def url(pg):
    """A fresh, empty database on the session's server."""
    return pg.database("t%d_%d" % (os.getpid(), next(_names)))


@pytest.fixture
def cfg(make_config):
    return make_config(d=1, r=4, k=16, w=4, j=1)


def make_frame(cfg, dev, epoch, seed=b"s", n=10, key=KEY):
    a = agent.Agent(cfg, seed=b"%s-%d-%s" % (dev.encode(), epoch, seed), device_id=dev, epoch=epoch, seq=epoch,
                    key=key)
    for i in range(n):
        a.update((i / n,))
    return bytes(a.release())


def rel(buf):
    return parse_frame(buf)[0]


def state(st):
    """Everything a store holds, comparable across backends (the frames as frames() streams them)."""
    return st.stats(), st.keys(), st.conflicts(), list(st.frames())


def test_store_rules_in_any_order_match_sqlite(url, tmp_path, cfg):
    frames = [make_frame(cfg, d, e) for d in ("a", "b") for e in range(4)]
    others = [make_frame(cfg, "a", 2, seed=b"other"), make_frame(cfg, "b", 0, seed=b"other")]
    order = frames + frames[:3] + others + others[:1] + frames
    random.Random(3).shuffle(order)
    got = {}
    for target in (str(tmp_path / "s.db"), url):
        with connect(target, create=True) as st:
            got[target] = [st.put(rel(b)) for b in order]
            got[target] += st.put_many([rel(b) for b in frames[:2] + others[1:] + [frames[0]]])
            got[target].append(state(st))
    assert got[url] == got[str(tmp_path / "s.db")]
    results, (stats, keys, conflicts, raws) = got[url][:-1], got[url][-1]
    first = {}                                   # the rules: a window's first frame is its frame
    for b in order:
        first.setdefault((rel(b).device, rel(b).epoch), b)
    assert raws == [first[k] for k in sorted(first)] and results.count(STORED) == 8
    losers = set(order) - set(raws)              # conflicts, never read back
    assert (stats["frames"], stats["devices"], stats["conflicts"]) == (8, 2, len(losers)) and losers
    assert sorted(keys) == sorted((d, e, e) for d, e in first) and stats["bytes"] == sum(map(len, raws))
    assert sorted(c[:2] for c in conflicts) == sorted((rel(b).device, rel(b).epoch) for b in losers)
    with connect(url) as st:
        assert [r.raw for r in st.releases(devices=["a"])] == [first[k] for k in sorted(first) if k[0] == "a"]


def test_a_batch_with_repeats_follows_the_rules_frame_by_frame(url, cfg):
    x, y = make_frame(cfg, "z", 1), make_frame(cfg, "a", 9)
    x2 = make_frame(cfg, "z", 1, seed=b"again")
    with connect(url, create=True) as st:
        assert st.put_many([rel(b) for b in (x, x, x2, y, x2, y)]) == [STORED, DUPLICATE, CONFLICT, STORED,
                                                                       CONFLICT, DUPLICATE]
        assert st.count() == 2 and len(st.conflicts()) == 1


def test_marker_version_foreign_tables_and_read_only_readers(pg, url, cfg):
    with pytest.raises(StoreError, match="no edgesynth store in this database"):
        connect(url)                                          # a reader never creates
    with psycopg.connect(url, autocommit=True) as db:
        assert db.execute("SELECT to_regclass('frames')").fetchone()[0] is None
        db.execute("CREATE TABLE frames (x int)")             # somebody else's table
    for create in (True, False):
        with pytest.raises(StoreError, match="table\\(s\\) frames that edgesynth did not make"):
            connect(url, create=create)
    with psycopg.connect(url) as db:
        assert [c for (c,) in db.execute("SELECT column_name FROM information_schema.columns "
                                         "WHERE table_name='frames'")] == ["x"]   # left unchanged
    fresh = pg.database("fresh%d" % next(_names))
    with connect(fresh, create=True) as st:
        assert st.db.execute("SHOW synchronous_commit").fetchone()[0] == "on"
        st.put(rel(make_frame(cfg, "a", 0)))
    with connect(fresh) as st:
        assert st.count() == 1
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            st.db.execute("CREATE TABLE y (z int)")
    with psycopg.connect(fresh, autocommit=True) as db:
        db.execute("UPDATE edgesynth_store SET version = 99")
    for create in (True, False):
        with pytest.raises(StoreError, match="store schema 99, this edgesynth reads 1"):
            connect(fresh, create=create)


def _writer(target, frames, barrier, out):
    """A separate process: put ``frames`` in batches of 5 after the barrier; its results."""
    try:
        with connect(target, create=True) as st:
            barrier.wait(30)
            res = []
            for i in range(0, len(frames), 5):
                res += st.put_many([rel(b) for b in frames[i:i + 5]])
        out.put(res)
    except Exception as e:  # reported to the test, which fails on it
        out.put("%s: %s" % (type(e).__name__, e))


def _race(target, shares):
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(len(shares)), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(target, s, barrier, out)) for s in shares]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
    return results


def test_racing_writers_give_the_final_state_of_sqlite(url, tmp_path, cfg):
    """Three processes race on one store: the same 40 frames in opposite
    orders (batches that would deadlock if locks were taken in batch order)
    and two different noisings of 6 other windows. Each window is stored once,
    each second noising is a conflict, no writer errs, and the store holds
    what the SQLite store holds after the same race."""
    frames = [make_frame(cfg, "d%d" % d, e) for d in range(8) for e in range(5)]
    v1 = [make_frame(cfg, "d%d" % d, 7, seed=b"v1") for d in range(6)]
    v2 = [make_frame(cfg, "d%d" % d, 7, seed=b"v2") for d in range(6)]
    flipped = [b for i in range(0, 40, 5) for b in frames[i:i + 5][::-1]]   # each batch in the other order
    shares = [frames + v1, flipped + v2, frames[::-1][:20]]
    final = {}
    for target in (str(tmp_path / "race.db"), url):
        results = _race(target, shares)
        assert all(isinstance(r, list) for r in results), results
        flat = [x for r in results for x in r]
        assert flat.count(STORED) == 46 and flat.count(CONFLICT) == 6 and flat.count(DUPLICATE) == 40 + 20
        with connect(target) as st:
            stats, keys, conflicts, raws = state(st)
        winners = [b for b in raws if b in set(frames)]
        assert len(raws) == len(set(raws)) == 46 and sorted(winners) == sorted(frames)
        final[target] = (stats["frames"], stats["devices"], stats["conflicts"], sorted(keys),
                         sorted(winners), sorted(c[:3] for c in conflicts))
        for d in range(6):      # the window's two noisings: which is stored is the race's; one is
            assert len({v1[d], v2[d]} & set(raws)) == 1
    assert final[url] == final[str(tmp_path / "race.db")]


def test_cli_ingest_and_assemble_give_the_sqlite_generator(env, url, tmp_path):
    tmp, ring, keys, frame = env
    f = tmp / "f.bin"
    f.write_bytes(b"".join(frame(d, e, e) for e in range(3) for d in ("b", "a")) + frame("a", 1, 1, seed=b"x"))
    gens = []
    for target in (str(tmp / "s.db"), url):
        code, out, err = run("ingest", f, "--store", target, "--keyring", ring)
        assert code == 2 and out.count(" stored") == 6 and "conflict" in err        # the last frame conflicts
        code, out, err = run("ingest", f, "--store", target, "--keyring", ring)
        assert out.count("duplicate") == 6
        gen = tmp_path / ("gen%d.msgpack" % len(gens))
        code, out, err = run("assemble", "--store", target, "-o", gen)
        assert code == 0, err
        gens.append(gen.read_bytes())
        code, out, err = run("store", "stats", "--store", target)
        assert code == 0 and "6 frame(s) from 2 device(s), 1 configuration(s)" in out and "1 conflict(s)" in out
        assert PASSWORD not in out + err
    assert gens[0] == gens[1]


def test_frames_stream_in_device_epoch_order_and_ranges_cover_them(url, cfg, monkeypatch):
    monkeypatch.setattr(pgstore, "FETCH_ROWS", 3)       # several round trips of the server-side cursor
    devs = ["b", "B", "a.1", "a", "Z-9", "_x", "a:2", "0"]
    frames = {(d, e): make_frame(cfg, d, e) for d in devs for e in (3, 0, 1)}
    with connect(url, create=True) as st:
        st.put_many([rel(b) for b in frames.values()])
    want = [frames[k] for k in sorted(frames, key=lambda k: (k[0].encode(), k[1]))]   # bytewise, as SQLite
    with connect(url) as st:
        it = st.frames()
        assert next(it) == want[0]
        # streamed by a server-side cursor, not fetched whole: frames()'s own
        # session (pg_cursors lists only a session's own cursors) is inside a
        # transaction, its last statement a FETCH from edgesynth_frames_N
        with psycopg.connect(url) as db:
            seen = db.execute("SELECT state, query FROM pg_stat_activity WHERE datname = current_database() "
                              "AND pid <> pg_backend_pid() AND pid <> %s", (st.db.info.backend_pid,)).fetchall()
        assert len(seen) == 1 and seen[0][0] == "idle in transaction", seen
        assert re.fullmatch(r'FETCH FORWARD 3 FROM "?edgesynth_frames_\d+"?', seen[0][1]), seen
        it.close()
        assert list(st.frames()) == want
        assert list(st.frames(devices=["a", "B"])) == [frames["B", e] for e in (0, 1, 3)] + \
            [frames["a", e] for e in (0, 1, 3)]
        assert list(st.frames(device_range=("a", "b"))) == [frames[d, e] for d in ("a", "a.1", "a:2")
                                                            for e in (0, 1, 3)]
        assert st.config_ids() == [config_id_of(rel(want[0]))]
        assert list(st.frames(config_id="nope")) == [] and st.config_ids(devices=["zz"]) == []
        for parts in (1, 2, 3, 8, 20):
            ranges = st.device_ranges(parts)
            assert 1 <= len(ranges) <= parts and ranges[0][0] is None and ranges[-1][1] is None
            assert all(ranges[i][1] == ranges[i + 1][0] for i in range(len(ranges) - 1))
            assert [b for r in ranges for b in st.frames(device_range=r)] == want
        assert [len(list(st.frames(device_range=r))) for r in st.device_ranges(4)] == [6] * 4
        with pytest.raises(InputError, match="no stored frames match"):
            st.releases(devices=["zz"])


def test_gateway_stores_into_postgresql(env, url, tmp_path):
    from tests.mqtt_broker import Broker
    from tests.test_mqtt import Gateway
    tmp, ring, keys, frame = env
    (tmp_path / "broker").mkdir()
    broker = Broker(tmp_path / "broker")
    gw = Gateway(broker.url, url, ring)
    try:
        gw.wait_subscribed()
        import edgesynth as es
        sent = [frame("a", 0, 0), frame("b", 0, 0)]
        assert es.publish(sent, broker.url, timeout=20).ok
        assert gw.finish() == 0
        with connect(url) as st:
            assert sorted(st.frames()) == sorted(sent)
        assert PASSWORD not in " ".join(gw.out + gw.err)
    finally:
        if gw.proc.poll() is None:
            gw.proc.kill()
            gw.proc.wait(10)
        broker.stop()


def test_unreachable_bad_or_wrong_targets_are_one_line_errors(env, pg, url, monkeypatch):
    tmp, ring, keys, frame = env
    f = tmp / "f.bin"
    f.write_bytes(frame("a", 0, 0))
    base = "postgresql://edgesynth:%s@127.0.0.1" % PASSWORD
    cases = [(base + ":%d/x" % free_port(), "cannot connect"),
             (base + ":notaport/x", "cannot connect"),           # libpq's message on the port
             ("postgres://edgesynth:%s@[::1/x" % PASSWORD, "not a valid postgresql:// URL"),
             (base + ":%d/no_such_db" % pg.port, 'database "no_such_db" does not exist'),
             ("postgresql://edgesynth:wrong-pw@127.0.0.1:%d/postgres" % pg.port, "password authentication failed")]
    for target, msg in cases:
        for args in (("ingest", f, "--store", target, "--keyring", ring), ("store", "stats", "--store", target),
                     ("assemble", "--store", target)):
            code, out, err = run(*args)
            assert code == 2 and err.count("\n") == 1 and msg in err, (args, err)
            assert PASSWORD not in err and "wrong-pw" not in err and err.startswith("error: postgres")
    monkeypatch.setenv("PGPASSWORD", PASSWORD)               # libpq's own password source
    code, out, err = run("ingest", f, "--store", url.replace(":" + PASSWORD, ""), "--keyring", ring)
    assert code == 0, err
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(StoreError, match=r"pip install 'edgesynth\[postgres\]'"):
        connect(url)


def test_concurrent_first_ingests_create_the_store_once(url, cfg):
    """Three writers open a new database at once: the advisory lock lets one
    create the tables; every frame is then stored exactly once."""
    frames = [make_frame(cfg, "c%d" % d, 0) for d in range(6)]
    results = _race(url, [frames, frames[::-1], frames[2:]])
    assert all(isinstance(r, list) for r in results), results
    assert sum(r.count(STORED) for r in results) == 6
    with connect(url) as st:
        assert sorted(st.frames()) == sorted(frames)


def test_a_lost_connection_is_a_store_write_error_and_nothing_half_written(pg, url, cfg):
    a, b, c = (make_frame(cfg, "w", e) for e in range(3))
    with connect(url, create=True) as st:
        assert st.put(rel(a)) == STORED
        with pg.admin() as db:   # the server ends the writer's session, as a restart or a network cut would
            db.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                       (url.rsplit("/", 1)[1],))
        with pytest.raises(StoreWriteError, match="cannot write the store") as e:
            st.put_many([rel(b), rel(c)])
        assert PASSWORD not in str(e.value) and "\n" not in str(e.value)
    with connect(url) as st:
        assert list(st.frames()) == [a]



def test_a_put_while_frames_streams_commits_before_its_ack(url, cfg):
    """frames() streams on a connection of its own: a put meanwhile is
    committed when it returns (another session sees it, closing the iterator
    changes nothing), two iterators read in any order both finish, and a
    batch inside a caller's open transaction is refused (its results would
    come before the commit)."""
    frames = [make_frame(cfg, "p%d" % d, 0) for d in range(4)]
    with connect(url, create=True) as st:
        st.put_many([rel(b) for b in frames[:3]])
        it = st.frames()
        assert next(it) == frames[0]
        assert st.put(rel(frames[3])) == STORED
        with psycopg.connect(url) as db:
            assert db.execute("SELECT count(*) FROM frames").fetchone()[0] == 4
        it.close()
        with psycopg.connect(url) as db:
            assert db.execute("SELECT count(*) FROM frames").fetchone()[0] == 4
        a, b = st.frames(), st.frames()
        assert next(a) == next(b) == frames[0]
        assert list(a) == frames[1:] and list(b) == frames[1:]
        with st.db.transaction():
            with pytest.raises(StoreWriteError, match="inside an open transaction"):
                st.put(rel(make_frame(cfg, "q", 0)))
        assert st.count() == 4


def test_read_committed_whatever_the_database_default(pg, url, cfg):
    """Under a database default of REPEATABLE READ the insert that waited for
    a racing writer would be a serialization error; the store sets READ
    COMMITTED, so the loser is a CONFLICT."""
    import threading
    import time
    with pg.admin() as db:
        db.execute("ALTER DATABASE \"%s\" SET default_transaction_isolation = 'repeatable read'"
                   % url.rsplit("/", 1)[1])
    mine, theirs = rel(make_frame(cfg, "r", 0)), rel(make_frame(cfg, "r", 0, seed=b"racer"))
    with connect(url, create=True) as st, psycopg.connect(url) as racer:
        assert st.db.execute("SHOW transaction_isolation").fetchone()[0] == "read committed"
        racer.execute("INSERT INTO frames VALUES (%s, %s, %s, %s, %s, %s)",
                      (theirs.device, theirs.epoch, theirs.seq, theirs.payload_digest, config_id_of(theirs),
                       theirs.raw))                 # not committed yet: our insert must wait for it
        out = []
        t = threading.Thread(target=lambda: out.append(_catch(st.put, mine)))
        t.start()
        deadline = time.monotonic() + 20
        while not racer.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND wait_event_type = "
                                "'Lock'", (st.db.info.backend_pid,)).fetchone()[0]:
            assert time.monotonic() < deadline, "the put never waited for the racing insert"
            time.sleep(0.05)
        racer.commit()
        t.join(20)
    assert out == [CONFLICT]
    with connect(url) as st:
        assert list(st.frames()) == [theirs.raw] and len(st.conflicts()) == 1


def _catch(f, *args):
    try:
        return f(*args)
    except Exception as e:  # the test compares it with the wanted result
        return "%s: %s" % (type(e).__name__, e)


def test_every_password_parameter_is_masked(pg):
    url = "postgresql://edgesynth:upw@127.0.0.1:%d/db?sslpassword=k3y-pw&password=p-pw&sslmode=disable" % free_port()
    shown = pgstore.label(url + "&SSLPassword=k4y")
    assert "sslmode=disable" in shown and "127.0.0.1" in shown
    assert not any(s in shown for s in ("upw", "k3y-pw", "p-pw", "k4y")), shown
    for target, msg in ((url, "cannot connect"), (url + "&SSLPassword=k4y", "not a valid")):  # libpq: case matters
        with pytest.raises(StoreError, match=msg) as e:
            connect(target)
        assert not any(s in str(e.value) for s in ("upw", "k3y-pw", "p-pw", "k4y")), str(e.value)


def test_a_multi_host_url_is_libpqs_to_judge(pg):
    """libpq's multi-host URLs are valid: a dead pair of hosts is a connect error."""
    url = ("postgresql://edgesynth@127.0.0.1:%d,127.0.0.1:%d/db?target_session_attrs=read-write"
           % (free_port(), free_port()))
    with pytest.raises(StoreError, match="cannot connect") as e:
        connect(url)
    assert "not a valid" not in str(e.value)


def test_a_failed_initdb_leaves_no_password_file(tmp_path, monkeypatch):
    import subprocess
    import tempfile

    from tests import pg_server
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "initdb").write_text("#!/bin/sh\nexit 1\n")
    (fake / "initdb").chmod(0o755)
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(pg_server, "binaries", lambda: str(fake))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    with pytest.raises((subprocess.CalledProcessError, OSError)):
        Server()
    assert list(temp.iterdir()) == []
