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
import hashlib
import os

from agent.errors import BudgetError, ConfigError, SealedError
from agent.ledger import Device, Ledger, provision
from agent.persist import StateError
from firmware_shims import fs
from firmware_shims.counter import FileCounter
from firmware_shims.hmac256 import hmac_sha256

KEY = bytes(range(32))
ID = "gw-7"


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


def _fresh(cfg=None):
    """(state path, Device) of a newly provisioned identity."""
    cfg = cfg or _cfg()
    path = _dir() + "/state"
    provision(cfg, path, ID, KEY)
    return path, Device(cfg, path, ID, KEY)


def _boot(path, cfg=None, device_id=ID, key=KEY):
    return Device(cfg or _cfg(), path, device_id, key)


def _refused(path, cfg=None, device_id=ID, key=KEY, why=""):
    try:
        _boot(path, cfg, device_id, key)
    except StateError as e:
        assert why in str(e), str(e)
        return
    assert False, "started from a state it must refuse"


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


def _read(path):
    f = open(path, "rb")
    try:
        return f.read()
    finally:
        f.close()


def _write(path, b):
    f = open(path, "wb")
    try:
        f.write(b)
    finally:
        f.close()


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
    os.rename(path, path + ".tmp")               # FAT cut between remove and rename: only .tmp left
    assert _counters(_boot(path)) == kept
    _write(path, b"garbage")                     # both copies corrupt: the ledger is unknown
    f = open(path + ".tmp", "r+b")
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


# ---- rollback, deletion and forgery of the state (issue 11, item 13)

def _header(rec):
    n = int.from_bytes(rec[4:8], "little")
    import json
    return n, json.loads(rec[8:8 + n].decode())


def test_restoring_an_older_record_is_refused():
    cfg = _cfg(lifetime=(10, 1))
    path, d = _fresh(cfg)
    _feed(d, 100)
    d.checkpoint()
    old = _read(path)                            # window 0, unreleased
    d.release()
    d = None
    _write(path, old)                            # rolled back, window 0 would take more readings and be
    _refused(path, cfg, why="restored copy")     # released again with the same noise: refused


def test_overspending_by_restoring_a_copy_is_refused():
    cfg = _cfg(lifetime=(1, 1))                  # two releases of 1/2
    path, d = _fresh(cfg)
    _feed(d, 50)
    d.release()
    d.next_epoch()
    copy = _read(path)                           # 1/2 spent
    _feed(d, 50, 1)
    d.release()
    d.next_epoch()
    d = None
    now = _read(path)                            # 1/1 spent
    _write(path, copy)
    _refused(path, cfg, why="restored copy")
    fs.remove(path)                              # the copy in the other slot: refused too
    _write(path + ".tmp", copy)
    _refused(path, cfg, why="restored copy")
    _write(path, now)                            # beside the real record the real record wins ...
    d = _boot(path, cfg)
    assert d.ledger.spent == (1, 1) and d.ledger.releases == 2
    _feed(d, 50, 2)
    try:                                         # ... and the budget is spent
        d.release()
        assert False, "released beyond the lifetime budget"
    except BudgetError:
        pass


def test_a_provisioned_device_without_state_refuses_until_reprovisioned():
    cfg = _cfg()
    path, d = _fresh(cfg)
    _feed(d, 100)
    d.release()
    d = None
    try:                                         # provisioning over a live ledger: refused
        provision(cfg, path, "gw-8", bytes(32 * [9]))
        assert False, "reset a ledger"
    except StateError:
        pass
    fs.remove(path)
    fs.remove(path + ".tmp")
    _refused(path, cfg, why="no state record")
    provision(cfg, path, "gw-8", bytes(32 * [9]))        # a new identity starts at the first window
    d = _boot(path, cfg, "gw-8", bytes(32 * [9]))
    assert (d.agent.epoch, d.ledger.releases) == (0, 0)
    d = None
    _refused(path, cfg, why="not authenticated")         # the old identity's key does not open it


def test_forged_records_are_refused():
    path, d = _fresh()
    _feed(d, 100)
    d.release()
    d = None
    rec = _read(path)
    n, hdr = _header(rec)
    assert hdr["spent"] == [1, 2]
    hdr["spent"] = [0, 1]                        # the forger's aim: an unspent ledger
    hdr["releases"] = 0
    import json
    head = json.dumps(hdr).encode()
    body = rec[:4] + len(head).to_bytes(4, "little") + head + rec[8 + n:-32]
    for tag in (hashlib.sha256(body).digest(),                 # the digest recomputed (ESS1's check)
                hmac_sha256(bytes(32 * [1]), body),            # another key
                hmac_sha256(KEY, body)):                       # the device key, not the state key
        _write(path, body + tag)
        _refused(path, why="not authenticated")
    from agent.persist import state_key
    _write(path, body + hmac_sha256(state_key(KEY), body))     # only the key holder can do this
    assert _boot(path).ledger.spent == (0, 1)


def test_the_old_unauthenticated_format_is_refused_by_name():
    path, d = _fresh()
    d = None
    rec = _read(path)
    body = b"ESS1" + rec[4:-32]
    _write(path, body + hashlib.sha256(body).digest())
    _refused(path, why="ESS1")


def test_another_device_id_or_budget_is_refused():
    path, d = _fresh(_cfg(lifetime=(1, 1)))
    d = None
    _refused(path, _cfg(lifetime=(1, 1)), device_id="gw-9", why="belongs to device")
    _refused(path, _cfg(lifetime=(100, 1)), why="lifetime_epsilon")


def test_a_persist_cut_before_its_counter_step_is_caught_up():
    path, d = _fresh()
    _feed(d, 100)
    d.checkpoint()
    old = _read(path)
    _feed(d, 10, 2)
    d.checkpoint()
    d = None
    n = _header(_read(path))[1]["ctr"]
    _write(path + ".ctr", ("%d\n" % (n - 1)).encode())   # the cut: record n on flash, counter at n - 1
    d = _boot(path)                                      # accepted: nothing of record n was sent ...
    assert FileCounter(path + ".ctr").read() == n        # ... and the counter caught up
    d = None
    _write(path, old)
    _refused(path, why="restored copy")


def test_a_stale_instance_cannot_persist():
    path, d = _fresh()
    d2 = _boot(path)
    d2.checkpoint()
    _feed(d, 10)
    try:
        d.release()
        assert False, "a second writer went unnoticed"
    except StateError:
        pass
    try:
        d.release()
        assert False, "released after a failed persist"
    except StateError:
        pass


def test_provisioning_checks_its_inputs():
    path = _dir() + "/state"
    for bad in ((ID, b"short"), ("", KEY), (ID * 20, KEY), ("gw\n7", KEY), (b"gw", KEY)):
        try:
            provision(_cfg(), path, bad[0], bad[1])
            assert False, "provisioned %r" % (bad,)
        except ConfigError:
            pass
    cfg = _cfg()
    cfg["device"]["first_epoch"] = -1
    try:
        provision(cfg, path, ID, KEY)
        assert False, "provisioned a negative first epoch"
    except ConfigError:
        pass
    assert not fs.exists(path)
    cfg["device"]["first_epoch"] = 7
    provision(cfg, path, ID, KEY)
    assert _boot(path, cfg).agent.epoch == 7


def test_file_counter_is_monotonic_but_not_rollback_proof():
    c = FileCounter(_dir() + "/c")
    assert c.read() == 0 and not c.rollback_proof
    c.advance(5)
    c.advance(3)                                 # never lowered
    assert c.read() == 5
    _write(c.path + ".tmp", b"9")                # a torn write (no newline) reads as the old value
    assert c.read() == 5
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


# ---- power cut after the rename (issue 11, item 14)

def test_a_newer_tmp_beside_an_older_state_is_loaded():
    path, d = _fresh()
    _feed(d, 100)
    d.checkpoint()
    old = _read(path)
    _feed(d, 100, 3)
    d.checkpoint()
    kept = _counters(d)
    d = None
    os.rename(path, path + ".tmp")               # the last rename did not survive the cut ...
    _write(path, old)                            # ... so `state` holds the record before it
    assert _counters(_boot(path)) == kept
    _write(path + ".ctr", ("%d\n" % _header(old)[1]["ctr"]).encode())
    assert _counters(_boot(path)) == kept        # by record number, even where the counter lags
