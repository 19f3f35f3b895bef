"""Platform filesystem shim: replace a file atomically by write-then-rename.

Portable to MicroPython, which has ``os.rename`` and ``os.remove`` but no
``os.replace``, ``os.open``, ``os.fsync``, ``tempfile`` or ``pathlib``.

``write_atomic(path, write)`` writes the new content to ``path + ".tmp"``,
flushes and fsyncs it, renames it over ``path``, then makes the rename durable
(``sync_dir``). POSIX rename and LittleFS rename replace the target atomically.
MicroPython's FAT driver removes an existing target before renaming, and a
rename that was not yet durable can be undone by a power cut, so after a cut
either file may hold the newest complete record: readers read both
(``candidates``), validate each (agent/persist.py authenticates every record,
which also rejects a ``.tmp`` torn during its write) and keep the newest. A
reader that found the newest in ``.tmp`` calls ``promote`` before its next
write: write_atomic reopens ``.tmp`` with "wb", which would empty the only copy.

Durability per platform:
* CPython: the file is fsynced before the rename and its directory after it.
* MicroPython with ``os.sync`` (e.g. stm32, whose flash block device caches
  writes): ``os.sync()`` after the rename flushes file and directory.
* MicroPython without it (the unix port; ports whose block device writes
  through, such as rp2 and esp32 with LittleFS, which commits each close and
  rename before returning): nothing more to do.
"""
import os


def candidates(path):
    """The files that may hold the newest complete record."""
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
    except (AttributeError, OSError):  # MicroPython: close() hands the data to the block device
        pass


def _parent(path):
    i = path.rfind("/")
    if i < 0:
        return "."
    return path[:i] or "/"


def sync_dir(path):
    """Make a rename or creation of ``path`` durable (see module docstring)."""
    if not hasattr(os, "open"):  # MicroPython
        if hasattr(os, "sync"):
            os.sync()
        return
    try:
        fd = os.open(_parent(path), os.O_RDONLY)
    except OSError:  # a platform that cannot open directories (Windows)
        return
    try:
        os.fsync(fd)
    except OSError:  # a filesystem without directory fsync
        pass
    finally:
        os.close(fd)


def promote(path, found):
    """Make ``found``, one of ``candidates(path)``, the file ``path``, durably
    (write_atomic's last step); nothing to do when ``found`` is ``path``."""
    if found == path:
        return
    try:
        os.rename(found, path)
    except OSError:  # a filesystem that refuses to rename onto an existing file
        os.remove(path)
        os.rename(found, path)
    sync_dir(path)


def write_atomic(path, write):
    """Replace ``path`` by what ``write(file)`` writes, all or nothing, durably."""
    tmp = path + ".tmp"
    f = open(tmp, "wb")
    try:
        write(f)
        f.flush()
        _sync(f)
    finally:
        f.close()
    promote(path, tmp)
