"""The ingest store: verified frames in an embedded SQLite database.

One row per frame, keyed by (device, epoch, seq), holding the exact frame
bytes, the payload's SHA-256 and the configuration id of its mechanisms. The
database runs in WAL mode with ``synchronous=FULL``: a commit returns only
after the WAL is on disk, so a frame acknowledged after its commit survives a
kill -9 or power loss, and a killed writer leaves a database that opens (SQLite
rolls back the uncommitted tail of the WAL).

Replay rules (docs/trust.md), checked inside the frame's write transaction
(``BEGIN IMMEDIATE``, so concurrent ingests cannot interleave a check and an
insert):

* same (device, epoch, seq) and the same payload bytes: a duplicate,
  acknowledged and not stored again (a resend is free, privacy rule 5);
* same (device, epoch, seq), different bytes: rejected (conflict);
* a new frame whose seq is not above the device's highest stored seq:
  rejected (replay or rollback);
* a new frame for an epoch already stored under another seq: rejected, as a
  window may be released once (two noisings of one window cost 2 epsilon).
"""
import os
import sqlite3

from host_tools.errors import EdgesynthError, InputError

SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 30000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS frames (
    device TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    digest TEXT NOT NULL,
    config_id TEXT NOT NULL,
    raw BLOB NOT NULL,
    PRIMARY KEY (device, epoch, seq)
);
CREATE INDEX IF NOT EXISTS frames_device_seq ON frames (device, seq);
"""

STORED, DUPLICATE = "stored", "duplicate"


class StoreError(EdgesynthError):
    """The store cannot be opened or is not an edgesynth store."""


class Rejected(EdgesynthError):
    """A verified frame that the replay rules refuse; the message says why."""


def config_id_of(rel):
    """One id for a release's public configuration: its mechanisms' ids joined
    (the id `inspect` and `assemble --json` show; a kind without ids counts by kind)."""
    return "+".join(m.config_id() if hasattr(m, "config_id") else m.kind for m in rel.mechs)


class Store:
    """An open store; use as a context manager. ``create=False`` refuses a
    missing file (assemble and stats never create a store by accident)."""

    def __init__(self, path, create=True):
        if not create and not os.path.exists(path):
            raise StoreError("%s: no such store (create it with `edgesynth ingest`)" % path)
        self.path = path
        try:
            self.db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            self.db.execute("PRAGMA busy_timeout=%d" % BUSY_TIMEOUT_MS)
            mode = self.db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise StoreError("%s: cannot switch the store to WAL mode (got %s)" % (path, mode))
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.executescript(_SCHEMA)
            row = self.db.execute("SELECT v FROM meta WHERE k='schema'").fetchone()
            if row is None:
                self.db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            elif row[0] != str(SCHEMA_VERSION):
                raise StoreError("%s: store schema %s, this edgesynth reads %d" % (path, row[0], SCHEMA_VERSION))
        except sqlite3.DatabaseError as e:
            raise StoreError("%s: not a usable edgesynth store (%s)" % (path, e))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self.db.close()

    def put(self, rel):
        """Store one verified Release (host_tools.frames) in its own transaction.

        Returns STORED or DUPLICATE once the transaction has committed (so the
        caller may acknowledge); raises Rejected with the reason otherwise.
        """
        key = (rel.device, rel.epoch, rel.seq)
        digest = rel.payload_digest
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            row = db.execute("SELECT digest FROM frames WHERE device=? AND epoch=? AND seq=?", key).fetchone()
            if row is not None:
                if row[0] == digest:
                    db.execute("COMMIT")
                    return DUPLICATE
                raise Rejected("conflict: device %r epoch %d seq %d is already stored with different bytes"
                               % key)
            top = db.execute("SELECT MAX(seq) FROM frames WHERE device=?", (rel.device,)).fetchone()[0]
            if top is not None and rel.seq <= top:
                raise Rejected("replay or rollback: seq %d of device %r is not above its last stored seq %d"
                               % (rel.seq, rel.device, top))
            other = db.execute("SELECT seq FROM frames WHERE device=? AND epoch=?",
                               (rel.device, rel.epoch)).fetchone()
            if other is not None:
                raise Rejected("epoch %d of device %r is already stored as seq %d; a window is released once"
                               % (rel.epoch, rel.device, other[0]))
            db.execute("INSERT INTO frames VALUES (?, ?, ?, ?, ?, ?)",
                       key + (digest, config_id_of(rel), sqlite3.Binary(rel.raw)))
            db.execute("COMMIT")
            return STORED
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def stats(self):
        """{"frames", "devices", "configs": {config id: frames}, "bytes"}."""
        db = self.db
        frames, size = db.execute("SELECT COUNT(*), COALESCE(SUM(LENGTH(raw)), 0) FROM frames").fetchone()
        devices = db.execute("SELECT COUNT(DISTINCT device) FROM frames").fetchone()[0]
        configs = dict(db.execute("SELECT config_id, COUNT(*) FROM frames GROUP BY config_id ORDER BY 1"))
        return {"frames": frames, "devices": devices, "configs": configs, "bytes": size}

    def keys(self):
        """{(device, epoch, seq): payload digest} of every stored frame."""
        return {(d, e, s): h for d, e, s, h in self.db.execute("SELECT device, epoch, seq, digest FROM frames")}

    def releases(self, devices=None, config_id=None):
        """Decoded Releases of the stored frames, optionally filtered.

        The bytes were verified at ingest; they are decoded again (with the
        same limits) because the database file is only as trusted as its disk.
        Several configurations without a ``config_id`` filter is an error that
        lists them, since frames of different configurations do not merge.
        """
        from host_tools.frames import parse_frame
        sql, args = "SELECT device, epoch, seq, config_id, raw FROM frames", []
        where = []
        if devices:
            where.append("device IN (%s)" % ",".join("?" * len(devices)))
            args.extend(devices)
        if config_id:
            where.append("config_id = ?")
            args.append(config_id)
        if where:
            sql += " WHERE " + " AND ".join(where)
        rows = self.db.execute(sql + " ORDER BY device, seq", args).fetchall()
        if not rows:
            raise InputError("%s: no stored frames match" % self.path)
        ids = sorted({r[3] for r in rows})
        if len(ids) > 1:
            raise InputError("%s: the selected frames have %d configurations (%s); choose one with "
                             "--config-hash" % (self.path, len(ids), ", ".join(ids)))
        return [parse_frame(bytes(r[4]))[0] for r in rows]
