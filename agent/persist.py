"""The device's persisted state: noisy counters, release counters and the ledger.

One authenticated record per file, replaced atomically through firmware_shims/fs.py:

    b"ESS2" | uint32 LE header length | header JSON | counter arrays | tag

The tag is HMAC-SHA256 over every byte before it, under the state key
``HMAC-SHA256(device key, b"edgesynth-state-v1")`` (``state_key``): only a
holder of the device key can make a record the device accepts, and the label
keeps state tags apart from frame tags (HMAC under the device key itself over
a frame, which starts with byte 0x94). ``identity`` derives from the state key
the fingerprint the platform counter's storage binds at provisioning
(firmware_shims/counter.py). The header holds:

* ``ctr``: the record's number, 1, 2, 3, ... (agent/ledger.py keeps the
  platform monotonic counter in step and refuses a record below it);
* ``fp``: the config fingerprint, or null in the genesis record written at
  provisioning, which holds no window yet; ``order``: the byte order of the
  counter arrays;
* ``device``, ``epoch``, ``seq``, ``sealed`` (1 once the window was released);
* the ledger: ``budget`` (lifetime epsilon fixed at provisioning), ``spent``
  (a fraction) and ``releases``; ``clamp``: each mechanism's clamp counter.

Then every mechanism's counter arrays in wire order, raw in the device's own
byte order. ``ESS1`` records (SHA-256 instead of the tag, no counter) are
refused: anyone could rewrite them.

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

from .device import Agent
from .errors import StateError
from .shims import shim

fs = shim("fs")
IDENT_BYTES = shim("counter").IDENT_BYTES
hmac_sha256 = shim("hmac256").hmac_sha256

MAGIC = b"ESS2"
OLD_MAGIC = b"ESS1"
STATE_KEY_LABEL = b"edgesynth-state-v1"
IDENTITY_LABEL = b"edgesynth-identity-v1"
TAG = 32           # bytes of the HMAC-SHA256 tag
MAX_HEADER = 4096  # bytes
CHUNK = 256        # bytes of the buffer used to skip counters while verifying


def state_key(key):
    """The 32-byte key that authenticates state records, from the device key."""
    return hmac_sha256(key, STATE_KEY_LABEL)


def identity(key):
    """The fingerprint of the identity of device key ``key`` (16 bytes): it
    names the identity without revealing the key."""
    return hmac_sha256(state_key(key), IDENTITY_LABEL)[:IDENT_BYTES]


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


def _header(ctr, ledger, fp, device_id, epoch, seq, sealed, clamp):
    return {"ctr": ctr, "fp": fp, "order": sys.byteorder, "device": device_id, "epoch": epoch, "seq": seq,
            "sealed": sealed, "budget": [ledger.budget[0], ledger.budget[1]],
            "spent": [ledger.spent[0], ledger.spent[1]], "releases": ledger.releases, "clamp": clamp}


def save(path, mac, ctr, ledger, agent, fp):
    """Write record number ``ctr``: ``agent``'s window and ``ledger``, tagged
    with ``mac`` (an HMAC256 under ``state_key``), atomically to ``path``."""
    hdr = _header(ctr, ledger, fp, agent.device_id.decode(), agent.epoch, agent.seq, 1 if agent.sealed else 0,
                  [getattr(m, "clamp", None) for m in agent.mechs])
    _write(path, mac, hdr, agent.mechs)


def save_genesis(path, mac, ctr, ledger, device_id, epoch):
    """Write the genesis record of a provisioned identity: ``ledger``, no window;
    the first window will be ``epoch`` with seq 0."""
    _write(path, mac, _header(ctr, ledger, None, device_id, epoch, 0, 0, []), ())


def _write(path, mac, hdr, mechs):
    head = json.dumps(hdr).encode()

    def write(f):
        mac.start()

        def put(b):
            mac.update(b)
            f.write(b)
        put(MAGIC)
        put(len(head).to_bytes(4, "little"))
        put(head)
        for m in mechs:
            for arr in m.counters():
                put(arr)
        f.write(mac.finish())
    fs.write_atomic(path, write)


def _read_exact(f, n, mac):
    b = f.read(n)
    if b is None or len(b) != n:
        raise StateError("record truncated")
    mac.update(b)
    return b


def _head(f, mac):
    # magic, length and header of an open record, fed to a fresh tag computation
    mac.start()
    magic = _read_exact(f, 4, mac)
    if magic == OLD_MAGIC:
        raise StateError("record format ESS1 is no longer accepted: it is not authenticated "
                         "(re-provision the device under a new identity)")
    if magic != MAGIC:
        raise StateError("not a state record")
    n = int.from_bytes(_read_exact(f, 4, mac), "little")
    if n > MAX_HEADER:
        raise StateError("header too long")
    try:
        hdr = json.loads(_read_exact(f, n, mac).decode())
    except ValueError:
        raise StateError("header is not JSON")
    if not isinstance(hdr, dict):
        raise StateError("header is not an object")
    return n, hdr


def _check_tag(f, mac):
    got = f.read(TAG)
    want = mac.finish()
    diff = 0 if got is not None and len(got) == TAG else 1
    if not diff:
        for i in range(TAG):  # no early exit: the comparison takes the same time for every tag
            diff |= got[i] ^ want[i]
    if diff:
        raise StateError("record is not authenticated by this device's key (forged, damaged or another device's)")


def _verify(path, mac):
    f = open(path, "rb")
    try:
        n, hdr = _head(f, mac)
        _skip(f, os.stat(path)[6] - 8 - n - TAG, mac)
        _check_tag(f, mac)
    finally:
        f.close()
    ctr = hdr.get("ctr")
    if not isinstance(ctr, int) or ctr < 1:
        raise StateError("record has no counter")
    return hdr


def _skip(f, n, mac):
    # authenticate n bytes through one small buffer: no allocation the size of a state
    if n < 0:
        raise StateError("record truncated")
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    while n > 0:
        k = f.readinto(view[:min(n, CHUNK)])
        if not k:
            raise StateError("record truncated")
        mac.update(view[:k])
        n -= k


def newest(path, mac):
    """``(file, header)`` of the valid record with the highest ``ctr`` among
    ``path`` and ``path + ".tmp"`` (a power cut can leave the newer in either),
    or None when neither file exists. Raises StateError when a file exists but
    no copy is valid: the ledger is unknown, so the device must not run.
    Reads the records without allocating their counters.
    """
    best = None
    why = []
    for cand in fs.candidates(path):
        if not fs.exists(cand):
            continue
        try:
            hdr = _verify(cand, mac)
        except (StateError, ValueError, OSError) as e:
            why.append("%s: %s" % (cand, e))
            continue
        if best is None or hdr["ctr"] > best[1]["ctr"]:
            best = (cand, hdr)
    if best is None and why:
        raise StateError("no valid copy of the device state (%s); refusing to start with an unknown ledger"
                         % "; ".join(why))
    return best


def restore(path, hdr, cfg, fp, mac, key=None):
    """The agent of the record ``hdr`` that ``newest`` found in ``path``, its
    noise and counters restored (sealed again if it was released), or None when
    the record holds no window of this config (the genesis record, or another
    config's window: its counters are dropped, its ledger kept). The record is
    authenticated again as it is read; StateError if it changed meanwhile.
    """
    if hdr["fp"] != fp or hdr["order"] != sys.byteorder:
        return None
    f = open(path, "rb")
    try:
        if _head(f, mac)[1] != hdr:
            raise StateError("%s changed while it was read" % path)

        def fill(mechs):
            clamps = hdr["clamp"]
            for i in range(len(mechs)):
                for arr in mechs[i].counters():
                    f.readinto(arr)
                    mac.update(arr)
                if clamps[i] is not None:
                    mechs[i].clamp = clamps[i]
        a = Agent(cfg, device_id=hdr["device"], epoch=hdr["epoch"], seq=hdr["seq"], key=key,
                            restore=fill)
        _check_tag(f, mac)
    finally:
        f.close()
    if hdr["sealed"]:
        a.release(_discard)  # seal again: the same bytes as the release it made
    return a


def _discard(buf, n):
    pass
