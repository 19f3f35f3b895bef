"""Frame verification for the store, in this process or in worker processes.

A frame is checked as everywhere (edgesynth.frames.parse_frame: the tag under
its device's key before any parsing, then the payload decoded with limits);
what the store needs of it is kept (``Verified``), the decoded counters are
dropped at once. With ``jobs`` > 1 the checks run in a pool of processes, in
chunks, while this process reads files and commits: results come back in
input order, and at most a few chunks per worker are in flight, so memory is
bounded whatever the input size.
"""
import collections
import concurrent.futures
import os
import threading
import time

from edgesynth.errors import FrameError
from edgesynth.fleet.keys import load as load_keyring
from edgesynth.fleet.store import config_id_of
from edgesynth.frames import parse_frame

FLUSH = "flush"          # an entry that asks for everything before it to be committed now
CHUNK_FRAMES = 32        # entries per task sent to a worker
CHUNK_BYTES = 1 << 20    # bytes per task (a chunk closes at whichever comes first)
IN_FLIGHT = 2            # chunks queued per worker: enough to keep it busy while this process commits


class _Config:
    """The mechanisms of a Verified frame, reduced to their joint configuration
    id (what ``config_id_of`` reads; the counters are not kept)."""
    __slots__ = ("id",)

    def __init__(self, cid):
        self.id = cid

    def config_id(self):
        return self.id


class Verified:
    """What the store keeps of a verified frame: ``device``, ``epoch``,
    ``seq``, ``payload_digest`` (SHA-256 hex), ``mechs`` (its configuration
    id only) and ``raw`` (the exact frame bytes)."""
    __slots__ = ("device", "epoch", "seq", "payload_digest", "mechs", "raw")

    def __init__(self, raw, fields):
        self.device, self.epoch, self.seq, self.payload_digest, cid, stop = fields
        self.mechs = (_Config(cid),)
        self.raw = raw if stop == len(raw) else raw[:stop]


def check(raw, key_for):
    """Verify the frame at the start of ``raw`` (bytes); its fields
    (device, epoch, seq, payload digest, config id, end offset), or the
    reason (str) it is refused."""
    try:
        rel, stop = parse_frame(raw, 0, key_for=key_for, require_tag=True)
    except FrameError as e:
        return str(e)
    return rel.device, rel.epoch, rel.seq, rel.payload_digest, config_id_of(rel), stop


def verified(entries, key_for, jobs=1, keyring_path=None):
    """Yield ``entries`` in order with each frame checked.

    An entry is (path, index, raw, reason): ``raw`` bytes of one frame to
    check, or None with ``reason`` when it was refused before (unreadable
    file, no envelope); or FLUSH, passed on once every entry before it is
    out. A frame comes out as (path, index, Verified or reason).
    ``jobs`` > 1: checked in that many worker processes, which load the
    keyring at ``keyring_path`` themselves.
    """
    if jobs <= 1:
        for e in entries:
            if e is FLUSH or e[2] is None:
                yield e if e is FLUSH else (e[0], e[1], e[3])
            else:
                yield e[0], e[1], _result(e[2], check(e[2], key_for))
        return
    yield from _in_workers(entries, jobs, keyring_path)


def _result(raw, fields):
    return fields if isinstance(fields, str) else Verified(raw, fields)


def _in_workers(entries, jobs, keyring_path):
    pool = concurrent.futures.ProcessPoolExecutor(jobs, initializer=_start_worker, initargs=(keyring_path,))
    pending = collections.deque()   # (entries of a chunk, future of its checks)
    chunk, raws, size = [], [], 0
    try:
        for e in entries:
            if e is not FLUSH:
                chunk.append(e)
                if e[2] is not None:
                    raws.append(e[2])
                    size += len(e[2])
                if len(chunk) < CHUNK_FRAMES and size < CHUNK_BYTES:
                    continue
            pending.append((chunk, pool.submit(_check_chunk, raws) if raws else None))
            chunk, raws, size = [], [], 0
            while pending and (e is FLUSH or len(pending) > IN_FLIGHT * jobs):
                yield from _collect(*pending.popleft())
            if e is FLUSH:
                yield FLUSH
        pending.append((chunk, pool.submit(_check_chunk, raws) if raws else None))
        while pending:
            yield from _collect(*pending.popleft())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _collect(chunk, future):
    results = iter(future.result() if future is not None else ())
    for path, index, raw, reason in chunk:
        yield path, index, (reason if raw is None else _result(raw, next(results)))


# ------------------------------------------------------------ in a worker process
_key_for = None


def _start_worker(keyring_path):
    global _key_for
    _key_for = load_keyring(keyring_path).key_for
    # A pool's workers outlive a parent killed by SIGKILL (they wait on a queue
    # whose other end they hold themselves): leave when the parent is gone.
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()


def _exit_with_parent(parent):
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def _check_chunk(raws):
    return [check(raw, _key_for) for raw in raws]
