"""`edgesynth ingest`: verify frame files and append them to the store.

For each file, frame by frame: the envelope is split by hand, the tag checked
under the key of the envelope's device (host_tools.keys) before any parsing,
the payload decoded with limits and checked (host_tools.frames), then the frame
is stored in its own transaction (host_tools.store). Only after the commit is
an ack line written to stdout and flushed:

    ack FILE frame I DEVICE EPOCH SEQ stored|duplicate

so every acknowledged frame is durable. A rejected frame gives one stderr line
``FILE: frame I: reason``. When a frame's envelope cannot be split the rest of
the file has no frame boundaries, and the remainder of the file is rejected
with that line.
"""
import os

from host_tools.errors import FrameError
from host_tools.frames import parse_frame, split_envelope
from host_tools.store import Rejected

MAX_FILE = 1 << 30  # bytes per frame file


class Outcome:
    """Counts of one ingest run; ``ok`` iff nothing was rejected."""

    def __init__(self):
        self.stored = self.duplicates = self.rejected = 0

    @property
    def ok(self):
        return self.rejected == 0


def _read(path):
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE:
            return None, "larger than %d bytes" % MAX_FILE
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE + 1)
    except OSError as e:
        return None, "cannot read (%s)" % (e.strerror or e)
    if not data:
        return None, "file is empty"
    return data, None


def ingest_file(store, path, key_for, outcome, ack, reject):
    """Ingest every frame of one file; ``ack(line)``/``reject(line)`` report."""
    data, err = _read(path)
    if err:
        outcome.rejected += 1
        reject("%s: frame 0: %s" % (path, err))
        return
    pos, i = 0, 0
    while pos < len(data):
        try:
            stop = split_envelope(data, pos)[4]
        except FrameError as e:
            outcome.rejected += 1
            reject("%s: frame %d: %s (rest of the file skipped)" % (path, i, e))
            return
        try:
            rel = parse_frame(data, pos, key_for=key_for, require_tag=True)[0]
            result = store.put(rel)
        except (FrameError, Rejected) as e:
            outcome.rejected += 1
            reject("%s: frame %d: %s" % (path, i, e))
        else:
            if result == "stored":
                outcome.stored += 1
            else:
                outcome.duplicates += 1
            ack("ack %s frame %d %s %d %d %s" % (path, i, rel.device, rel.epoch, rel.seq, result))
        pos, i = stop, i + 1


def ingest(store, paths, key_for, ack, reject):
    """Ingest ``paths`` in order; returns an Outcome."""
    outcome = Outcome()
    for path in paths:
        ingest_file(store, path, key_for, outcome, ack, reject)
    return outcome

