"""The device's outbox: released frames kept on flash until the gateway's receipt.

One file per frame in the outbox directory, named by its place in the queue
(``000000007.f``), written atomically through firmware_shims/fs.py (temp file +
rename, as agent/persist.py writes the ledger), so a power cut leaves either
the whole record or none; a complete ``.tmp`` left by a rename the cut undid
is found by ``fs.candidates`` and promoted. Each file holds

    b"ESO1" | epoch uint32 LE | seq uint32 LE | frame length uint32 LE | SHA-256 of the frame | frame

The SHA-256 names the frame in receipts (docs/transport.md) and, checked when
the outbox is opened, rejects a torn or damaged file. Frames are not
authenticated here: their own HMAC tag protects them at the gateway.

The capacity is fixed when the outbox is made: at most ``max_frames`` frames
and ``max_bytes`` bytes of frames. ``put`` on a full outbox raises
``OutboxFull`` and never drops or overwrites a frame. The bookkeeping is
preallocated (``max_frames`` slots): adding or freeing a frame allocates no
heap beyond the file name and the SHA-256 computation.
"""
import hashlib
import os

from ..shims import shim

fs = shim("fs")

MAGIC = b"ESO1"
HEAD = 48          # bytes before the frame: magic, epoch, seq, length, SHA-256
DIGEST = 32        # bytes of a SHA-256
CHUNK = 256        # bytes of the buffer that hashes a file while the outbox is opened
MAX_NUMBER = 0x3FFFFFFF  # 2**30 - 1: queue numbers stay small ints on every port


class OutboxFull(Exception):
    """The outbox holds ``max_frames`` frames or ``max_bytes`` bytes: the frame
    was not stored (nothing is overwritten); wait for receipts to free room."""


class Outbox:
    """A bounded queue of frames in ``directory`` (made if missing) that
    survives reboots: a new Outbox on the same directory holds the frames not
    yet freed, in the order they were put.

    ``max_frames`` (1..1024) and ``max_bytes`` (bytes of frames, >= 1) bound it.
    Slots are numbered 0..max_frames-1; ``slots()`` lists the used ones oldest
    first; ``epoch(slot)``, ``seq(slot)``, ``size(slot)`` describe a frame.
    """

    def __init__(self, directory, max_frames=16, max_bytes=65536):
        if not 1 <= max_frames <= 1024 or max_bytes < 1:
            raise ValueError("outbox capacity must be 1..1024 frames and at least 1 byte")
        self.directory = directory.rstrip("/") or "/"
        self.max_frames = max_frames
        self.max_bytes = max_bytes
        self.count = 0      # frames held
        self.bytes = 0      # bytes of frames held
        self.dropped = 0    # damaged files found and removed when the outbox was opened
        self._num = [-1] * max_frames    # queue number of each slot, -1 when free
        self._epoch = [0] * max_frames
        self._seq = [0] * max_frames
        self._size = [0] * max_frames
        self._digest = bytearray(DIGEST * max_frames)
        self._next = 0
        self._head = bytearray(HEAD)
        if not fs.exists(self.directory):
            os.mkdir(self.directory)
        self._load()

    # ------------------------------------------------------------ queries
    def held(self, slot):
        """Whether ``slot`` holds a frame."""
        return self._num[slot] >= 0

    def epoch(self, slot):
        return self._epoch[slot]

    def seq(self, slot):
        return self._seq[slot]

    def size(self, slot):
        return self._size[slot]

    def digest(self, slot):
        """The SHA-256 of the frame in ``slot`` (a 32-byte memoryview)."""
        return memoryview(self._digest)[slot * DIGEST:(slot + 1) * DIGEST]

    def slots(self):
        """The used slots, oldest frame first."""
        used = [i for i in range(self.max_frames) if self._num[i] >= 0]
        used.sort(key=lambda i: self._num[i])
        return used

    def find(self, digest):
        """The slot holding the frame of SHA-256 ``digest`` (32 bytes), or -1."""
        d = self._digest
        for i in range(self.max_frames):
            if self._num[i] < 0:
                continue
            base = i * DIGEST
            for j in range(DIGEST):
                if d[base + j] != digest[j]:
                    break
            else:
                return i
        return -1

    def read_into(self, slot, buf):
        """Read the frame of ``slot`` into ``buf`` (at least ``size(slot)``
        bytes); returns its length."""
        n = self._size[slot]
        if len(buf) < n:
            raise ValueError("frame of %d bytes does not fit a %d-byte buffer" % (n, len(buf)))
        f = open(self._path(self._num[slot]), "rb")
        try:
            f.seek(HEAD)
            view = memoryview(buf)
            got = 0
            while got < n:
                k = f.readinto(view[got:n])
                if not k:
                    raise OSError("outbox file truncated")
                got += k
        finally:
            f.close()
        return n

    # ------------------------------------------------------------ changes
    def put(self, epoch, seq, frame):
        """Store ``frame`` (bytes-like) durably; return its slot. A frame
        already held (same bytes, e.g. a release resent after a reboot) keeps
        its slot. OutboxFull when there is no room: nothing is changed."""
        n = len(frame)
        digest = hashlib.sha256(frame).digest()
        slot = self.find(digest)
        if slot >= 0:
            return slot
        if self.count >= self.max_frames or self.bytes + n > self.max_bytes:
            raise OutboxFull("outbox full: %d of %d frames, %d + %d of %d bytes; the frame of epoch %d seq %d "
                             "was not stored (no receipts yet: is the gateway running?)"
                             % (self.count, self.max_frames, self.bytes, n, self.max_bytes, epoch, seq))
        if not (0 <= epoch and epoch >> 16 <= 0xFFFF and 0 <= seq and seq >> 16 <= 0xFFFF):
            raise ValueError("epoch and seq must be 0..2**32-1")
        if self._next > MAX_NUMBER:
            raise OutboxFull("outbox numbering exhausted; empty the outbox directory to restart it")
        slot = self._num.index(-1)
        head = self._head
        head[0:4] = MAGIC
        _u32(head, 4, epoch)
        _u32(head, 8, seq)
        _u32(head, 12, n)
        head[16:HEAD] = digest

        def write(f):
            f.write(head)
            f.write(frame)
        path = self._path(self._next)
        try:
            fs.write_atomic(path, write)
        except OSError as e:  # e.g. ENOSPC: the flash is full; the frame is not stored
            fs.remove(path + ".tmp")
            raise OutboxFull("outbox %s: the frame of epoch %d seq %d was not stored: %s (flash full?)"
                             % (self.directory, epoch, seq, e))
        self._take(slot, self._next, epoch, seq, n, digest)
        self._next += 1
        return slot

    def free(self, slot):
        """Delete the frame of ``slot`` (its receipt arrived)."""
        num = self._num[slot]
        if num < 0:
            return
        path = self._path(num)
        fs.remove(path + ".tmp")
        fs.remove(path)
        self._num[slot] = -1
        self.count -= 1
        self.bytes -= self._size[slot]

    # ------------------------------------------------------------ internals
    def _path(self, num):
        return "%s/%09d.f" % (self.directory, num)

    def _take(self, slot, num, epoch, seq, n, digest):
        self._num[slot] = num
        self._epoch[slot] = epoch
        self._seq[slot] = seq
        self._size[slot] = n
        self._digest[slot * DIGEST:(slot + 1) * DIGEST] = digest
        self.count += 1
        self.bytes += n

    def _load(self):
        nums = []
        for name in os.listdir(self.directory):
            base = name[:-4] if name.endswith(".tmp") else name
            if base.endswith(".f") and base[:-2].isdigit():
                num = int(base[:-2])
                if num not in nums:
                    nums.append(num)
        nums.sort()
        for num in nums:
            path = self._path(num)
            rec = None
            for cand in fs.candidates(path):
                if rec is None and fs.exists(cand):
                    rec = self._check(cand)
                    if rec is not None:
                        fs.promote(path, cand)
            fs.remove(path + ".tmp")  # a torn copy, or the twin of the promoted record
            if rec is None:
                fs.remove(path)
                self.dropped += 1
                continue
            if self.count >= self.max_frames or self.bytes + rec[2] > self.max_bytes:
                raise OutboxFull("outbox %s holds more than its capacity (%d frames, %d bytes): "
                                 "open it with the capacity it was made with" % (self.directory, self.max_frames,
                                                                                  self.max_bytes))
            self._take(self._num.index(-1), num, rec[0], rec[1], rec[2], rec[3])
            self._next = num + 1

    def _check(self, path):
        # (epoch, seq, length, digest) of a complete, undamaged record, else None
        f = open(path, "rb")
        try:
            head = f.read(HEAD)
            if head is None or len(head) != HEAD or head[0:4] != MAGIC:
                return None
            n = _get32(head, 12)
            if os.stat(path)[6] != HEAD + n:
                return None
            h = hashlib.sha256()
            buf = bytearray(CHUNK)
            view = memoryview(buf)
            left = n
            while left > 0:
                k = f.readinto(view[:min(left, CHUNK)])
                if not k:
                    return None
                h.update(view[:k])
                left -= k
            digest = h.digest()
            if digest != bytes(head[16:HEAD]):
                return None
            return _get32(head, 4), _get32(head, 8), n, digest
        finally:
            f.close()


# 32-bit fields as two 16-bit halves: no intermediate reaches 2**30, so a value
# below 2**30 never makes a big int on MicroPython (same bytes on disk).
def _u32(buf, at, v):
    lo, hi = v & 0xFFFF, v >> 16
    buf[at] = lo & 0xFF
    buf[at + 1] = lo >> 8
    buf[at + 2] = hi & 0xFF
    buf[at + 3] = hi >> 8


def _get32(buf, at):
    hi = buf[at + 2] | buf[at + 3] << 8
    lo = buf[at] | buf[at + 1] << 8
    return hi * 65536 + lo
