"""`edgesynth ingest`: verify frame files and append them to the store.

The files are the paths given, directories, glob patterns or lists of paths
(edgesynth.fleet.framefiles). For each file, frame by frame: the envelope is
split by hand, the tag checked under the key of the envelope's device before
any parsing, the payload decoded with limits (edgesynth.fleet.verify; in
worker processes with ``jobs`` > 1), then the frames are stored by group
commit: up to BATCH_FRAMES frames or BATCH_BYTES bytes in one transaction
(Store.put_many: one commit, one fsync). Only after its batch's commit is a
frame reported, one Report per frame in input order, which the CLI prints as
text:

    ack FILE frame I DEVICE EPOCH SEQ stored|duplicate      (stdout)
    FILE: frame I: conflict: ... | reason                   (stderr)

or, with ``--json``, as one JSON object per frame on stdout. In text, FILE and
DEVICE are escaped (``shown``) so that no name can end a line or split a
field: one frame gives exactly one line. When a frame's envelope cannot be
split the rest of the file has no frame boundaries, and the remainder of the
file is rejected with that frame's report. A batch never waits long: it is
committed when full, when the next frame comes BATCH_SECONDS or more after its
first, at the end of the input, and before a read that may wait for a writer
(frames from stdin or a FIFO; the next line of a list of paths on stdin, a pipe
or a FIFO when none is ready: framefiles.FLUSH). If the paths fail mid-run
(a bad list line), the pending batch is committed and reported, then the run
stops with IngestStopped.

If the store cannot be written (disk full, I/O error), the run stops with an
IngestStopped error saying what is stored and how to continue: no frame of
the failed batch is stored or reported as stored.
"""
import contextlib
import json
import os
import stat
import time
import urllib.parse
from concurrent.futures.process import BrokenProcessPool

from edgesynth.errors import EdgesynthError, IngestStopped, InputError, StoreError, StoreWriteError
from edgesynth.fleet.framefiles import FLUSH, expand, file_frames
from edgesynth.fleet.store import CONFLICT, DUPLICATE, STORED, schema_1_frames
from edgesynth.fleet.verify import CHUNK_BYTES, CHUNK_FRAMES, WHOLE_FILE, Verified, verified
from edgesynth.stdio import is_stdio

BATCH_FRAMES = 256        # frames (and refusals) per transaction: past ~64 the fsync is no longer what costs
BATCH_BYTES = 16 << 20    # bytes of frames per transaction, so memory stays bounded for any frame size
BATCH_SECONDS = 0.5       # s: a batch is committed at the first frame this long after its first (checked in add)
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


def _stopped(store, where, outcome, error, fix):
    try:
        held = "; the store holds %d frame(s)" % store.count()
    except EdgesynthError:
        held = ""
    return IngestStopped(
        "%s: %s. Ingest stopped here; every frame acknowledged above is stored and none was lost (this run: "
        "%s%s). %s and run the same command again: frames already stored come back as duplicates"
        % (where, error, outcome.summary(), held, fix))


def _tasks(paths, recursive):
    """The tasks (edgesynth.fleet.verify.verified) of the frame files of ``paths``:
    a regular file of up to WHOLE_FILE bytes is read where it is checked (in a
    worker with jobs > 1); a larger one, stdin or a FIFO is read and split
    here, in chunks."""
    stdin_read = False
    for path, reason in expand(paths, recursive):
        if path is FLUSH:   # the list of paths may wait for its writer
            yield FLUSH
            continue
        if reason:
            yield path, [(0, None, reason)], 0
            continue
        if is_stdio(path):
            if stdin_read:
                yield path, [(0, None, "'-' (stdin) again: stdin can be read once")], 0
                continue
            stdin_read = True
            mode, size = None, None
        else:
            try:
                st = os.stat(path)
                mode, size = st.st_mode, st.st_size
            except OSError:
                mode = size = 0  # file_frames says why
        if mode and stat.S_ISREG(mode) and size <= WHOLE_FILE:
            yield path, None, size
            continue
        if mode is None or mode and not stat.S_ISREG(mode):
            yield FLUSH  # stdin, a FIFO: commit and acknowledge what is verified before waiting
        items, size = [], 0
        for item in file_frames(path):
            items.append(item)
            size += len(item[1] or b"")
            if len(items) >= CHUNK_FRAMES or size >= CHUNK_BYTES:
                yield path, items, size
                items, size = [], 0
        if items:
            yield path, items, size


class _Batches:
    """Checked frames stored by group commit, reported in input order after
    their batch's commit; a refusal with nothing pending is reported at once."""

    def __init__(self, store, outcome, report):
        self.store, self.outcome, self.done = store, outcome, outcome.tally(report)
        self.items, self.rels, self.size, self.since = [], [], 0, 0.0

    def add(self, path, index, result):
        """One checked frame: a Verified, or the reason (str) it is refused."""
        if isinstance(result, str) and not self.items:
            self.done(Report(path, index, REJECTED, reason=result))
            return
        self.items.append((path, index, result))
        if isinstance(result, Verified):
            if not self.rels:
                self.since = time.monotonic()
            self.rels.append(result)
            self.size += len(result.raw)
        if (len(self.items) >= BATCH_FRAMES or self.size >= BATCH_BYTES
                or time.monotonic() - self.since >= BATCH_SECONDS):
            self.flush()

    def flush(self):
        """Commit the pending frames in one transaction, then report them."""
        items, rels = self.items, self.rels
        self.items, self.rels, self.size = [], [], 0
        results = iter(())
        if rels:
            try:
                results = iter(self.store.put_many(rels))
            except StoreWriteError as e:   # items[0] is a frame: add() reports a refusal at once when none is pending
                path, index, _ = items[0]
                raise _stopped(self.store, "%s: frame %d" % (shown(path), index), self.outcome,
                               "not stored: %s (nor any frame after it)" % e, "Fix the cause (free space)")
        for path, index, result in items:
            if isinstance(result, Verified):
                self.done(stored_report(path, index, result, next(results)))
            else:
                self.done(Report(path, index, REJECTED, reason=result))


def _run(store, tasks, key_for, report, jobs):
    outcome = Outcome()
    batches = _Batches(store, outcome, report)
    with contextlib.closing(verified(tasks, key_for, jobs)) as checked:
        try:
            for item in checked:
                if item is FLUSH:
                    batches.flush()
                else:
                    batches.add(*item)
        except BrokenProcessPool as e:
            batches.flush()   # verified before the worker died: stored and acknowledged, not dropped
            raise _stopped(store, "ingest", outcome, "a verification process ended abruptly (%s)" % e,
                           "Fix the cause (memory?), or verify in this process with --jobs 1,")
        except (InputError, StoreError) as e:   # the paths or the old store failed mid-run (a bad list line)
            batches.flush()
            raise _stopped(store, "ingest", outcome, e, "Fix the cause")
        batches.flush()
    return outcome


def stored_report(path, i, rel, result):
    """The Report of Release ``rel`` once the store answered ``result``."""
    reason = None
    if result == CONFLICT:
        reason = ("conflict: device %r epoch %d is already stored with other bytes; this frame is kept "
                  "aside in the store's conflicts table, not stored" % (rel.device, rel.epoch))
    return Report(path, i, result, rel, reason)


def migrate(old_path, store, key_for, report, jobs=1):
    """Copy every frame of the schema-1 store ``old_path`` into ``store``,
    verified again under ``key_for`` and stored by the (device, epoch) rules
    (so frames the old store refused as replays cannot be recovered, but none
    it held is lost). ``old_path`` is only read. Returns an Outcome."""
    tasks = ((old_path, [(i, raw, None)], len(raw)) for i, raw in enumerate(schema_1_frames(old_path)))
    return _run(store, tasks, key_for, report, jobs)


def ingest(store, paths, key_for, report, jobs=1, recursive=False):
    """Ingest the frame files of ``paths`` (edgesynth.fleet.framefiles; an
    iterable consumed lazily) in order, calling ``report(Report)`` per frame
    after its commit; returns an Outcome. ``jobs`` > 1: frames are verified in
    that many processes, each given ``key_for`` (not the keyring's file). Raises
    IngestStopped if the store cannot be written or a worker dies."""
    return _run(store, _tasks(paths, recursive), key_for, report, jobs)
