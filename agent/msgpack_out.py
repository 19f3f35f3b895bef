"""A small streaming msgpack encoder for the device (MicroPython has no msgpack).

It writes canonical bytes: the smallest msgpack format for every integer, float64
for floats, and maps whose keys the caller emits in sorted order. Output goes to
a ``sink(buf, n)`` callable that consumes the first ``n`` bytes of ``buf``; with
no sink the encoder only counts bytes, which is how a frame learns its length
before it is streamed. All scratch space is allocated once here, so encoding
allocates nothing per value (docs/deployment.md, "Streaming the release").
"""
import struct

CHUNK = 256  # bytes per counter chunk handed to the sink


class Encoder:
    """Streams msgpack values to ``self.sink``; ``self.n`` counts bytes written."""

    def __init__(self):
        # one exact-size scratch buffer per header size, plus a counter chunk
        self._s = [bytearray(i) for i in range(10)]
        self._chunk = bytearray(CHUNK)
        self.sink = None
        self.n = 0

    def reset(self, sink):
        self.sink = sink
        self.n = 0

    def _emit(self, buf, n):
        self.n += n
        if self.sink is not None:
            self.sink(buf, n)

    def raw(self, data):
        """Bytes already in msgpack form (pre-encoded keys and strings)."""
        self._emit(data, len(data))

    def _head(self, fmt, tag, value, size):
        b = self._s[size]
        b[0] = tag
        struct.pack_into(fmt, b, 1, value)
        self._emit(b, size)

    def uint(self, v):
        if v < 0x80:
            b = self._s[1]
            b[0] = v
            self._emit(b, 1)
        elif v < 0x100:
            self._head(">B", 0xCC, v, 2)
        elif v < 0x10000:
            self._head(">H", 0xCD, v, 3)
        elif v < 0x100000000:
            self._head(">I", 0xCE, v, 5)
        else:
            self._head(">Q", 0xCF, v, 9)

    def int(self, v):
        if v >= 0:
            self.uint(v)
        elif v >= -32:
            b = self._s[1]
            b[0] = v & 0xFF
            self._emit(b, 1)
        elif v >= -0x80:
            self._head(">b", 0xD0, v, 2)
        elif v >= -0x8000:
            self._head(">h", 0xD1, v, 3)
        elif v >= -0x80000000:
            self._head(">i", 0xD2, v, 5)
        else:
            self._head(">q", 0xD3, v, 9)

    def float(self, v):
        self._head(">d", 0xCB, v, 9)

    def bounds(self, values, lo, hi):
        """One bound per channel (``values`` is ``lo`` or ``hi``) as an array:
        an integer channel's, whose ``lo`` and ``hi`` are both ints (as
        ``plan --integer`` writes them), as ints, so the host knows the
        channel is integer from the frame; any other channel's as float64,
        however its config wrote them. The C core's es_enc_bounds."""
        self.array(len(values))
        for i in range(len(values)):
            if isinstance(lo[i], int) and isinstance(hi[i], int):
                self.int(values[i])
            else:
                self.float(float(values[i]))

    def nil(self):
        b = self._s[1]
        b[0] = 0xC0
        self._emit(b, 1)

    def _sized(self, n, fix, fixmax, t8, t16, t32):
        if n <= fixmax:
            b = self._s[1]
            b[0] = fix | n
            self._emit(b, 1)
        elif t8 and n < 0x100:
            self._head(">B", t8, n, 2)
        elif n < 0x10000:
            self._head(">H", t16, n, 3)
        else:
            self._head(">I", t32, n, 5)

    def array(self, n):
        self._sized(n, 0x90, 15, 0, 0xDC, 0xDD)

    def map(self, n):
        self._sized(n, 0x80, 15, 0, 0xDE, 0xDF)

    def str(self, data):
        """A UTF-8 string given as bytes."""
        self._sized(len(data), 0xA0, 31, 0xD9, 0xDA, 0xDB)
        self._emit(data, len(data))

    def bin_head(self, n):
        if n < 0x100:
            self._head(">B", 0xC4, n, 2)
        elif n < 0x10000:
            self._head(">H", 0xC5, n, 3)
        else:
            self._head(">I", 0xC6, n, 5)

    def bin32_head(self, n):
        """bin32 regardless of size, for lengths patched before streaming."""
        self._head(">I", 0xC6, n, 5)

    def packed(self, arrays, fmt, size):
        """The items of ``arrays``, concatenated, as one bin of little-endian
        values (fmt '<i' or '<H', ``size`` bytes each)."""
        count = 0
        for arr in arrays:
            count += len(arr)
        self.bin_head(count * size)
        if self.sink is None:
            self.n += count * size
            return
        chunk = self._chunk
        per = CHUNK // size
        fill = 0
        for arr in arrays:
            for i in range(len(arr)):
                struct.pack_into(fmt, chunk, fill * size, arr[i])
                fill += 1
                if fill == per:
                    self._emit(chunk, CHUNK)
                    fill = 0
        if fill:
            self._emit(chunk, fill * size)


def key(name):
    """Pre-encode a short map key (fixstr) at construction time."""
    data = name.encode()
    if len(data) > 31:
        raise ValueError("map keys are short ASCII names")
    return bytes((0xA0 | len(data),)) + data
