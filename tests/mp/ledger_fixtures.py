"""Shared helpers of the portable ledger tests (test_ledger_portable.py,
test_ledger_attacks_portable.py, test_ledger_counter_portable.py): a provisioned
device in a fresh directory under /tmp, its config, readings and raw file
access. Split from the tests so that each module fits the 64wK MicroPython heap
on its own."""
import os

from agent.errors import StateError
from agent.ledger import Device, provision

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


def _header(rec):
    """(header length, header) of a state record's bytes."""
    n = int.from_bytes(rec[4:8], "little")
    import json
    return n, json.loads(rec[8:8 + n].decode())
