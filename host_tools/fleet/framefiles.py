"""Which files an ingest reads: paths, directories, glob patterns and lists of paths.

Each path given to ``edgesynth ingest`` (or es.ingest) is, in this order:

* ``-``: the frame bytes on stdin;
* a directory: its regular files sorted by name, hidden ones (``.name``)
  left out; with ``recursive`` also those of its subdirectories (not
  hidden, symlinked directories not followed), each directory's files
  before its subdirectories';
* a name that exists: that file;
* a name that does not exist and contains ``*``, ``?`` or ``[``: a glob
  pattern expanded here, sorted (``**`` spans directories with
  ``recursive``), so a quoted pattern never meets the shell's ARG_MAX;
* else the file, whose read then fails with a reason.

A list of paths (``--files-from``) is read one line at a time, so a million
names are never all in memory; each line is a path as above. Everything is
lazy: a directory is listed (and sorted) only when the ingest reaches it.
When the list is not a regular file (stdin, a pipe, a FIFO) and its next
line is not there yet, FLUSH comes first: the ingest commits and
acknowledges what it holds before it waits for the list's writer.
A name containing a NUL byte is refused (no file can have it).

``file_frames`` reads one file and splits it into frames (envelopes only;
edgesynth.fleet.verify checks them).
"""
import contextlib
import glob
import os
import select
import stat

from edgesynth.errors import FrameError, InputError
from edgesynth.filekind import check as check_kind
from edgesynth.frames import read_into, split_envelope
from edgesynth.stdio import is_stdio, label, open_input

MAX_LINE = 1 << 16  # bytes of one --files-from line (a path; PATH_MAX is 4096 on Linux)
MAX_FILE = 1 << 30  # bytes per frame file


class _Flush:
    def __repr__(self):
        return "FLUSH"


FLUSH = _Flush()  # in a stream of paths or tasks: commit everything before it now (a read may wait)


def expand(paths, recursive=False):
    """Yield (path, None) for each file to read, in order, or (name, reason)
    for a name that gives none (a pattern matching no file, a directory that
    cannot be listed). ``paths``: any iterable of str or path-like, consumed
    lazily."""
    for path in paths:
        if path is FLUSH:
            yield FLUSH, None
            continue
        path = os.fspath(path)
        if isinstance(path, str) and "\0" in path or isinstance(path, bytes) and b"\0" in path:
            yield path, "path contains a NUL byte"
        elif is_stdio(path):
            yield path, None
        elif os.path.isdir(path):
            yield from _directory(path, recursive)
        elif not os.path.lexists(path) and glob.escape(path) != path:
            yield from _pattern(path, recursive)
        else:
            yield path, None


def _directory(top, recursive):
    """The files of ``top`` (sorted), then, with ``recursive``, those of its
    subdirectories depth first; a stack, not recursion, so any depth works."""
    stack = [top]
    while stack:
        path = stack.pop()
        files, dirs = [], []
        try:
            with os.scandir(path) as it:
                for e in it:
                    if e.name.startswith("."):
                        continue
                    if e.is_file():
                        files.append(e.name)
                    elif recursive and e.is_dir(follow_symlinks=False):
                        dirs.append(e.name)
        except OSError as e:
            yield path, "cannot list the directory (%s)" % (e.strerror or e)
            continue
        for name in sorted(files):
            yield os.path.join(path, name), None
        stack.extend(os.path.join(path, d) for d in sorted(dirs, reverse=True))


def _pattern(pattern, recursive):
    names = sorted(n for n in glob.iglob(pattern, recursive=recursive) if not os.path.isdir(n))
    if not names:
        yield pattern, "no file matches this pattern"
    for name in names:
        yield name, None


def listed(path):
    """The paths listed in the text file ``path`` ("-": stdin), one per line
    (the newline removed; empty lines skipped; bytes that are not UTF-8 kept
    as surrogate escapes, as os.fsdecode does), read one line at a time, with
    FLUSH before a read that would wait (see the module docstring). The list
    is opened now: InputError here if it cannot be; later, InputError at a
    line longer than MAX_LINE bytes (not a list of paths), or at a line "-"
    in a list read from stdin."""
    stack = contextlib.ExitStack()
    fh = stack.enter_context(open_input(path))
    return _lines(path, fh, stack)


def _may_wait(fh):
    """Whether reads of ``fh`` can wait for a writer: its fd (if any) is not a regular file."""
    try:
        return not stat.S_ISREG(os.fstat(fh.fileno()).st_mode)
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is an OSError: in memory
        return False


def _ready(fh):
    """Whether a read of ``fh`` would return at once (select; where it cannot poll a pipe, as on Windows, assume so)."""
    try:
        return bool(select.select([fh], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def _lines(path, fh, stack):
    waits = _may_wait(fh)
    buf, n, eof = bytearray(), 0, False
    with stack:
        while buf or not eof:
            end = buf.find(b"\n")
            if end < 0 and not eof and len(buf) <= MAX_LINE:
                # read1: at most one read, and (its size past the reader's buffer) it leaves
                # nothing buffered unseen by select
                if waits and not _ready(fh):
                    yield FLUSH
                try:
                    chunk = fh.read1(1 << 16)
                except OSError as e:  # EIO and the like: a bad list, said in one line
                    raise InputError("%s: cannot read the list of paths (%s)" % (label(path), e.strerror or e))
                eof = not chunk
                buf += chunk
                continue
            line = bytes(buf[:end]) if end >= 0 else bytes(buf)
            del buf[:end + 1 if end >= 0 else len(buf)]
            n += 1
            if len(line) > MAX_LINE:
                raise InputError("%s: line %d is longer than %d bytes: not a list of paths, one per line"
                                 % (label(path), n, MAX_LINE))
            name = os.fsdecode(line)
            if is_stdio(name) and is_stdio(path):
                raise InputError("%s: line %d is '-' (stdin), but this list is stdin: stdin can be read once"
                                 % (label(path), n))
            if name:
                yield name


def _read(path, limit, over=None):
    """The bytes of frame file ``path`` ("-": stdin), at most ``limit``, or
    None and why not (``over``, if given, when it holds more)."""
    over = over or "larger than %d bytes" % limit
    size = 0 if is_stdio(path) else None
    try:
        if size is None and (size := os.path.getsize(path)) > limit:
            return None, over
        with open_input(path, "frames") as fh:
            # a file with a size (a regular file) in one read, one byte more
            # to see whether it grew since; else (stdin, a FIFO, a file that
            # grew) read_into: only the bytes really there, never ``limit`` at once
            data = fh.read(size + 1) if size else b""
            if not size or len(data) > size:
                data = bytearray(data)
                read_into(fh, data, limit + 1 - len(data))
    except OSError as e:
        return None, "cannot read (%s)" % (e.strerror or e)
    except InputError as e:  # stdin closed, a terminal, or a file that cannot be opened
        return None, str(e)
    if len(data) > limit:   # also a file that grew after the size check
        return None, over
    if not data:
        return None, "file is empty"
    return data, None


def file_frames(path, limit=MAX_FILE, over=None):
    """Read frame file ``path`` ("-": stdin; at most ``limit`` bytes, else
    it is refused whole, for the reason ``over`` if given) and yield (index, frame bytes, None) per frame, or
    (index, None, reason) for the file, or for the rest of it from the first
    envelope that cannot be split (no frame boundaries after that)."""
    data, err = _read(path, limit, over)
    if err:
        yield 0, None, err
        return
    pos, i = 0, 0
    with memoryview(data) as view:
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
                yield i, None, reason
                return
            # a file of one frame is that frame (bytes already): no copy
            yield i, data if stop - pos == len(data) and isinstance(data, bytes) else bytes(view[pos:stop]), None
            pos, i = stop, i + 1
