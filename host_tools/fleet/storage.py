"""Frames into the durable store (``edgesynth ingest``, ``store migrate``;
docs/trust.md): verify each frame under its device's key, store it by group
commit (a batch of frames per transaction), and report each frame only after
its batch's commit."""
import contextlib
import itertools
import os

from edgesynth.errors import InputError
from edgesynth.fleet.backends import connect
from edgesynth.fleet.framefiles import listed
from edgesynth.fleet.ingest import ingest as ingest_files
from edgesynth.fleet.ingest import migrate as migrate_store
from edgesynth.fleet.keys import Keyring
from edgesynth.fleet.keys import load as load_keyring
from edgesynth.fleet.store import require_schema_1
from edgesynth.stdio import read_once

MAX_JOBS = 1024  # verification processes


def usable_cpus():
    """The CPUs this process may run on (its affinity mask, as under taskset
    or a container's cpuset), else os.cpu_count(); at least 1."""
    try:
        return min(MAX_JOBS, len(os.sched_getaffinity(0))) or 1
    except AttributeError:   # not on Linux
        return min(MAX_JOBS, os.cpu_count() or 1)


@contextlib.contextmanager
def open_store(store, keyring):
    """(Store, key_for) of ``store`` (a path or postgresql:// URL, opened for
    writing and created if missing, then closed on exit; or an open Store or
    PgStore, left open) and ``keyring`` (a path or a Keyring)."""
    ring = keyring if isinstance(keyring, Keyring) else load_keyring(keyring)
    if not isinstance(store, (str, os.PathLike)):
        yield store, ring.key_for
        return
    with connect(os.fspath(store), create=True) as st:
        yield st, ring.key_for


def _into_store(store, keyring, run, on_frame):
    """``run(store, key_for, report)`` on open_store(store, keyring); returns its Outcome."""
    with open_store(store, keyring) as (st, key_for):
        return run(st, key_for, on_frame or (lambda r: None))


def ingest(files, store, keyring, on_frame=None, *, jobs=1, recursive=False, files_from=None):
    """Verify the frames of ``files`` and append them durably to ``store``
    (a path, created if no file exists there, or an open es.Store), in any
    order and idempotently.

    files: a path or an iterable of paths (consumed lazily, so a generator
        of 10^6 names is never a list), read in order. Each is a frame file,
        "-" (stdin), a directory (its files sorted by name, hidden ones
        left out; subdirectories too with ``recursive``) or, when no such
        file exists, a glob pattern ("frames/*.bin", sorted). None or () with
        ``files_from``.
    keyring: a path or es.load_keyring(...): each frame must verify under
        the key of its envelope's device.
    on_frame: optional callable given one Report per frame right after its
        batch's commit, in input order (``result`` "stored", "duplicate",
        "conflict" or "rejected", ``reason``, ``device``, ``epoch``,
        ``seq``; ``text()`` and ``json()`` are the command's lines). Pass
        ``list.append`` to keep them.
    jobs: processes that verify frames (1..1024; 1: in this process, None:
        usable_cpus(), the CPUs this process may run on); this process
        reads the files and commits.
    files_from: a text file ("-": stdin) listing more paths, one per line,
        read line by line after ``files``.

    Returns the Outcome: ``ok`` (every frame stored or a duplicate),
    ``counts`` and ``summary()``. A frame that does not verify or conflicts
    with a stored one is reported, not raised; IngestStopped is raised when
    the store cannot be written (every frame reported before is stored; none
    of the failed batch is).
    """
    jobs = usable_cpus() if jobs is None else jobs
    if isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= MAX_JOBS:
        raise InputError("jobs must be a whole number of processes from 1 to %d, not %r" % (MAX_JOBS, jobs))
    paths = () if files is None else [files] if isinstance(files, (str, os.PathLike)) else files
    if isinstance(paths, (list, tuple)):
        read_once(list(paths) + ([] if files_from is None else [files_from]))
    ring = keyring if isinstance(keyring, Keyring) else load_keyring(keyring)  # before a list that may wait
    if files_from is not None:
        paths = itertools.chain(paths, listed(files_from))
    return _into_store(store, ring, lambda st, key_for, report: ingest_files(
        st, paths, key_for, report, jobs=jobs, recursive=recursive), on_frame)


def migrate(old, store, keyring, on_frame=None):
    """Copy the frames of a store written by an earlier edgesynth (schema 1)
    at ``old`` (only read) into ``store``, verified and stored as by ingest;
    returns the Outcome."""
    old = os.fspath(old)
    require_schema_1(old)  # before a new store is made
    return _into_store(store, keyring, lambda st, key_for, report: migrate_store(old, st, key_for, report),
                       on_frame)
