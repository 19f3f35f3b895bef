"""Platform entropy for seeding the DRBG, with start-up health checks.

``os.urandom`` is the source on every port that has it (CPython, MicroPython
unix, ESP32, RP2). On ESP32 it is truly random only while Wi-Fi/BT is on, and on
RP2040 it is a ROSC-seeded software PRNG; the DRBG makes either usable, and the
checks below refuse an obviously broken source (stuck or repeating output).
A timer reading is mixed into the nonce; it adds little entropy but guarantees
distinct nonces across boots when the source is weak.
"""
from . import EntropyError

try:
    import os
    _urandom = os.urandom
except (ImportError, AttributeError):  # a port without os.urandom
    _urandom = None


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
    byte, a short repeating pattern, a counter or other arithmetic progression
    (its byte-to-byte differences are stuck), or the same block twice in a row.
    A random 16-byte block fails any of these with probability below 1e-14.
    """
    n = len(block)
    if n < 8:
        raise EntropyError("entropy block too short")
    distinct = {}
    steps = {}
    for i in range(n):
        distinct[block[i]] = 1
        if i:
            steps[(block[i] - block[i - 1]) & 255] = 1
    if len(distinct) < 4:
        raise EntropyError("entropy source is stuck (fewer than 4 distinct byte values)")
    if len(steps) < 4:
        raise EntropyError("entropy source counts (fewer than 4 distinct byte-to-byte steps)")
    for period in (1, 2, 4, 8):
        if period < n and bytes(block[period:]) == bytes(block[:n - period]):
            raise EntropyError("entropy source repeats with period %d" % period)
    if previous is not None and bytes(previous) == bytes(block):
        raise EntropyError("entropy source returned the same block twice")


def _draw(source, n):
    try:
        b = source(n)
    except Exception as e:  # any failure of the platform source: no noise
        raise EntropyError("entropy source failed: %r" % (e,))
    if b is None or len(b) != n:
        raise EntropyError("entropy source returned %s bytes, not %d" % (None if b is None else len(b), n))
    return b


def gather(source=None):
    """Return ``(entropy, nonce)`` bytes for the DRBG, after health checks.

    ``source(n) -> bytes`` defaults to ``os.urandom``; tests inject broken ones.
    A source that raises or returns the wrong number of bytes fails closed too.
    """
    source = source or _urandom
    if source is None:
        raise EntropyError("this platform has no entropy source (os.urandom)")
    first = _draw(source, ENTROPY_BYTES)
    health_check(first)
    second = _draw(source, 16)
    health_check(second, first[:16])
    t = _ticks() & 0xFFFFFFFF
    nonce = bytes(second) + bytes(((t >> 24) & 255, (t >> 16) & 255, (t >> 8) & 255, t & 255))
    return bytes(first), nonce
