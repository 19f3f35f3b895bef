"""Portable tests of the privacy ledger and state persistence (agent/ledger.py,
agent/persist.py, firmware_shims/fs.py): CPython (pytest) and the MicroPython
unix port (tests/mp/run.py). Files go to a fresh directory under /tmp (left there).

Most tests use the platform entropy (no seed), so "the noise was restored"
and "the noise was drawn again" give different counters with overwhelming
probability; a fixed seed could not tell them apart.
"""
import os

from agent.errors import BudgetError, SealedError
from agent.ledger import Device, Ledger
from agent.persist import StateError
from firmware_shims import fs

def _dir():
    d = "/tmp/edgesynth-ledger-%s" % "".join("%02x" % b for b in os.urandom(6))
    os.mkdir(d)
    return d


def _cfg(lifetime=(1, 1), hash_seed="ledger-tests"):
    """epsilon 1/2 per release: q = 2**10, clamp 8 units + 7 levels x 72 units = 512."""
    return {"format": 1, "epsilon": [1, 2], "relation": "add-remove",
            "device": {"lifetime_epsilon": [lifetime[0], lifetime[1]]},
            "mechanisms": [{"kind": "privhp", "names": ["a", "b"], "lo": [0, 0], "hi": [4096, 4096],
                            "r": 6, "k": 8, "w": 16, "j": 1, "sketch": "cms", "hash_seed": hash_seed,
                            "q": 1024, "sigma": [72] * 7, "clamp_p": 8}]}


def _counters(dev):
    out = []
    for m in dev.agent.mechs:
        for arr in m.counters():
            out.append(list(arr))
        out.append(m.clamp)
    return out


def _feed(dev, n, k=0):
    for i in range(n):
        dev.update(((i * 97 + k) % 4096, (i * 31 + 7 * k) % 4096))


def _collect():
    out = bytearray()

    def sink(buf, n):
        out.extend(memoryview(buf)[:n])
    return out, sink


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
    path = _dir() + "/state"
    d = Device(_cfg(lifetime=(1, 1)), path)
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
    d2 = Device(_cfg(lifetime=(1, 1)), path)      # the ledger survives a reboot
    assert d2.ledger.spent == (1, 1) and d2.ledger.releases == 2 and d2.agent.epoch == 2


def test_reboot_restores_the_noise_instead_of_drawing_it_again():
    path = _dir() + "/state"
    d = Device(_cfg(), path)
    fresh = _counters(d)
    d = None                                     # power cut right after birth
    d = Device(_cfg(), path)
    assert _counters(d) == fresh
    _feed(d, 200)
    d.checkpoint()
    seen = _counters(d)
    _feed(d, 20, 5)                              # readings after the checkpoint are lost ...
    d = None
    d = Device(_cfg(), path)
    assert _counters(d) == seen                  # ... but the noise is the same noise
    assert d.agent.epoch == 0 and d.agent.seq == 0 and not d.sealed


def test_reboot_after_release_resends_identical_bytes_and_stays_sealed():
    path = _dir() + "/state"
    d = Device(_cfg(), path)
    _feed(d, 300)
    first = bytes(d.release())
    d = None
    d = Device(_cfg(), path)
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
    path = _dir() + "/state"
    d = Device(_cfg(), path)
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
    d = Device(_cfg(), path)
    frame = bytes(d.release())
    assert d.sealed and frame[:len(out)] == bytes(out[:len(frame)])
    assert d.ledger.releases == 1


def test_new_windows_get_fresh_noise():
    path = _dir() + "/state"
    d = Device(_cfg(lifetime=(10, 1)), path)
    first = _counters(d)
    d.release()
    d.next_epoch()
    assert _counters(d) != first


def test_torn_and_missing_records():
    path = _dir() + "/state"
    d = Device(_cfg(), path)
    _feed(d, 100)
    d.checkpoint()
    kept = _counters(d)
    f = open(path + ".tmp", "wb")                # a write cut short: torn .tmp beside a good record
    f.write(b"ESS1\x10\x00")
    f.close()
    assert _counters(Device(_cfg(), path)) == kept
    os.rename(path, path + ".tmp")               # FAT cut between remove and rename: only .tmp left
    assert _counters(Device(_cfg(), path)) == kept
    f = open(path, "wb")                         # both copies corrupt: the ledger is unknown
    f.write(b"garbage")
    f.close()
    f = open(path + ".tmp", "r+b")
    f.seek(60)
    f.write(b"\x00\x01\x02\x03")
    f.close()
    try:
        Device(_cfg(), path)
        assert False, "started with an unknown ledger"
    except StateError:
        pass


def test_config_change_keeps_the_ledger_and_drops_the_window():
    path = _dir() + "/state"
    d = Device(_cfg(), path)
    _feed(d, 100)
    d.release()
    d = Device(_cfg(hash_seed="replanned"), path)
    assert d.ledger.spent == (1, 2) and d.ledger.releases == 1
    assert (d.agent.epoch, d.agent.seq) == (1, 1) and not d.sealed


def test_write_atomic_replaces_whole_files():
    path = _dir() + "/f"
    fs.write_atomic(path, lambda f: f.write(b"one"))
    fs.write_atomic(path, lambda f: f.write(b"two!"))
    assert open(path, "rb").read() == b"two!" and not fs.exists(path + ".tmp")
