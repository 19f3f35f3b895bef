"""Platform entropy for seeding the DRBG, with start-up health checks.

``os.urandom`` is the source on every port that has it (CPython, MicroPython
unix, ESP32, RP2). On ESP32 it is truly random only while Wi-Fi/BT is on, and on
RP2040 it is a ROSC-seeded software PRNG; the DRBG makes either usable, and the
checks below refuse an obviously broken source (stuck or repeating output).
A timer reading is mixed into the nonce; it adds little entropy but guarantees
distinct nonces across boots when the source is weak.
"""
try:
    import os
    _urandom = os.urandom
except (ImportError, AttributeError):  # a port without os.urandom
    _urandom = None

from firmware_shims.drbg import EntropyError

ENTROPY_BYTES = 48  # 384 bits: SP 800-90A wants >= 256 bits plus a nonce


def _ticks():
    try:
        import time
        if hasattr(time, "ticks_us"):
            return time.ticks_us()
        return time.time_ns()
    except Exception:  # no clock: the nonce still has os.urandom bytes
        return 0


def health_check(block, previous=None):
    """Raise EntropyError if ``block`` looks stuck or repeats ``previous``.

    Catches the failures that matter on devices: a source returning a constant
    byte, a short repeating pattern, or the same block twice in a row.
    """
    n = len(block)
    if n < 8:
        raise EntropyError("entropy block too short")
    distinct = {}
    for b in block:
        distinct[b] = 1
    if len(distinct) < 4:
        raise EntropyError("entropy source is stuck (fewer than 4 distinct byte values)")
    for period in (1, 2, 4, 8):
        if period < n and bytes(block[period:]) == bytes(block[:n - period]):
            raise EntropyError("entropy source repeats with period %d" % period)
    if previous is not None and bytes(previous) == bytes(block):
        raise EntropyError("entropy source returned the same block twice")


def gather(source=None):
    """Return ``(entropy, nonce)`` bytes for the DRBG, after health checks.

    ``source(n) -> bytes`` defaults to ``os.urandom``; tests inject broken ones.
    """
    source = source or _urandom
    if source is None:
        raise EntropyError("this platform has no entropy source (os.urandom)")
    first = source(ENTROPY_BYTES)
    health_check(first)
    second = source(16)
    health_check(second, first[:16])
    t = _ticks() & 0xFFFFFFFF
    nonce = bytes(second) + bytes(((t >> 24) & 255, (t >> 16) & 255, (t >> 8) & 255, t & 255))
    return bytes(first), nonce
