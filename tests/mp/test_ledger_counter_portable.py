"""Portable tests of the platform counter and of power cuts around a persist
(docs/trust.md §6): CPython (pytest) and the MicroPython unix port
(tests/mp/run.py), with the file-backed platform counter of the unix port.
Split from test_ledger_attacks_portable.py so that each module fits the 64wK
MicroPython heap."""
from ledger_fixtures import _boot, _counters, _dir, _feed, _fresh, _header, _read, _refused, _write

from firmware_shims import fs
from firmware_shims.counter import FileCounter


def _set_counter(path, n):
    """Set the emulated platform counter of ``path`` to ``n``, keeping the identity bound to it."""
    b = _read(path + ".ctr")
    _write(path + ".ctr", ("%d" % n).encode() + b[b.find(b" "):])


_write_atomic = fs.write_atomic


def _cut(path, write):
    """Stands in for fs.write_atomic once: a power cut once the ``.tmp`` is opened ("wb", so emptied)."""
    fs.write_atomic = _write_atomic
    _write(path + ".tmp", b"")
    raise OSError("power cut")


def _two_records(n, k):
    """A provisioned device checkpointed twice (100 readings, then ``n`` more):
    (state path, the first record's bytes, the second's counters)."""
    path, d = _fresh()
    _feed(d, 100)
    d.checkpoint()
    first = _read(path)
    _feed(d, n, k)
    d.checkpoint()
    return path, first, _counters(d)


def test_a_persist_cut_before_its_counter_step_is_caught_up():
    path, old = _two_records(10, 2)[:2]
    n = _header(_read(path))[1]["ctr"]
    _set_counter(path, n - 1)                            # the cut: record n on flash, counter at n - 1
    _boot(path)                                          # accepted: nothing of record n was sent ...
    assert FileCounter(path + ".ctr").read() == n        # ... and the counter caught up
    _write(path, old)
    _refused(path, why="restored copy")


def test_file_counter_is_monotonic_but_not_rollback_proof():
    c = FileCounter(_dir() + "/c")
    assert c.read() == 0 and not c.rollback_proof
    c.advance(5)
    c.advance(3)                                 # never lowered
    assert c.read() == 5
    _write(c.path + ".tmp", b"9")                # a torn write (no newline) reads as the old value
    assert c.read() == 5
    _write(c.path + ".tmp", b"7\n")              # a rename undone by a cut: the newest value in .tmp ...
    fs.write_atomic = _cut
    try:                                         # ... survives a cut in the next step, which rewrites .tmp
        c.advance(8)
    except OSError:
        pass
    assert c.read() == 7
    c.bind(b"\x01" * 16)                         # the bound identity travels with the value
    c.advance(9)
    assert (c.read(), c.identity()) == (9, b"\x01" * 16)
    _write(c.path, b"x\n")
    fs.remove(c.path + ".tmp")
    try:
        c.read()
        assert False, "read a damaged counter"
    except OSError:
        pass


def test_restoring_state_and_emulated_counter_together_goes_unnoticed():
    """The limit docs/trust.md section 6 states: without a hardware counter,
    whoever can write the filesystem rolls back both files together."""
    path, d = _fresh()
    _feed(d, 100)
    d.checkpoint()
    old, old_ctr = _read(path), _read(path + ".ctr")
    d.release()
    d = None
    _write(path, old)
    _write(path + ".ctr", old_ctr)
    assert not _boot(path).sealed


def _boot_then_cut(path, kept):
    # a function of its own, no bound method passed around: under MicroPython's
    # conservative GC the device is then garbage before the next boot
    d = _boot(path)
    assert _counters(d) == kept
    fs.write_atomic = _cut
    try:
        d.checkpoint()
    except OSError:
        pass


def test_a_newer_tmp_beside_an_older_state_is_loaded():
    path, old, kept = _two_records(100, 3)
    _write(path + ".tmp", _read(path))           # the last rename did not survive the cut ...
    _write(path, old)                            # ... so `state` holds the record before it, and
    _set_counter(path, _header(old)[1]["ctr"])   # the counter is at that one: the newest is chosen by number,
    _boot_then_cut(path, kept)                   # then the next persist rewrites state.tmp and is cut ...
    assert _counters(_boot(path)) == kept        # ... and the newest record was not its only copy
