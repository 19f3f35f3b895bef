"""Every file a command writes goes through here: to a temporary file in the
same directory, flushed and fsynced, then renamed over the target, and the
directory fsynced so the rename itself survives a power cut.

A run that fails part-way (disk full, an error, Ctrl-C) leaves the previous
output untouched and no partial file behind; the error names the path and what
happened. ``write_bytes`` and ``write_text`` take "-" for stdout
(edgesynth.stdio); ``atomic_output`` writes files only and refuses "-".

What the path names decides how it is written:
- nothing, or a regular file: temporary file and rename; a replaced file keeps
  its permission bits unless the caller sets them (0o600 for secrets);
- a symlink: the file it points to is replaced the same way, and the link stays;
- anything else (a device such as /dev/null or /dev/stdout, a FIFO): written
  straight through, since it cannot be replaced and holds no previous output.
"""
import contextlib
import errno
import os
import secrets
import stat

from edgesynth.errors import InputError
from edgesynth.stdio import is_stdio, write_stdout

FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def fsync_dir(directory):
    """Make renames and creations in ``directory`` durable (no-op where the
    platform cannot open a directory)."""
    try:
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def write_error(path, e):
    """The one-line InputError for an OSError ``e`` met while writing ``path``."""
    why = e.strerror or str(e)
    if e.errno in FULL:
        why += "; the previous %s, if any, is unchanged" % os.path.basename(path)
    return InputError("%s: cannot write (%s)" % (path, why))


@contextlib.contextmanager
def atomic_output(path, mode="wb", perms=None, encoding=None, newline=None):
    """Yield a file object whose content replaces ``path`` only when the block
    ends without an exception (see the module docstring for symlinks and
    devices). ``perms``: mode bits of the new file, set from its first byte
    (0o600 for secrets); None keeps those of the file replaced, else 0o644.
    OSErrors become InputErrors naming ``path``. "-" is refused: a secret
    (``perms`` 0o600) never goes to stdout, and nothing else comes here for it.
    """
    if is_stdio(path):
        raise InputError("'-' (stdout) cannot take %s; give a file's path"
                         % ("a secret: keys never go to stdout" if perms == 0o600 else "this output"))
    target = os.path.realpath(path)  # a symlink's target is what gets replaced
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise write_error(path, e)
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISDIR(st.st_mode):
            raise InputError("%s: is a directory, not a file" % path)
        try:
            with open(target, mode, encoding=encoding, newline=newline) as fh:
                yield fh
        except OSError as e:
            raise write_error(path, e)
        return
    if perms is None:
        perms = stat.S_IMODE(st.st_mode) if st is not None else 0o644
    directory = os.path.dirname(target)
    tmp = os.path.join(directory, ".%s.%s.tmp" % (os.path.basename(target), secrets.token_hex(6)))
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, perms)
    except OSError as e:
        raise write_error(path, e)
    done = False
    try:
        with os.fdopen(fd, mode, encoding=encoding, newline=newline) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        if st is not None:
            os.chmod(tmp, perms)  # the umask may have narrowed the bits of the replaced file
        os.replace(tmp, target)
        done = True
    except OSError as e:
        raise write_error(path, e)
    finally:
        if not done:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    fsync_dir(directory)


def write_bytes(path, data, perms=None, what="binary data"):
    """Replace ``path`` atomically with ``data`` (bytes); "-" writes them to
    stdout, unless it is a terminal (InputError naming ``what``)."""
    if is_stdio(path) and perms is None:
        write_stdout(data, what)
        return
    with atomic_output(path, "wb", perms) as fh:
        fh.write(data)


def write_text(path, text, perms=None):
    """Replace ``path`` atomically with ``text`` (UTF-8); "-" writes it to stdout."""
    if is_stdio(path) and perms is None:
        write_stdout(text, "text")
        return
    with atomic_output(path, "w", perms, encoding="utf-8", newline="") as fh:
        fh.write(text)
