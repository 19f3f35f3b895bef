"""Platform filesystem shim: replace a file atomically by write-then-rename.

Portable to MicroPython, which has ``os.rename`` and ``os.remove`` but no
``os.replace``, ``tempfile`` or ``pathlib`` (and, on boards, no ``fsync``).

``write_atomic(path, write)`` writes the new content to ``path + ".tmp"``,
flushes (and fsyncs where the platform can), then renames it over ``path``.
POSIX rename and LittleFS rename replace the target atomically. MicroPython's
FAT driver removes an existing target before renaming, so a power cut can
leave only the ``.tmp`` copy: readers therefore try ``candidates(path)`` in
order and must validate what they read (agent/persist.py checksums every
record), which also rejects a ``.tmp`` torn by a cut during its write.
"""
import os


def candidates(path):
    """Files that may hold the latest complete record, most authoritative first."""
    return (path, path + ".tmp")


def exists(path):
    try:
        os.stat(path)
        return True
    except OSError:
        return False


def remove(path):
    """Delete ``path`` if it exists."""
    try:
        os.remove(path)
    except OSError:
        pass


def _sync(f):
    try:
        os.fsync(f.fileno())
    except (AttributeError, OSError):  # MicroPython: close() flushes to the block device
        pass


def write_atomic(path, write):
    """Replace ``path`` by what ``write(file)`` writes, all or nothing."""
    tmp = path + ".tmp"
    f = open(tmp, "wb")
    try:
        write(f)
        f.flush()
        _sync(f)
    finally:
        f.close()
    try:
        os.rename(tmp, path)
    except OSError:  # a filesystem that refuses to rename onto an existing file
        os.remove(path)
        os.rename(tmp, path)
