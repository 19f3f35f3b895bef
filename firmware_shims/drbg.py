"""HMAC_DRBG with SHA-256 (NIST SP 800-90A, section 10.1.2) and the byte source
that feeds the exact noise sampler.

Why a DRBG and not ``os.urandom`` directly: on several ports ``os.urandom`` is a
software PRNG or only truly random while the radio is up (docs/privacy.md §7),
and the sampler must be reproducible byte-for-byte across runtimes when a
test seed is given. The DRBG is seeded once from the platform entropy source and
then produces every noise byte.
"""
from . import EntropyError
from .hmac256 import hmac_sha256

PERSONALIZATION = b"edgesynth-noise-v1"
# generate requests before a reseed is required (SP 800-90A allows up to 2**48):
# 2**30 - 1, the largest small int of a 32-bit port, so a continual state (PHDStream,
# a few hundred requests per window) runs for millions of windows
RESEED_INTERVAL = 0x3FFFFFFF
BLOCK = 64                 # bytes per generate request feeding the sampler


class HmacDrbg:
    """HMAC_DRBG(SHA-256). ``generate(n)`` returns ``n`` bytes."""

    def __init__(self, entropy, nonce=b"", personalization=PERSONALIZATION):
        if len(entropy) < 16:
            raise EntropyError("DRBG needs at least 16 bytes of entropy input")
        self._k = b"\x00" * 32
        self._v = b"\x01" * 32
        self._update(bytes(entropy) + bytes(nonce) + bytes(personalization))
        self._requests = 0

    def _update(self, provided):
        self._k = hmac_sha256(self._k, self._v + b"\x00" + provided)
        self._v = hmac_sha256(self._k, self._v)
        if provided:
            self._k = hmac_sha256(self._k, self._v + b"\x01" + provided)
            self._v = hmac_sha256(self._k, self._v)

    def generate(self, n):
        if self._requests >= RESEED_INTERVAL:
            raise EntropyError("DRBG reseed interval reached")
        out = bytearray()
        while len(out) < n:
            self._v = hmac_sha256(self._k, self._v)
            out.extend(self._v)
        self._update(b"")
        self._requests += 1
        return bytes(out[:n])


class ByteSource:
    """Sequential bytes from a DRBG, read ``BLOCK`` bytes per request.

    ``below(m)`` is the exact uniform integer in ``[0, m)`` the sampler needs:
    whole bytes, big-endian, rejection above the largest multiple of ``m`` (no
    modulo bias). Consumption order is part of the cross-runtime contract.
    """

    def __init__(self, drbg):
        self._drbg = drbg
        self._buf = b""
        self._pos = 0
        self.consumed = 0  # bytes handed out, for work accounting in tests

    def byte(self):
        if self._pos >= len(self._buf):
            self._buf = self._drbg.generate(BLOCK)
            self._pos = 0
        b = self._buf[self._pos]
        self._pos += 1
        self.consumed += 1
        return b

    def below(self, m):
        """Uniform integer in [0, m) for integer m >= 1."""
        if m == 1:
            return 0
        k = 0
        span = 1
        while span < m:
            span <<= 8
            k += 1
        limit = span - span % m
        while True:
            v = 0
            for _ in range(k):
                v = (v << 8) | self.byte()
            if v < limit:
                return v % m


def seeded_source(seed):
    """A reproducible byte source from a caller-chosen seed.

    For tests and simulation only: anyone who knows the seed can subtract the
    noise. Devices in the field use ``platform_source()``.
    """
    if isinstance(seed, str):
        seed = seed.encode()
    seed = bytes(seed)
    # Pad a short seed with copies of its length byte, so that seeds differing
    # only in trailing zeros do not collide; reproducible, and not private.
    n = len(seed)
    material = seed + bytes((n,)) * (16 - n) if n < 16 else seed
    return ByteSource(HmacDrbg(material, b"seeded", PERSONALIZATION))


def platform_source(source=None):
    """A byte source seeded from the platform entropy (fails closed: EntropyError
    when ``source`` (default ``os.urandom``) fails the health checks)."""
    from .entropy import gather
    entropy, nonce = gather(source)
    return ByteSource(HmacDrbg(entropy, nonce, PERSONALIZATION))
