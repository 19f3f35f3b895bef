"""HMAC-SHA256 (RFC 2104) over ``hashlib.sha256``.

MicroPython ships ``hashlib.sha256`` but no ``hmac`` module, and its hash
objects cannot be copied, so the inner and outer pads are kept as bytes and a
fresh hash object is made per message. Used by the DRBG and to tag frames.
"""
import hashlib

BLOCK = 64   # SHA-256 block size in bytes
DIGEST = 32  # SHA-256 digest size in bytes


def _pads(key):
    if len(key) > BLOCK:
        key = hashlib.sha256(key).digest()
    ipad = bytearray(BLOCK)
    opad = bytearray(BLOCK)
    for i in range(BLOCK):
        b = key[i] if i < len(key) else 0
        ipad[i] = b ^ 0x36
        opad[i] = b ^ 0x5C
    return bytes(ipad), bytes(opad)


class HMAC256:
    """Incremental HMAC-SHA256 with a fixed key.

    ``start()`` begins a message, ``update(data)`` feeds bytes (any buffer),
    ``finish()`` returns the 32-byte tag. ``mac(data)`` does all three.
    """

    def __init__(self, key):
        self._ipad, self._opad = _pads(bytes(key))
        self._inner = None

    def start(self):
        self._inner = hashlib.sha256(self._ipad)

    def update(self, data):
        self._inner.update(data)

    def finish(self):
        inner = self._inner.digest()
        self._inner = None
        outer = hashlib.sha256(self._opad)
        outer.update(inner)
        return outer.digest()

    def mac(self, data):
        self.start()
        self.update(data)
        return self.finish()


def hmac_sha256(key, data):
    """One-shot HMAC-SHA256 of ``data`` under ``key``; returns 32 bytes."""
    return HMAC256(key).mac(data)
