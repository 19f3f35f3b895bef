"""Portable tests of the privacy ledger and state persistence (agent/ledger.py,
agent/persist.py, firmware_shims/fs.py, firmware_shims/counter.py): CPython
(pytest) and the MicroPython unix port (tests/mp/run.py). Files go to a fresh
directory under /tmp (left there). The platform counter is the file-backed
emulation (firmware_shims.counter.FileCounter), which is what runs on the
unix port.

Most tests use the platform entropy (no seed), so "the noise was restored"
and "the noise was drawn again" give different counters with overwhelming
probability; a fixed seed could not tell them apart.
"""
import os

from ledger_fixtures import _boot, _cfg, _collect, _counters, _dir, _feed, _fresh, _read, _refused, _write

from agent.errors import BudgetError, SealedError
from agent.ledger import Ledger
from firmware_shims import fs


def test_ledger_is_exact_and_refuses_overspending():
    led = Ledger((1, 1))
    for _ in range(3):
        led = led.after((1, 3))
    assert led.spent == (1, 1) and led.releases == 3
    try:
        led.after((1, 10 ** 9))
        assert False, "overspent"
    except BudgetError:
        pass


def test_release_charges_and_budget_stops_before_sealing():
    path, d = _fresh(_cfg(lifetime=(1, 1)))
    for w in range(2):
        _feed(d, 50, w)
        d.release()
        d.next_epoch()
    assert d.ledger.spent == (1, 1) and d.ledger.releases == 2
    _feed(d, 50, 9)
    try:
        d.release()
        assert False, "released beyond the lifetime budget"
    except BudgetError:
        pass
    assert not d.sealed                          # nothing sealed, nothing sent
    d = None
    d = _boot(path, _cfg(lifetime=(1, 1)))        # the ledger survives a reboot
    assert d.ledger.spent == (1, 1) and d.ledger.releases == 2 and d.agent.epoch == 2


def test_reboot_restores_the_noise_instead_of_drawing_it_again():
    path, d = _fresh()
    fresh = _counters(d)
    d = None                                     # power cut right after birth
    d = _boot(path)
    assert _counters(d) == fresh
    _feed(d, 200)
    d.checkpoint()
    seen = _counters(d)
    _feed(d, 20, 5)                              # readings after the checkpoint are lost ...
    d = None
    d = _boot(path)
    assert _counters(d) == seen                  # ... but the noise is the same noise
    assert d.agent.epoch == 0 and d.agent.seq == 0 and not d.sealed


def test_reboot_after_release_resends_identical_bytes_and_stays_sealed():
    path, d = _fresh()
    _feed(d, 300)
    first = bytes(d.release())
    d = None
    d = _boot(path)
    assert d.sealed and bytes(d.release()) == first
    assert d.ledger.releases == 1 and d.ledger.spent == (1, 2)   # the resend is free
    try:
        d.update((1, 1))
        assert False, "a released state took a reading"
    except SealedError:
        pass
    d.next_epoch()
    assert (d.agent.epoch, d.agent.seq) == (1, 1) and not d.sealed


def test_power_cut_during_send_then_resend():
    path, d = _fresh()
    _feed(d, 100)
    out, sink = _collect()

    def dying(buf, n):
        sink(buf, n)
        if len(out) > 40:
            raise OSError("radio lost power")
    try:
        d.release(dying)
        assert False, "the send should have failed"
    except OSError:
        pass
    d = None
    d = _boot(path)
    frame = bytes(d.release())
    assert d.sealed and frame[:len(out)] == bytes(out[:len(frame)])
    assert d.ledger.releases == 1


def test_new_windows_get_fresh_noise():
    path, d = _fresh(_cfg(lifetime=(10, 1)))
    first = _counters(d)
    d.release()
    d.next_epoch()
    assert _counters(d) != first


def test_torn_and_missing_records():
    path, d = _fresh()
    _feed(d, 100)
    d.checkpoint()
    kept = _counters(d)
    d = None
    _write(path + ".tmp", b"ESS2\x10\x00")       # a write cut short: torn .tmp beside a good record
    assert _counters(_boot(path)) == kept
    os.rename(path, path + ".tmp")               # FAT cut between remove and rename: only .tmp left ...
    assert _counters(_boot(path)) == kept
    assert not fs.exists(path + ".tmp")          # ... loaded and renamed back (fs.promote)
    _write(path + ".tmp", b"garbage")            # both copies corrupt: the ledger is unknown
    f = open(path, "r+b")
    f.seek(60)
    f.write(b"\x00\x01\x02\x03")
    f.close()
    _refused(path, why="no valid copy")


def test_config_change_keeps_the_ledger_and_drops_the_window():
    path, d = _fresh()
    _feed(d, 100)
    d.release()
    d = None
    d = _boot(path, _cfg(hash_seed="replanned"))
    assert d.ledger.spent == (1, 2) and d.ledger.releases == 1
    assert (d.agent.epoch, d.agent.seq) == (1, 1) and not d.sealed


def test_write_atomic_replaces_whole_files():
    path = _dir() + "/f"
    fs.write_atomic(path, lambda f: f.write(b"one"))
    fs.write_atomic(path, lambda f: f.write(b"two!"))
    assert _read(path) == b"two!" and not fs.exists(path + ".tmp")
