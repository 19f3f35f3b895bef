"""`edgesynth ingest`: verify frame files and append them to the store.

For each file, frame by frame: the envelope is split by hand, the tag checked
under the key of the envelope's device (edgesynth.fleet.keys) before any parsing,
the payload decoded with limits and checked (edgesynth.frames), then the frame
is stored in its own transaction (edgesynth.fleet.store). Only after the commit is
the frame reported, one Report per frame, which the CLI prints as text:

    ack FILE frame I DEVICE EPOCH SEQ stored|duplicate      (stdout)
    FILE: frame I: conflict: ... | reason                   (stderr)

or, with ``--json``, as one JSON object per frame on stdout. In text, FILE and
DEVICE are escaped (``shown``) so that no name can end a line or split a
field: one frame gives exactly one line. When a frame's envelope cannot be
split the rest of the file has no frame boundaries, and the remainder of the
file is rejected with that frame's report.

If the store cannot be written (disk full, I/O error), the run stops with an
IngestStopped error saying what is stored and how to continue.
"""
import json
import os
import urllib.parse

from edgesynth.errors import EdgesynthError, FrameError, IngestStopped, InputError, StoreWriteError
from edgesynth.filekind import check as check_kind
from edgesynth.fleet.store import CONFLICT, DUPLICATE, STORED, schema_1_frames
from edgesynth.frames import parse_frame, read_into, split_envelope
from edgesynth.stdio import is_stdio, open_input

MAX_FILE = 1 << 30  # bytes per frame file
REJECTED = "rejected"


def shown(name):
    """``name`` as one printable token: %-escapes of spaces, control characters,
    '%' and anything outside printable ASCII (undo with urllib.parse.unquote)."""
    return urllib.parse.quote(name, safe="/._-+:@,=~", errors="surrogateescape")


def _one_line(text):
    """``text`` with non-printable characters (newlines included) as escapes."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


class Report:
    """What happened to frame ``index`` of ``path``: ``result`` is STORED,
    DUPLICATE, CONFLICT or REJECTED; ``device``, ``epoch``, ``seq`` are None
    for a frame that did not verify; ``reason`` says why it was not stored."""

    def __init__(self, path, index, result, rel=None, reason=None):
        self.path, self.index, self.result, self.reason = path, index, result, reason
        self.device, self.epoch, self.seq = (rel.device, rel.epoch, rel.seq) if rel else (None, None, None)

    @property
    def acked(self):
        """Stored, or already stored: the frame is durable."""
        return self.result in (STORED, DUPLICATE)

    def text(self):
        """The report's one line of text (stdout for an ack, else stderr)."""
        if self.acked:
            return "ack %s frame %d %s %d %d %s" % (shown(self.path), self.index, shown(self.device),
                                                    self.epoch, self.seq, self.result)
        return "%s: frame %d: %s" % (shown(self.path), self.index, _one_line(self.reason))

    def json(self):
        """The report as one line of JSON."""
        return json.dumps({"file": self.path, "frame": self.index, "device": self.device, "epoch": self.epoch,
                           "seq": self.seq, "result": self.result, "reason": self.reason}, sort_keys=True)


class Outcome:
    """Counts of one ingest run; ``ok`` iff every frame was stored or a duplicate."""

    def __init__(self):
        self.counts = {STORED: 0, DUPLICATE: 0, CONFLICT: 0, REJECTED: 0}

    @property
    def ok(self):
        return self.counts[CONFLICT] == self.counts[REJECTED] == 0

    def tally(self, report):
        """``done(Report)``: count the report here, then pass it to ``report``."""
        def done(r):
            self.counts[r.result] += 1
            report(r)
        return done

    def summary(self):
        c = self.counts
        return "%d stored, %d duplicate(s), %d conflict(s), %d rejected" % (
            c[STORED], c[DUPLICATE], c[CONFLICT], c[REJECTED])


def _read(path):
    """The bytes of frame file ``path`` ("-": stdin), or None and why not."""
    stdin = is_stdio(path)
    try:
        if not stdin and os.path.getsize(path) > MAX_FILE:
            return None, "larger than %d bytes" % MAX_FILE
        data = bytearray()
        with open_input(path, "frames") as fh:
            # read_into: only the bytes really there, never MAX_FILE at once
            read_into(fh, data, MAX_FILE + 1)
    except OSError as e:
        return None, "cannot read (%s)" % (e.strerror or e)
    except InputError as e:  # stdin closed, a terminal, or a file that cannot be opened
        return None, str(e)
    if len(data) > MAX_FILE:
        return None, "larger than %d bytes" % MAX_FILE
    if not data:
        return None, "file is empty"
    return data, None


def _stopped(store, path, index, outcome, error):
    try:
        held = "; the store holds %d frame(s)" % store.count()
    except EdgesynthError:
        held = ""
    return IngestStopped(
        "%s: frame %d: not stored: %s. Ingest stopped here; every frame acknowledged above is stored and "
        "none was lost (this run: %s%s). Fix the cause (free space) and run the same command again: "
        "frames already stored come back as duplicates"
        % (shown(path), index, error, outcome.summary(), held))


def ingest_file(store, path, key_for, outcome, report):
    """Ingest every frame of one file, calling ``report(Report)`` per frame."""
    done = outcome.tally(report)
    data, err = _read(path)
    if err:
        done(Report(path, 0, REJECTED, reason=err))
        return
    pos, i = 0, 0
    while pos < len(data):
        try:
            stop = split_envelope(data, pos)[4]
        except FrameError as e:
            reason = "%s (rest of the file skipped)" % e
            if i == 0:
                try:
                    check_kind(path, "frames", data)  # a generator, config...: say which
                except InputError as wrong:
                    reason = str(wrong)
            done(Report(path, i, REJECTED, reason=reason))
            return
        ingest_frame(store, path, i, data, pos, key_for, outcome, done)
        pos, i = stop, i + 1


def ingest_frame(store, path, i, data, pos, key_for, outcome, done):
    """Verify the frame at ``data[pos:]``, store it, and ``done(Report)``."""
    try:
        rel = parse_frame(data, pos, key_for=key_for, require_tag=True)[0]
    except FrameError as e:
        done(Report(path, i, REJECTED, reason=str(e)))
        return
    try:
        result = store.put(rel)
    except StoreWriteError as e:
        raise _stopped(store, path, i, outcome, e)
    done(stored_report(path, i, rel, result))


def stored_report(path, i, rel, result):
    """The Report of Release ``rel`` once the store answered ``result``."""
    reason = None
    if result == CONFLICT:
        reason = ("conflict: device %r epoch %d is already stored with other bytes; this frame is kept "
                  "aside in the store's conflicts table, not stored" % (rel.device, rel.epoch))
    return Report(path, i, result, rel, reason)


def migrate(old_path, store, key_for, report):
    """Copy every frame of the schema-1 store ``old_path`` into ``store``,
    verified again under ``key_for`` and stored by the (device, epoch) rules
    (so frames the old store refused as replays cannot be recovered, but none
    it held is lost). ``old_path`` is only read. Returns an Outcome."""
    outcome = Outcome()
    done = outcome.tally(report)
    for i, raw in enumerate(schema_1_frames(old_path)):
        ingest_frame(store, old_path, i, raw, 0, key_for, outcome, done)
    return outcome


def ingest(store, paths, key_for, report):
    """Ingest ``paths`` in order; returns an Outcome. Raises IngestStopped if
    the store cannot be written."""
    outcome = Outcome()
    for path in paths:
        ingest_file(store, path, key_for, outcome, report)
    return outcome
