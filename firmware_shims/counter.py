"""Platform monotonic counter: what makes an older device-state record stale,
and the identity the board was last provisioned with.

agent/ledger.py numbers the state records it writes (1, 2, 3, ...) and keeps
this counter in step: it writes record c + 1, then advances the counter to
c + 1, and refuses a record below the counter as a restored copy. That refusal
is exactly as strong as the counter is hard to lower.

Beside the value, the counter's storage keeps the fingerprint of the identity
provisioned last (16 bytes, agent.persist.identity: derived from the device
key, never the key). ``provision`` refuses an identity already bound there,
so deleting the state files cannot restart its ledger, and the device refuses
to start from a state of another identity than the bound one. Only the last
identity is kept: the binding is as hard to change as its storage.

Interface a board implements (``platform_counter`` returns one):

    c.read()          -> int: the current value, 0 on a fresh board (< 2**53)
    c.advance(n)      make the value at least n (never lower it); raise OSError
                      if the hardware refuses, so the device stops persisting
    c.identity()      -> the bound fingerprint (16 bytes), None on a fresh board
    c.bind(ident)     replace the bound fingerprint by ``ident``; the value stays
    c.rollback_proof  True only when nothing that can be written through the
                      filesystem or a flash image can lower the value or change
                      the fingerprint: a hardware monotonic counter, a secure
                      element's counter and storage, or one-time-programmable
                      bits (eFuse/OTP, one more bit burnt per step: every
                      persist is one step, so size it)

``FileCounter`` is the stand-in for the unix port and CPython: value and
fingerprint live in a file next to the state. It is NOT rollback-proof:
whoever can write the filesystem can restore the counter file together with an
old state file, or delete both. A board port replaces ``platform_counter``
with its own counter.
"""
import binascii

from . import fs

MAX = 1 << 53  # a counter this high is damage, not use
IDENT_BYTES = 16  # bytes of a bound identity's fingerprint


def platform_counter(state_path):
    """The counter that guards the state record at ``state_path``.

    Unix port and CPython: a FileCounter in ``state_path + ".ctr"``. A board
    with a hardware counter returns that instead and ignores the path.
    """
    return FileCounter(state_path + ".ctr")


class FileCounter:
    """File-backed emulation of a monotonic counter (NOT rollback-proof).

    The file holds the value in ASCII decimal digits, a space, the bound
    fingerprint in hex (nothing before provisioning) and a newline, replaced
    atomically (fs.write_atomic); reads take the highest well-formed copy, so
    a torn write reads as the old value. A file that exists but holds no
    well-formed copy raises OSError: the device then refuses to start.
    """

    rollback_proof = False

    def __init__(self, path):
        self.path = path

    def _newest(self):
        # (value, fingerprint, file) of the highest well-formed copy
        best = None
        seen = False
        for cand in fs.candidates(self.path):
            if fs.exists(cand):
                seen = True
                got = _parse(cand)
                if got and (best is None or got[0] > best[0]):
                    best = got + (cand,)
        if best:
            return best
        if seen:
            raise OSError("%s: the counter file is damaged" % self.path)
        return 0, None, self.path

    def read(self):
        return self._newest()[0]

    def identity(self):
        return self._newest()[1]

    def advance(self, n):
        self._set(n, None)

    def bind(self, ident):
        self._set(0, bytes(ident))

    def _set(self, n, ident):
        v, old, found = self._newest()
        if n > v or ident:
            fs.promote(self.path, found)  # the write below empties the .tmp: keep the copy just read
            text = b"%d %s\n" % (max(n, v), binascii.hexlify(ident or old or b""))
            fs.write_atomic(self.path, lambda f: f.write(text))


def _parse(path):
    # (value, fingerprint or None), or None for a malformed copy
    f = open(path, "rb")
    try:
        b = f.read(64)
    finally:
        f.close()
    v, _, h = b[:-1].partition(b" ")
    if b[-1:] != b"\n" or not v.isdigit() or len(h) not in (0, 2 * IDENT_BYTES) or int(v) >= MAX:
        return None
    try:
        return int(v), binascii.unhexlify(h) or None
    except ValueError:
        return None
