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
"""
import glob
import os

from edgesynth.errors import InputError
from edgesynth.stdio import is_stdio, label, open_input

MAX_LINE = 1 << 16  # bytes of one --files-from line (a path; PATH_MAX is 4096 on Linux)


def expand(paths, recursive=False):
    """Yield (path, None) for each file to read, in order, or (name, reason)
    for a name that gives none (a pattern matching no file, a directory that
    cannot be listed). ``paths``: any iterable of str or path-like, consumed
    lazily."""
    for path in paths:
        path = os.fspath(path)
        if is_stdio(path):
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
    """Yield the paths listed in the text file ``path`` ("-": stdin), one per
    line (the newline removed; empty lines skipped; bytes that are not UTF-8
    kept as surrogate escapes, as os.fsdecode does), read one line at a time.
    InputError at a line longer than MAX_LINE bytes (not a list of paths), or
    at a line "-" in a list read from stdin."""
    with open_input(path) as fh:
        for n, line in enumerate(iter(lambda: fh.readline(MAX_LINE + 1), b""), 1):
            if len(line) > MAX_LINE:
                raise InputError("%s: line %d is longer than %d bytes: not a list of paths, one per line"
                                 % (label(path), n, MAX_LINE))
            name = os.fsdecode(line[:-1] if line.endswith(b"\n") else line)
            if is_stdio(name) and is_stdio(path):
                raise InputError("%s: line %d is '-' (stdin), but this list is stdin: stdin can be read once"
                                 % (label(path), n))
            if name:
                yield name
