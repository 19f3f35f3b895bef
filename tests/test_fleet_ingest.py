"""Ingest at fleet rate (issue 16 item 3): group commit reports exactly what
one transaction per frame reported, --jobs 2 what --jobs 1 did; files come from
directories, glob patterns and --files-from lists, lazily; a failed batch acks
none of its frames; frames before a blocking read are acknowledged first; a
killed ingest leaves no worker behind; ingest imports no analysis library."""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from click.testing import CliRunner

import edgesynth as es
from edgesynth.cli import main
from edgesynth.errors import IngestStopped, InputError, StoreWriteError
from edgesynth.fleet import ingest as ingest_mod
from edgesynth.fleet import verify as verify_mod
from edgesynth.fleet.store import Store

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(*args, stdin=None):
    r = CliRunner().invoke(main, [str(a) for a in args], input=stdin, catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def reports(files, db, ring, **kw):
    got = []
    outcome = es.ingest(files, db, ring, on_frame=got.append, **kw)
    return [(r.path, r.index, r.result, r.device, r.epoch, r.seq, r.reason) for r in got], outcome


def snapshot(db):
    with Store(str(db)) as st:
        return st.keys(), st.conflicts(), st.stats()["frames"]


@pytest.fixture
def mixed(env):
    """Frame files with every kind of outcome, in one directory: stored frames,
    resends inside one file (a duplicate in the same batch), a conflict (same
    device and epoch, other bytes), a frame whose tag does not verify, junk
    that ends a file, an empty file and a file that is not frames."""
    tmp, ring, keys, frame = env
    d = tmp / "spool"
    d.mkdir()
    good = {(dev, e): frame(dev, e, e) for dev in ("a", "b") for e in range(12)}
    (d / "00-a.bin").write_bytes(b"".join(good["a", e] for e in range(12)) + good["a", 3])
    (d / "01-b.bin").write_bytes(b"".join(good["b", e] for e in range(6)))
    other = frame("b", 2, 2, seed=b"other")                       # conflicts with good["b", 2]
    bad = bytearray(frame("a", 40, 40))
    bad[-1] ^= 1                                                  # the tag no longer verifies
    (d / "02-mixed.bin").write_bytes(other + bytes(bad) + good["b", 6] + good["b", 6] + b"junk" + good["b", 7])
    (d / "03-rest.bin").write_bytes(b"".join(good["b", e] for e in range(7, 12)))
    (d / "04-empty.bin").write_bytes(b"")
    (d / "05-config.json").write_text('{"format": 1}')
    return tmp, ring, d


def test_group_commit_reports_and_stores_exactly_what_one_commit_per_frame_did(mixed, monkeypatch):
    tmp, ring, d = mixed
    runs = {}
    for batch in (1, 3, ingest_mod.BATCH_FRAMES):             # 1: the old path, a transaction per frame
        monkeypatch.setattr(ingest_mod, "BATCH_FRAMES", batch)
        db = tmp / ("b%d.db" % batch)
        runs[batch] = reports(d, db, ring, jobs=1) + (snapshot(db),)
    one, _, store_one = runs[1]
    for batch in (3, ingest_mod.BATCH_FRAMES):
        assert runs[batch][0] == one and runs[batch][2] == store_one
    results = [r[2] for r in one]
    assert results.count("stored") == 24 and results.count("duplicate") == 2 and results.count("conflict") == 1
    by = {(os.path.basename(r[0]), r[1]): r for r in one}
    assert by["00-a.bin", 12][2:6] == ("duplicate", "a", 3, 3)             # resent in the same batch
    assert by["02-mixed.bin", 0][2] == "conflict" and by["02-mixed.bin", 1][2] == "rejected"
    assert "does not verify" in by["02-mixed.bin", 1][6]
    assert by["02-mixed.bin", 3][2] == "duplicate" and "rest of the file skipped" in by["02-mixed.bin", 4][6]
    assert by["04-empty.bin", 0][6] == "file is empty" and by["05-config.json", 0][2] == "rejected"
    keys, conflicts, n = store_one
    assert n == 24 and [c[:2] for c in conflicts] == [("b", 2)]
    assert [(os.path.basename(p), i) for p, i, *_ in one] == sorted((os.path.basename(p), i) for p, i, *_ in one)


def test_jobs_2_gives_the_reports_and_store_of_jobs_1(mixed, monkeypatch):
    tmp, ring, d = mixed
    monkeypatch.setattr(ingest_mod, "WHOLE_FILE", 4000)   # larger files are split here, the rest in workers
    monkeypatch.setattr(verify_mod, "CHUNK_FRAMES", 3)    # several chunks in flight
    submitted = []
    real = verify_mod.concurrent.futures.ProcessPoolExecutor

    class Counting(real):
        def submit(self, fn, *args, **kw):
            submitted.append(len(args[0]))
            return super().submit(fn, *args, **kw)
    monkeypatch.setattr(verify_mod.concurrent.futures, "ProcessPoolExecutor", Counting)
    one = reports(d, tmp / "j1.db", ring, jobs=1)
    two = reports(d, tmp / "j2.db", ring, jobs=2)
    assert len(submitted) >= 2                           # the workers did check the frames
    assert two[0] == one[0] and two[1].counts == one[1].counts
    assert snapshot(tmp / "j2.db") == snapshot(tmp / "j1.db")
    code, out, err = run("ingest", d, "--store", tmp / "j2.db", "--keyring", ring, "--jobs", "2")
    assert code == 2 and "0 stored, 26 duplicate(s), 1 conflict(s)" in err   # the CLI, through workers


@pytest.mark.parametrize("jobs", [1, 2])
def test_workers_verify_under_the_callers_keyring_not_its_file(env, jobs):
    """A Keyring object given to ingest is the one the workers use: the file
    at its path (which has keys for a and b) is never read again."""
    tmp, ring, keys, frame = env
    f = tmp / "f.bin"
    f.write_bytes(frame("a", 0, 0) + frame("b", 0, 0))
    only_a = es.Keyring("x", {"a": keys.require("a")})      # no key for b; "x" is no file
    got, outcome = reports(f, tmp / "s.db", only_a, jobs=jobs)
    assert [g[2] for g in got] == ["stored", "rejected"] and "'b'" in got[1][6]
    got, outcome = reports(f, tmp / "t.db", es.Keyring(None, {"b": keys.require("b")}), jobs=jobs)
    assert [g[2] for g in got] == ["rejected", "stored"]


def test_directories_patterns_and_lists_of_files(env, tmp_path):
    tmp, ring, keys, frame = env
    d = tmp / "spool"
    (d / "sub").mkdir(parents=True)
    names = {"b.bin": ("a", 1), "a.bin": ("a", 0), ".hidden.bin": ("a", 9), "sub/c.bin": ("b", 0),
             "x.dat": ("b", 1)}
    for name, (dev, e) in names.items():
        (d / name).write_bytes(frame(dev, e, e))

    def seen(*args, stdin=None):
        code, out, err = run("ingest", *args, "--store", tmp / "s.db", "--keyring", ring, stdin=stdin)
        assert code == 0, err
        return [os.path.relpath(line.split()[1], d) for line in out.splitlines()]
    assert seen(d) == ["a.bin", "b.bin", "x.dat"]                             # sorted, flat, no hidden
    assert seen(d, "--recursive") == ["a.bin", "b.bin", "x.dat", "sub/c.bin"]
    assert seen(str(d / "*.bin")) == ["a.bin", "b.bin"]                        # a quoted pattern
    assert seen(str(d / "**" / "*.bin"), "-r") == ["a.bin", "b.bin", "sub/c.bin"]
    listing = tmp / "list.txt"
    listing.write_text("%s\n\n%s\n" % (d / "x.dat", d / "sub"))
    assert seen(d / "b.bin", "--files-from", listing) == ["b.bin", "x.dat", "sub/c.bin"]
    assert seen("--files-from", "-", stdin="%s\n" % (d / "a.bin")) == ["a.bin"]
    code, out, err = run("ingest", str(d / "*.none"), "--store", tmp / "s.db", "--keyring", ring)
    assert code == 2 and "no file matches this pattern" in err
    code, out, err = run("ingest", "--store", tmp / "s.db", "--keyring", ring)
    assert code == 2 and "give FILES, --files-from or both" in err
    code, out, err = run("ingest", "-", "--files-from", "-", "--store", tmp / "s.db", "--keyring", ring)
    assert code == 2 and "stdin can be read once" in err
    with pytest.raises(InputError, match="jobs must be"):
        es.ingest(d, tmp / "s.db", ring, jobs=0)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity here")
def test_default_jobs_are_the_cpus_this_process_may_use(monkeypatch):
    from edgesynth.fleet import storage
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)          # the machine's, not this process's
    assert storage.usable_cpus() == 1


def test_a_list_of_paths_is_consumed_lazily(env):
    tmp, ring, keys, frame = env
    one = tmp / "one.bin"
    one.write_bytes(frame("a", 0, 0))
    consumed = []
    first_report_after = []

    def names():
        for i in range(2000):
            consumed.append(i)
            yield one

    def on_frame(r):
        if not first_report_after:
            first_report_after.append(len(consumed))
    outcome = es.ingest(names(), tmp / "s.db", ring, on_frame=on_frame)
    assert outcome.counts["stored"] == 1 and outcome.counts["duplicate"] == 1999
    assert first_report_after[0] <= ingest_mod.BATCH_FRAMES + 1      # acked long before the list ended


def test_a_failed_batch_acks_none_of_its_frames(env, monkeypatch):
    tmp, ring, keys, frame = env
    f = tmp / "f.bin"
    bad = bytearray(frame("b", 99, 99))
    bad[-1] ^= 1
    f.write_bytes(b"".join(frame("a", e, e) for e in range(4)) + bytes(bad) + b"".join(
        frame("a", e, e) for e in range(4, 10)))
    monkeypatch.setattr(ingest_mod, "BATCH_FRAMES", 4)
    monkeypatch.setattr(ingest_mod, "BATCH_SECONDS", 1e9)   # batches end by count only, even on a slow machine
    real, calls = Store.put_many, []

    def put_many(self, rels):
        calls.append(len(rels))
        if len(calls) == 2:
            raise StoreWriteError("%s: cannot write the store (disk I/O error)" % self.path)
        return real(self, rels)
    monkeypatch.setattr(Store, "put_many", put_many)
    got = []
    with pytest.raises(IngestStopped) as e:
        es.ingest(f, tmp / "s.db", ring, on_frame=got.append)
    msg = str(e.value)
    # batch 1: frames 0-3 committed; refusal 4 reported at once (nothing pending); batch 2: frames 5-8 fail
    assert [(r.index, r.result) for r in got] == [(0, "stored"), (1, "stored"), (2, "stored"), (3, "stored"),
                                                  (4, "rejected")]
    assert "f.bin: frame 5: not stored" in msg and "disk I/O error" in msg and "nor any frame after it" in msg
    assert "4 stored" in msg and "1 rejected" in msg and "none was lost" in msg and "the store holds 4" in msg
    monkeypatch.setattr(Store, "put_many", real)
    assert sorted(e for _, e, _ in snapshot(tmp / "s.db")[0]) == [0, 1, 2, 3]


def test_a_batch_holds_at_most_batch_bytes_plus_one_frame(env, monkeypatch):
    tmp, ring, keys, frame = env
    frames = [frame("a", e, e) for e in range(10)]
    (tmp / "f.bin").write_bytes(b"".join(frames))
    bound = len(frames[0]) + len(frames[1]) + 1                     # about the third frame crosses it
    monkeypatch.setattr(ingest_mod, "BATCH_BYTES", bound)
    monkeypatch.setattr(ingest_mod, "BATCH_SECONDS", 1e9)
    real, calls = Store.put_many, []

    def put_many(self, rels):
        calls.append([len(r.raw) for r in rels])
        return real(self, rels)
    monkeypatch.setattr(Store, "put_many", put_many)
    outcome = es.ingest(tmp / "f.bin", tmp / "s.db", ring)
    assert outcome.counts["stored"] == 10 and sum(map(len, calls)) == 10 and len(calls) >= 3
    for sizes in calls[:-1]:         # each batch closed by the frame that reached the bound, not before
        assert sum(sizes) >= bound > sum(sizes[:-1])
    assert sum(calls[-1][:-1]) < bound


def test_a_whole_file_task_reads_at_most_whole_file_bytes(env, monkeypatch):
    """A file listed as small (read in one piece, in a worker) that grew
    since is refused whole, not read into a chunk past the memory bound."""
    tmp, ring, keys, frame = env
    f = tmp / "f.bin"
    f.write_bytes(frame("a", 0, 0))
    monkeypatch.setattr(verify_mod, "WHOLE_FILE", f.stat().st_size)
    (result,) = verify_mod.run_task((str(f), None, 0), keys.key_for)
    assert isinstance(result[2], tuple) and result[2][:3] == ("a", 0, 0)                  # fits: verified
    f.write_bytes(frame("a", 0, 0) + frame("a", 1, 1))                                    # grew after listing
    (result,) = verify_mod.run_task((str(f), None, 0), keys.key_for)
    assert result[1] is None and result[2].startswith("grew past %d bytes after it was listed" % verify_mod.WHOLE_FILE)


@pytest.mark.parametrize("jobs", [1, 2])
def test_frames_before_a_blocking_read_are_acknowledged_before_it(env, jobs):
    """A FIFO (like stdin) may wait for its writer: what came before is
    committed and reported first, not held in a batch until the FIFO ends."""
    tmp, ring, keys, frame = env
    first = tmp / "first.bin"
    first.write_bytes(frame("a", 0, 0) + frame("a", 1, 1))
    fifo = str(tmp / "pipe")
    os.mkfifo(fifo)
    acked = threading.Event()
    waited = []

    def writer():
        waited.append(acked.wait(20))
        with open(fifo, "wb") as fh:
            fh.write(frame("b", 0, 0))
    t = threading.Thread(target=writer)
    t.start()

    def on_frame(r):
        if r.path == str(first) and r.index == 1:
            acked.set()
    outcome = es.ingest([first, fifo], tmp / "s.db", ring, on_frame=on_frame, jobs=jobs)
    t.join()
    assert waited == [True] and outcome.counts["stored"] == 3


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_list_of_paths_on_a_fifo_is_acknowledged_before_its_next_line(env, jobs):
    """The list's writer is slow: the frames of the paths already listed are
    committed and acked before the ingest waits for the next line."""
    tmp, ring, keys, frame = env
    files = [tmp / ("f%d.bin" % i) for i in range(3)]
    for i, f in enumerate(files):
        f.write_bytes(frame("a", 2 * i, 0) + frame("a", 2 * i + 1, 0))
    fifo, acked = str(tmp / "list"), tmp / "acked"
    os.mkfifo(fifo)
    # another process, as a real list's writer: a forked worker would hold a thread's write end open
    writer = subprocess.Popen([sys.executable, "-c", (
        "import os, sys, time\nwith open(sys.argv[1], 'w') as fh:\n"
        "    fh.write(sys.argv[3] + '\\n' + sys.argv[4] + '\\n')\n    fh.flush()\n"
        "    end = time.monotonic() + 20\n"
        "    while not os.path.exists(sys.argv[2]) and time.monotonic() < end:\n        time.sleep(0.02)\n"
        "    print(os.path.exists(sys.argv[2]))\n    fh.write(sys.argv[5] + '\\n')\n"),
        fifo, str(acked), *map(str, files)], stdout=subprocess.PIPE, text=True)

    def on_frame(r):
        if r.path == str(files[1]) and r.index == 1:
            acked.touch()
    outcome = es.ingest(None, tmp / "s.db", ring, on_frame=on_frame, files_from=fifo, jobs=jobs)
    assert writer.communicate(timeout=30)[0] == "True\n" and outcome.counts["stored"] == 6


def test_a_path_with_a_nul_byte_is_refused_and_the_run_goes_on(env):
    tmp, ring, keys, frame = env
    f = tmp / "f.bin"
    f.write_bytes(frame("a", 0, 0))
    listing = tmp / "list.txt"
    listing.write_bytes(b"%s\nbad\0name\n%s\n" % (bytes(f), bytes(f)))
    got, outcome = reports([f], tmp / "s.db", ring, files_from=listing)
    assert [(g[2], g[6]) for g in got] == [("stored", None), ("duplicate", None),
                                          ("rejected", "path contains a NUL byte"), ("duplicate", None)]


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_bad_list_line_mid_run_reports_the_pending_batch_first(env, jobs):
    tmp, ring, keys, frame = env
    f = tmp / "f.bin"
    f.write_bytes(frame("a", 0, 0) + frame("a", 1, 1))
    listing = tmp / "list.txt"
    listing.write_text("%s\n%s\n" % (f, "x" * 70000))
    got = []
    with pytest.raises(IngestStopped) as e:
        es.ingest(None, tmp / "s.db", ring, on_frame=got.append, files_from=listing, jobs=jobs)
    assert [r.result for r in got] == ["stored", "stored"]                 # verified, then committed and acked
    assert "line 2 is longer than" in str(e.value) and "2 stored" in str(e.value)
    assert snapshot(tmp / "s.db")[2] == 2
    with pytest.raises(InputError, match="cannot read"):                   # before any frame, no store made
        es.ingest([f], tmp / "t.db", ring, files_from=tmp / "missing.txt")
    assert not (tmp / "t.db").exists()


@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="needs Linux's /proc/self/mem (a read fails with EIO)")
def test_a_list_that_fails_to_read_is_one_error_after_the_pending_batch(env):
    """A read error of the list itself (EIO) stops the run like a bad line:
    what was verified before is committed and said, never an internal error."""
    tmp, ring, keys, frame = env
    f = tmp / "f.bin"
    f.write_bytes(frame("a", 0, 0))
    got = []
    with pytest.raises(IngestStopped, match="cannot read the list of paths") as e:
        es.ingest([f], tmp / "s.db", ring, on_frame=got.append, files_from="/proc/self/mem", jobs=1)
    assert [r.result for r in got] == ["stored"] and "1 stored" in str(e.value)


def test_a_failing_old_store_mid_migrate_reports_the_pending_batch_first(env, monkeypatch):
    tmp, ring, keys, frame = env

    def old_frames(path):
        yield frame("a", 0, 0)
        yield frame("a", 1, 1)
        raise es.StoreError("%s: database disk image is malformed" % path)
    monkeypatch.setattr(ingest_mod, "schema_1_frames", old_frames)
    got = []
    with Store(str(tmp / "s.db"), create=True) as st, pytest.raises(IngestStopped) as e:
        ingest_mod.migrate("old.db", st, keys.key_for, got.append)
    assert [r.result for r in got] == ["stored", "stored"] and "malformed" in str(e.value)
    assert "2 stored" in str(e.value) and snapshot(tmp / "s.db")[2] == 2


def _children(pid):
    out = []
    for p in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % p) as fh:
                if p.isdigit() and int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(p))
        except (OSError, ValueError, IndexError):
            pass
    return out


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc to find the worker processes")
def test_workers_leave_when_the_ingest_is_killed(env):
    tmp, ring, keys, frame = env
    d = tmp / "spool"
    d.mkdir()
    one = frame("a", 0, 0)
    for e in range(3000):
        (d / ("%05d.bin" % e)).write_bytes(one)           # stored once, then duplicates: the run goes on
    env_vars = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "edgesynth", "ingest", str(d), "--store", str(tmp / "s.db"),
                             "--keyring", ring, "--jobs", "2"], cwd=ROOT, env=env_vars,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    proc.stdout.readline()                                 # the first ack: the workers are running
    workers = _children(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert len(workers) >= 2
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(os.path.exists("/proc/%d" % w) for w in workers):
        time.sleep(0.1)
    alive = [w for w in workers if os.path.exists("/proc/%d" % w)]
    for w in alive:
        os.kill(w, signal.SIGKILL)
    assert not alive, "workers outlived the killed ingest"


def test_ingest_imports_no_analysis_library(env):
    tmp, ring, keys, frame = env
    f = tmp / "f.bin"
    f.write_bytes(frame("a", 0, 0))
    code = ("import sys\nfrom edgesynth.cli import main\nsys.argv = ['edgesynth'] + sys.argv[1:]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'scipy', 'pandas', 'matplotlib', 'pyarrow'})\n"
            "sys.stderr.write('HEAVY %s\\n' % heavy)\n")
    out = subprocess.run([sys.executable, "-c", code, "ingest", str(f), "--store", str(tmp / "s.db"),
                          "--keyring", ring, "--jobs", "1"], capture_output=True, text=True, cwd=ROOT)
    assert "HEAVY []" in out.stderr, out.stderr
