"""Every file a command writes goes through here: to a temporary file in the
same directory, flushed and fsynced, then renamed over the target, and the
directory fsynced so the rename itself survives a power cut.

A run that fails part-way (disk full, an error, Ctrl-C) leaves the previous
output untouched and no partial file behind; the error names the path and what
happened. ``-`` is not special here: callers that accept stdout handle it.
"""
import contextlib
import errno
import os
import secrets

from host_tools.errors import InputError

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
def atomic_output(path, mode="wb", perms=0o644, encoding=None, newline=None):
    """Yield a file object whose content replaces ``path`` only when the block
    ends without an exception. ``perms``: mode bits of the new file, set from
    its first byte (0o600 for secrets). OSErrors become InputErrors naming
    ``path``.
    """
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, ".%s.%s.tmp" % (os.path.basename(path), secrets.token_hex(6)))
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
        os.replace(tmp, path)
        done = True
    except OSError as e:
        raise write_error(path, e)
    finally:
        if not done:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    fsync_dir(directory)


def write_bytes(path, data, perms=0o644):
    """Replace ``path`` atomically with ``data`` (bytes)."""
    with atomic_output(path, "wb", perms) as fh:
        fh.write(data)


def write_text(path, text, perms=0o644):
    """Replace ``path`` atomically with ``text`` (UTF-8)."""
    with atomic_output(path, "w", perms, encoding="utf-8", newline="") as fh:
        fh.write(text)
