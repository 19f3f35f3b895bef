"""Portable tests of the ledger against rollback, deletion and forgery of the
state and against re-provisioning (docs/trust.md §6): CPython (pytest) and the
MicroPython unix port (tests/mp/run.py), with the file-backed platform counter
of the unix port. The counter itself and power cuts: test_ledger_counter_portable.py."""
import hashlib

from ledger_fixtures import ID, KEY, _boot, _cfg, _dir, _feed, _fresh, _header, _read, _refused, _write

from agent.errors import BudgetError, ConfigError, StateError
from agent.ledger import provision
from firmware_shims import fs
from firmware_shims.hmac256 import hmac_sha256


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
    ctr = _read(path + ".ctr")
    try:                                         # the same identity again: its ledger would restart
        provision(cfg, path, ID, KEY)
        assert False, "re-provisioned a bound identity"
    except StateError as e:
        assert "already provisioned" in str(e), str(e)
    assert _read(path + ".ctr") == ctr and not fs.exists(path)  # the counter intact, nothing written
    provision(cfg, path, "gw-8", bytes(32 * [9]))        # a new identity starts at the first window ...
    assert _header(_read(path))[1]["ctr"] > int(ctr.split()[0])  # ... numbered above the old counter
    d = _boot(path, cfg, "gw-8", bytes(32 * [9]))
    assert (d.agent.epoch, d.ledger.releases) == (0, 0)
    d = None
    _refused(path, cfg, why="not authenticated")         # the old identity's key does not open it
    fs.remove(path + ".ctr")                             # nor does a reset counter storage start it
    _refused(path, cfg, "gw-8", bytes(32 * [9]), why="bound to")


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
    path = _fresh()[0]
    rec = _read(path)
    body = b"ESS1" + rec[4:-32]
    _write(path, body + hashlib.sha256(body).digest())
    _refused(path, why="ESS1")


def test_another_device_id_or_budget_is_refused():
    path = _fresh(_cfg(lifetime=(1, 1)))[0]
    _refused(path, _cfg(lifetime=(1, 1)), device_id="gw-9", why="belongs to device")
    _refused(path, _cfg(lifetime=(100, 1)), why="lifetime_epsilon")


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
