"""Platform monotonic counter: what makes an older device-state record stale.

agent/ledger.py numbers the state records it writes (1, 2, 3, ...) and keeps
this counter in step: it writes record c + 1, then advances the counter to
c + 1, and refuses a record below the counter as a restored copy. That refusal
is exactly as strong as the counter is hard to lower.

Interface a board implements (``platform_counter`` returns one):

    c.read()          -> int: the current value, 0 on a fresh board (< 2**53)
    c.advance(n)      make the value at least n (never lower it); raise OSError
                      if the hardware refuses, so the device stops persisting
    c.rollback_proof  True only when nothing that can be written through the
                      filesystem or a flash image can lower the value: a
                      hardware monotonic counter, a secure element's counter,
                      or one-time-programmable bits (eFuse/OTP, one more bit
                      burnt per step: every persist is one step, so size it)

``FileCounter`` is the stand-in for the unix port and CPython: the value lives
in a file next to the state. It is NOT rollback-proof: whoever can write the
filesystem can restore the counter file together with an old state file, or
delete both. A board port replaces ``platform_counter`` with its own counter.
"""
from firmware_shims import fs

MAX = 1 << 53  # a counter this high is damage, not use


def platform_counter(state_path):
    """The counter that guards the state record at ``state_path``.

    Unix port and CPython: a FileCounter in ``state_path + ".ctr"``. A board
    with a hardware counter returns that instead and ignores the path.
    """
    return FileCounter(state_path + ".ctr")


class FileCounter:
    """File-backed emulation of a monotonic counter (NOT rollback-proof).

    The value is ASCII decimal digits and a newline, replaced atomically
    (fs.write_atomic); reads take the highest well-formed copy, so a torn
    write reads as the old value. A file that exists but holds no well-formed
    copy raises OSError: the device then refuses to start.
    """

    rollback_proof = False

    def __init__(self, path):
        self.path = path

    def read(self):
        value = None
        seen = False
        for cand in fs.candidates(self.path):
            if not fs.exists(cand):
                continue
            seen = True
            v = _parse(cand)
            if v is not None and (value is None or v > value):
                value = v
        if value is None:
            if seen:
                raise OSError("%s: the counter file is damaged" % self.path)
            return 0
        return value

    def advance(self, n):
        if n > self.read():
            text = ("%d\n" % n).encode()
            fs.write_atomic(self.path, lambda f: f.write(text))


def _parse(path):
    f = open(path, "rb")
    try:
        b = f.read(24)
    finally:
        f.close()
    if len(b) < 2 or b[-1] != 10:
        return None
    for c in b[:-1]:
        if not 48 <= c <= 57:
            return None
    v = int(b[:-1].decode())
    return v if v < MAX else None
