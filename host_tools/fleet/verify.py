"""Frame verification for the store, in this process or in worker processes.

A frame is checked as everywhere (edgesynth.frames.parse_frame: the tag under
its device's key before any parsing, then the payload decoded with limits);
what the store needs of it is kept (``Verified``), the decoded counters are
dropped at once. With ``jobs`` > 1 the checks run in a pool of processes, in
chunks, while this process lists the files, commits and reports; a worker
also reads the small files it checks (their bytes come back with the
results, so the bytes stored are the bytes verified). Results come back in
input order, and at most a few chunks per worker are in flight, so memory is
bounded whatever the input size.
"""
import collections
import concurrent.futures
import multiprocessing
import os
import signal
import sys
import threading
import time

from edgesynth.errors import EdgesynthError, FrameError
from edgesynth.fleet.framefiles import FLUSH, file_frames
from edgesynth.fleet.store import config_id_of
from edgesynth.frames import parse_frame

WHOLE_FILE = 1 << 20     # bytes: a file up to this size is read and checked in one piece (in a worker)
GREW = ("grew past %d bytes after it was listed (still being written?); nothing of it stored: ingest it "
        "again once it is complete")
CHUNK_FRAMES = 32        # tasks (files or frames) per chunk sent to a worker
CHUNK_BYTES = 1 << 20    # bytes per chunk (a chunk closes at whichever comes first)
IN_FLIGHT = 4            # chunks queued per worker: enough to keep it busy while this process commits


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


def run_task(task, key_for):
    """[(index, raw or None, fields or reason)] of one task: a whole file is
    read and split here (its frames' bytes come back with their checks), a
    list of frames already split is checked (their bytes are the caller's)."""
    path, items, _ = task
    if items is None:   # at most WHOLE_FILE bytes, even if the file grew since it was listed: chunk memory bound
        return [(i, raw, reason if raw is None else check(raw, key_for))
                for i, raw, reason in file_frames(path, WHOLE_FILE, GREW % WHOLE_FILE)]
    return [(i, None, reason if raw is None else check(raw, key_for)) for i, raw, reason in items]


def verified(tasks, key_for, jobs=1):
    """Yield every frame of ``tasks`` checked, in order: (path, index,
    Verified or the reason it is refused).

    A task is (path, None, size): the regular file ``path`` of ``size``
    bytes, read where it is checked; or (path, [(index, raw, reason)],
    size): frames already split, ``raw`` None where ``reason`` refuses it
    already; or FLUSH, passed on once every frame before it is out.
    ``jobs`` > 1: checked in that many worker processes, each given this
    ``key_for`` (the caller's keyring, never read again from its file).
    """
    if jobs > 1:
        yield from _in_workers(tasks, jobs, key_for)
        return
    for task in tasks:
        if task is FLUSH:
            yield FLUSH
        else:
            yield from _frames(task, run_task(task, key_for))


def _frames(task, results):
    path, items, _ = task
    if items is not None:   # the bytes stayed here
        results = ((i, raw, res) for (i, raw, _), (_, _, res) in zip(items, results))
    for i, raw, res in results:
        yield path, i, (res if isinstance(res, str) else Verified(raw, res))


# fork on Linux: a worker starts in milliseconds (spawn or forkserver re-import
# edgesynth, ~0.3 s per worker, and re-run a caller's script that lacks an
# `if __name__ == "__main__"` guard) and inherits key_for as it is, with no
# pickling; the pool starts its processes before its own thread. A worker also
# inherits this process's open files: a pipe's write end held by a thread here
# keeps that pipe's reader from EOF until the pool ends. Elsewhere spawn (fork
# is unsafe on macOS): key_for is then pickled over the pool's pipe (a
# Keyring's bound method pickles), never written to disk.
_START = "fork" if sys.platform.startswith("linux") else "spawn"


def _in_workers(tasks, jobs, key_for):
    pool = concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context(_START),
                                                  initializer=_start_worker, initargs=(key_for, os.getpid()))
    pending = collections.deque()   # (tasks of a chunk, future of their results)
    chunk, size, failed = [], 0, None
    try:
        try:
            for task in tasks:
                if task is not FLUSH:
                    chunk.append(task)
                    size += task[2]
                    if len(chunk) < CHUNK_FRAMES and size < CHUNK_BYTES:
                        continue
                if chunk:
                    pending.append((chunk, pool.submit(_run_chunk, chunk)))
                chunk, size = [], 0
                while pending and (task is FLUSH or len(pending) > IN_FLIGHT * jobs):
                    yield from _collect(*pending.popleft())
                if task is FLUSH:
                    yield FLUSH
        except EdgesynthError as e:   # the paths failed (a bad list line): what came before is still passed on
            failed = e
        if chunk:
            pending.append((chunk, pool.submit(_run_chunk, chunk)))
        while pending:
            yield from _collect(*pending.popleft())
        if failed is not None:
            raise failed
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _collect(chunk, future):
    for task, results in zip(chunk, future.result()):
        yield from _frames(task, results)


# ------------------------------------------------------------ in a worker process
_key_for = None


def _start_worker(key_for, parent):
    global _key_for
    _key_for = key_for
    # Ctrl-C reaches the whole process group: the ingest process stops the
    # pool itself, so a worker must not die of it (with a traceback) mid-task.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A pool's workers outlive a parent killed by SIGKILL (they wait on a queue
    # whose other end they hold themselves): leave when the parent is gone.
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()


def _exit_with_parent(parent):
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def _run_chunk(tasks):
    return [run_task(task, _key_for) for task in tasks]
