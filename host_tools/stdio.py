"""``-`` as stdin or stdout: the one place that knows it.

Every path that names data (readings, frames, generators, configs) may be
``"-"`` (a str, or ``pathlib.Path("-")``): a reader then reads stdin, a writer
writes stdout. The str ``"./-"`` names a file called ``-``; pathlib turns
``Path("./-")`` into ``Path("-")``, so a Path cannot name that file.

Where stdin or stdout is closed, or is a text stream without bytes beneath
(a notebook's), reading or writing bytes through ``-`` is one InputError.

Secrets (keyrings, credentials) and the SQLite store never go through a pipe:
their readers and writers refuse ``-`` (``refuse``). Binary output (frames, a
generator, a PNG) is refused when stdout is a terminal, as gzip refuses, and
binary input when stdin is one (it would wait for keystrokes).
"""
import contextlib
import io
import os
import sys

from edgesynth.errors import InputError

STDIO = "-"
STDIN = "<stdin>"    # the label of stdin in messages
STDOUT = "stdout"    # the label of stdout in the commands' summary lines


def is_stdio(path):
    """True when ``path`` is "-" (stdin for a reader, stdout for a writer)."""
    return isinstance(path, (str, os.PathLike)) and os.fspath(path) == STDIO


def stdin_bytes():
    """stdin as a binary file object with ``peek``; InputError when there is
    none (closed, or a text stream with no bytes beneath)."""
    return _binary(sys.stdin, "stdin", io.BufferedReader)


def stdout_bytes():
    """stdout as a binary file object; InputError when there is none."""
    return _binary(sys.stdout, "stdout", None)


def _binary(stream, name, wrap):
    if stream is None or getattr(stream, "closed", False):
        raise InputError("%s is closed" % name)
    raw = getattr(stream, "buffer", stream if isinstance(stream, io.BufferedIOBase) else None)
    if raw is None:
        raise InputError("%s carries no bytes here (a text stream, as in a notebook): give a file path instead of "
                         "'-'" % name)
    if wrap is not None and not hasattr(raw, "peek"):
        raw = wrap(raw)
    return raw


def _isatty(stream):
    return bool(stream is not None and getattr(stream, "isatty", lambda: False)())


def label(path):
    """How messages name ``path``: "<stdin>" for "-", else the path itself."""
    return STDIN if is_stdio(path) else str(path)


def read_once(paths, names=None):
    """InputError when more than one of ``paths`` is "-": stdin can be read
    once. ``names``: what each path is (e.g. "--config"), for the message."""
    given = [i for i, p in enumerate(paths) if is_stdio(p)]
    if len(given) < 2:
        return
    if names is None:
        raise InputError("'-' (stdin) is given %d times: stdin can be read once" % len(given))
    raise InputError("%s cannot %s be - (stdin): stdin can be read once"
                     % (" and ".join(names[i] for i in given), "both" if len(given) == 2 else "all"))


def refuse(path, what, why):
    """InputError when ``path`` is "-": ``what`` (e.g. "--keyring") is a
    file, and ``why`` says why it cannot be a pipe."""
    if is_stdio(path):
        raise InputError("%s cannot be '-': %s" % (what, why))


def check_binary_stdout(what):
    """InputError when stdout is a terminal: ``what`` (e.g. "frames") is
    binary and would garble it. Commands call it before any work."""
    if _isatty(sys.stdout):
        raise InputError("stdout is a terminal: not writing %s there; pass -o FILE or pipe it into a command "
                         "(e.g. `| edgesynth assemble - -o gen.msgpack`)" % what)


def check_binary_stdin(what):
    """InputError when stdin is a terminal: ``what`` (e.g. "frames") is binary."""
    if _isatty(sys.stdin):
        raise InputError("stdin is a terminal: expected %s (binary); pipe it in (`... | edgesynth ...`) or give "
                         "a FILE" % what)


def write_stdout(data, what):
    """Write ``data`` (bytes, or str as UTF-8) to stdout and flush. Bytes to a
    terminal is refused (check_binary_stdout). A reader that went away
    (``| head``) raises BrokenPipeError, which the CLI ends quietly; any other
    OSError becomes an InputError naming stdout."""
    if isinstance(data, str):
        if sys.stdout is not None and not hasattr(sys.stdout, "buffer"):  # a notebook's text stream
            sys.stdout.write(data)
            return
        data = data.encode("utf-8")  # as a file would hold it, whatever the terminal's encoding
    else:
        check_binary_stdout(what)
    out = stdout_bytes()
    try:
        if out is not sys.stdout:
            sys.stdout.flush()  # text echoed before must come first
        out.write(data)
        out.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        raise InputError("stdout: cannot write (%s)" % (e.strerror or e))


@contextlib.contextmanager
def open_input(path, what=None):
    """A binary file object reading ``path``, or stdin's (left open) for "-".
    ``what``: the binary content (plural, e.g. "frames"), refused from a
    terminal stdin; None for text a user may type. OSError on open becomes
    InputError naming the path."""
    if is_stdio(path):
        if what is not None:
            check_binary_stdin(what)
        yield stdin_bytes()
        return
    try:
        fh = open(path, "rb")
    except OSError as e:
        raise InputError("%s: cannot read (%s)" % (path, e.strerror or e))
    with fh:
        yield fh


def read_input(path, what=None):
    """All the bytes of ``path`` ("-": stdin, read to its end); ``what`` as for open_input."""
    with open_input(path, what) as fh:
        try:
            return fh.read()
        except OSError as e:
            raise InputError("%s: cannot read (%s)" % (label(path), e.strerror or e))
