"""Frames into the durable store (``edgesynth ingest``, ``store migrate``;
docs/trust.md): verify each frame under its device's key, store it in its own
transaction, and only then report it."""
import contextlib
import os

from edgesynth.fleet.ingest import ingest as ingest_files
from edgesynth.fleet.ingest import migrate as migrate_store
from edgesynth.fleet.keys import Keyring
from edgesynth.fleet.keys import load as load_keyring
from edgesynth.fleet.store import connect, require_schema_1
from edgesynth.stdio import read_once


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


def ingest(files, store, keyring, on_frame=None):
    """Verify the frames of ``files`` (paths, in order; "-": stdin) and append them
    durably to ``store`` (a path, created if no file exists there, or an
    open es.Store), in any order and idempotently.

    keyring: a path or es.load_keyring(...): each frame must verify under
        the key of its envelope's device.
    on_frame: optional callable given one Report per frame right after its
        commit (``result`` "stored", "duplicate", "conflict" or "rejected",
        ``reason``, ``device``, ``epoch``, ``seq``; ``text()`` and ``json()``
        are the command's lines). Pass ``list.append`` to keep them.

    Returns the Outcome: ``ok`` (every frame stored or a duplicate),
    ``counts`` and ``summary()``. A frame that does not verify or conflicts
    with a stored one is reported, not raised; IngestStopped is raised when
    the store cannot be written (every frame reported before is stored).
    """
    files = [os.fspath(f) for f in ([files] if isinstance(files, (str, os.PathLike)) else files)]
    read_once(files)
    return _into_store(store, keyring, lambda st, key_for, report: ingest_files(st, files, key_for, report),
                       on_frame)


def migrate(old, store, keyring, on_frame=None):
    """Copy the frames of a store written by an earlier edgesynth (schema 1)
    at ``old`` (only read) into ``store``, verified and stored as by ingest;
    returns the Outcome."""
    old = os.fspath(old)
    require_schema_1(old)  # before a new store is made
    return _into_store(store, keyring, lambda st, key_for, report: migrate_store(old, st, key_for, report),
                       on_frame)
