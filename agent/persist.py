"""The device's persisted state: noisy counters, release counters and the ledger.

One record per file, replaced atomically through firmware_shims/fs.py:

    b"ESS1" | uint32 LE header length | header JSON | counter arrays | SHA-256

The header holds the config fingerprint, device id, epoch, seq, whether the
state is sealed (released), the ledger (epsilon spent as a fraction, releases)
and each mechanism's clamp counter; then every mechanism's counter arrays in
wire order, raw in the device's own byte order; then SHA-256 of all bytes
before it. A record whose digest does not match is ignored, so a torn write
reads as the previous record (fs.candidates).

Persisting noisy counters is safe: they are private at rest (noise at birth,
docs/privacy.md section 5). What persistence prevents is the unsafe case: a
reboot that draws new noise for the same window, or that reopens a released
state, adds readings and releases it again with the old noise. The sealed flag
travels with the counters, so a restored released state stays sealed.
"""
import hashlib
import json
import os
import sys

from firmware_shims import fs

MAGIC = b"ESS1"
CHUNK = 256  # bytes of the buffer used to skip counters of a stale config


class StateError(Exception):
    """The persisted state exists but no copy of it is valid."""


def _canon(v, out):
    # deterministic bytes of a JSON-like value, independent of dict order
    if isinstance(v, dict):
        out.append("{")
        for k in sorted(v):
            out.append(repr(k))
            out.append(":")
            _canon(v[k], out)
            out.append(",")
        out.append("}")
    elif isinstance(v, list):
        out.append("[")
        for x in v:
            _canon(x, out)
            out.append(",")
        out.append("]")
    else:
        out.append(repr(v))


def fingerprint(cfg):
    """Hex SHA-256 of the config parts that shape the state (not "device", "plan")."""
    out = []
    _canon([cfg.get("format"), cfg.get("epsilon"), cfg.get("relation", "add-remove"),
            cfg.get("mechanisms")], out)
    return "".join("%02x" % b for b in hashlib.sha256("".join(out).encode()).digest())


def save(path, agent, ledger, fp):
    """Write ``agent``'s state and ``ledger`` atomically to ``path``."""
    hdr = {"fp": fp, "order": sys.byteorder, "device": agent.device_id.decode(), "epoch": agent.epoch,
           "seq": agent.seq, "sealed": 1 if agent.sealed else 0, "spent": [ledger.spent[0], ledger.spent[1]],
           "releases": ledger.releases, "clamp": [getattr(m, "clamp", None) for m in agent.mechs]}
    head = json.dumps(hdr).encode()

    def write(f):
        h = hashlib.sha256()

        def put(b):
            h.update(b)
            f.write(b)
        put(MAGIC)
        put(len(head).to_bytes(4, "little"))
        put(head)
        for m in agent.mechs:
            for arr in m.counters():
                put(arr)
        f.write(h.digest())
    fs.write_atomic(path, write)


def _read_exact(f, n, h):
    b = f.read(n)
    if b is None or len(b) != n:
        raise StateError("record truncated")
    h.update(b)
    return b


def _load_one(path, cfg, fp, key):
    import agent as agent_mod
    f = open(path, "rb")
    try:
        h = hashlib.sha256()
        if _read_exact(f, 4, h) != MAGIC:
            raise StateError("not a state record")
        n = int.from_bytes(_read_exact(f, 4, h), "little")
        if n > 4096:
            raise StateError("header too long")
        try:
            hdr = json.loads(_read_exact(f, n, h).decode())
        except ValueError:
            raise StateError("header is not JSON")
        a = None
        if hdr.get("fp") == fp and hdr.get("order") == sys.byteorder:
            def fill(mechs):
                clamps = hdr["clamp"]
                for i in range(len(mechs)):
                    for arr in mechs[i].counters():
                        f.readinto(arr)
                        h.update(arr)
                    if clamps[i] is not None:
                        mechs[i].clamp = clamps[i]
            a = agent_mod.Agent(cfg, device_id=hdr["device"], epoch=hdr["epoch"], seq=hdr["seq"], key=key,
                                restore=fill)
        else:  # another config: keep the ledger, skip (and hash) the counters
            _skip(f, os.stat(path)[6] - 8 - n - 32, h)
        if f.read(32) != h.digest():
            raise StateError("record checksum does not match")
        if a is not None and hdr["sealed"]:
            a.release(_discard)  # seal again: the same bytes as the release it made
        return hdr, a
    finally:
        f.close()


def _skip(f, n, h):
    # hash n bytes through one small buffer: no allocation the size of a state
    if n < 0:
        raise StateError("record truncated")
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    while n > 0:
        k = f.readinto(view[:min(n, CHUNK)])
        if not k:
            raise StateError("record truncated")
        h.update(view[:k])
        n -= k


def _discard(buf, n):
    pass


def load(path, cfg, fp, key=None):
    """``(header, agent or None)`` of the newest valid record, or None when no
    record exists. The agent is None when the record belongs to another config
    (its counters are dropped, its ledger kept). Raises StateError when records
    exist but none is valid: the ledger is unknown, so the device must not run.
    """
    seen = False
    for cand in fs.candidates(path):
        if not fs.exists(cand):
            continue
        seen = True
        try:
            return _load_one(cand, cfg, fp, key)
        except (StateError, KeyError, TypeError, ValueError, OSError):
            continue
    if seen:
        raise StateError("%s: no valid copy of the device state; refusing to start with an unknown ledger" % path)
    return None
