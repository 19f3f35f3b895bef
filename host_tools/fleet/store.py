"""The ingest store: verified frames in an embedded SQLite database.

One row per (device, epoch), holding the exact frame bytes, the payload's
SHA-256 and the configuration id of its mechanisms. The database runs in WAL
mode with ``synchronous=FULL``: a commit returns only after the WAL is on disk,
so a frame acknowledged after its commit survives a kill -9 or power loss, and
a killed writer leaves a database that opens (SQLite rolls back the uncommitted
tail of the WAL).

Rules (docs/trust.md §5), checked inside the frame's write transaction
(``BEGIN IMMEDIATE``, so concurrent ingests cannot interleave a check and an
insert), in any delivery order:

* a (device, epoch) not yet stored: the frame is stored;
* the same (device, epoch) with the same payload bytes: a duplicate,
  acknowledged and not stored again (a resend is free, privacy rule 5);
* the same (device, epoch) with other bytes: a conflict. The frame is kept
  aside in the ``conflicts`` table, reported, and never returned by
  ``frames()`` or ``releases()``: two noisings of one window cost 2 epsilon.

Refusing old frames (rollback) is the device ledger's job, not the store's.

Only ``ingest`` creates a store (``create=True``), and only where no file
exists: the store is built under a temporary name and hard-linked into place,
so an existing file is never replaced and nobody sees a half-made store. A
store is marked by ``PRAGMA application_id`` (checked in the file's header
before SQLite opens it, so a foreign, empty or damaged file is refused
without a byte written) and its schema by ``PRAGMA user_version``. Reading
commands open the database read-only (``mode=ro``).
"""
import contextlib
import json
import os
import secrets
import sqlite3
import stat
import urllib.parse

from edgesynth.errors import InputError, StoreError, StoreWriteError
from edgesynth.filekind import SQLITE_HEAD, STORE_MARK
from edgesynth.filekind import check as check_kind
from edgesynth.frames import parse_frame
from edgesynth.outputs import fsync_dir
from edgesynth.stdio import refuse

APPLICATION_ID = int.from_bytes(STORE_MARK, "big")  # SQLite header bytes 68..71
SCHEMA_VERSION = 2                               # PRAGMA user_version
BUSY_TIMEOUT_MS = 30000

_COLUMNS = """
    device TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    digest TEXT NOT NULL,
    config_id TEXT NOT NULL,
    raw BLOB NOT NULL"""
# 8 KiB pages: a 26 KB frame takes 4 pages instead of 7, a third less CPU per
# insert than 4 KiB, and overflow pages stay full (64 KiB pages would save a
# little more CPU but leave ~20% of each page empty). Set before any table.
_SCHEMA = """
PRAGMA page_size = 8192;
PRAGMA application_id = %d;
PRAGMA user_version = %d;
CREATE TABLE frames (%s,
    PRIMARY KEY (device, epoch));
CREATE TABLE conflicts (%s,
    PRIMARY KEY (device, epoch, digest));
PRAGMA journal_mode = WAL;
""" % (APPLICATION_ID, SCHEMA_VERSION, _COLUMNS, _COLUMNS)

STORED, DUPLICATE, CONFLICT = "stored", "duplicate", "conflict"


def check_parts(parts):
    """InputError unless ``parts`` (device_ranges' count) is an int >= 1 (not a bool)."""
    if not isinstance(parts, int) or isinstance(parts, bool) or parts < 1:
        raise InputError("parts must be a positive integer, not %r" % (parts,))


def config_id_of(rel):
    """One id for a release's public configuration: its mechanisms' ids joined
    (the id `inspect` and `assemble --json` show; a kind without ids counts by kind)."""
    return "+".join(m.config_id() if hasattr(m, "config_id") else m.kind for m in rel.mechs)


def _check_file(path):
    """Refuse ``path`` unless it is a regular file whose SQLite header carries
    the store's application id; reads 100 bytes and writes nothing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block the open
    except FileNotFoundError:
        raise StoreError("%s: no such store (create it with `edgesynth ingest`)" % path)
    except OSError as e:
        raise StoreError("%s: cannot open the store (%s)" % (path, e.strerror or e))
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise StoreError("%s: not a regular file, so not an edgesynth store" % path)
        head = fh.read(100)
    if not head:
        raise StoreError("%s: empty file, not an edgesynth store; left unchanged. `ingest` creates a store "
                         "only where no file exists; if this was a store, restore it from a backup" % path)
    if len(head) < 100 or head[:16] != SQLITE_HEAD:
        check_kind(path, "store")  # another edgesynth file: say which and what takes it
        raise StoreError("%s: not an SQLite database, so not an edgesynth store; left unchanged" % path)
    app = int.from_bytes(head[68:72], "big")
    if app == 0 and _is_schema_1(path):
        raise StoreError("%s: a store of an earlier edgesynth (schema 1), left unchanged; its frames are "
                         "intact: `edgesynth store migrate %s --to NEW --keyring K` copies them into a "
                         "new store" % (path, path))
    if app != APPLICATION_ID:
        raise StoreError("%s: an SQLite database without the edgesynth store mark (application_id %#x, "
                         "a store has %#x); left unchanged" % (path, app, APPLICATION_ID))


def _create(path):
    """Create an empty store at ``path`` unless a file is already there."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, ".%s.%s.tmp" % (os.path.basename(path), secrets.token_hex(6)))
    try:
        db = sqlite3.connect(tmp, isolation_level=None)
        try:
            db.execute("PRAGMA synchronous=FULL")
            db.executescript(_SCHEMA)
        finally:
            db.close()  # the last connection checkpoints the WAL into the file
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # a concurrent ingest (or anything else) got there first; checked on open
        fsync_dir(directory)
    except (OSError, sqlite3.Error) as e:
        raise StoreError("%s: cannot create the store (%s)" % (path, getattr(e, "strerror", None) or e))
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _uri(path, mode):
    return "file:%s?mode=%s" % (urllib.parse.quote(os.path.abspath(path)), mode)


def _is_schema_1(path):
    """True for a store written before the (device, epoch) rules (schema 1:
    a ``meta`` table, no application id). Read as immutable: no byte written,
    no -wal or -shm file made."""
    try:
        db = sqlite3.connect(_uri(path, "ro") + "&immutable=1", uri=True)
        try:
            row = db.execute("SELECT v FROM meta WHERE k='schema'").fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return False
    return row is not None and row[0] == "1"


def require_schema_1(path):
    """StoreError unless ``path`` is a schema-1 store (reads, writes nothing)."""
    refuse(path, "a store", "it is a SQLite file, read in place; give its path")
    if not os.path.isfile(path) or not _is_schema_1(path):
        raise StoreError("%s: not an edgesynth store of schema 1" % path)


def schema_1_frames(path):
    """Yield the exact frame bytes of a schema-1 store, oldest key first.
    Opened read-only (not immutable, so frames still in its WAL are read
    too); StoreError when ``path`` is not such a store."""
    require_schema_1(path)
    try:
        db = sqlite3.connect(_uri(path, "ro"), uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            for (raw,) in db.execute("SELECT raw FROM frames ORDER BY device, epoch, seq"):
                yield bytes(raw)
        finally:
            db.close()
    except sqlite3.Error as e:
        raise StoreError("%s: cannot read the schema-1 store (%s)" % (path, e))


class Store:
    """An open store; use as a context manager.

    ``create=False`` (every reading command): open an existing store
    read-only. ``create=True`` (``ingest`` only): create the store if no file
    is at ``path``, then open it read-write. Either way a file that is not an
    edgesynth store of this schema raises StoreError and is left unchanged.
    """

    _RAW_BYTES = "LENGTH(raw)"  # SQL of a frame's size in bytes (PostgreSQL spells it octet_length)

    def __init__(self, path, create=False):
        refuse(path, "a store", "it is a SQLite file, read and written in place; give its path")
        self.path = path
        if create and not os.path.lexists(path):
            _create(path)
        _check_file(path)
        uri = _uri(path, "rw" if create else "ro")
        try:
            self.db = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        except sqlite3.Error as e:
            raise StoreError("%s: cannot open the store (%s)" % (path, e))
        try:
            self.db.execute("PRAGMA busy_timeout=%d" % BUSY_TIMEOUT_MS)
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
            if version != SCHEMA_VERSION:
                raise StoreError("%s: store schema %d, this edgesynth reads %d" % (path, version, SCHEMA_VERSION))
            if create:
                mode = self.db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if mode.lower() != "wal":
                    raise StoreError("%s: cannot switch the store to WAL mode (got %s)" % (path, mode))
                self.db.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as e:
            self.db.close()
            raise StoreError("%s: not a usable edgesynth store (%s)" % (path, e))
        except StoreError:
            self.db.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self.db.close()

    def _read(self, sql, args=()):
        """All rows of a query; a damaged database becomes a StoreError."""
        try:
            return self.db.execute(sql, args).fetchall()
        except sqlite3.Error as e:
            raise StoreError("%s: cannot read the store (%s)" % (self.path, e))

    def put(self, rel):
        """Store one verified Release (edgesynth.frames) in its own transaction.

        Returns STORED, DUPLICATE or CONFLICT (kept aside, see the module
        docstring) once the transaction has committed, so the caller may
        acknowledge. Raises StoreWriteError if the transaction fails; then
        nothing of it was written.
        """
        return self.put_many([rel])[0]

    def put_many(self, rels):
        """Store verified Releases in one transaction (one commit, one fsync:
        the gateway's batches); the list of their results, in order, once
        committed. A frame repeated in ``rels`` is a DUPLICATE the second
        time, as in separate transactions. StoreWriteError: nothing written."""
        db = self.db
        try:
            db.execute("BEGIN IMMEDIATE")
            results = [self._put(rel) for rel in rels]
            db.execute("COMMIT")
            return results
        except BaseException as e:
            # SQLite may already have rolled back (a COMMIT that fails on a
            # full disk does): roll back only a transaction still open
            if db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
            if isinstance(e, sqlite3.Error):
                raise StoreWriteError("%s: cannot write the store (%s)" % (self.path, e))
            raise

    def _put(self, rel):
        """One frame's rule, inside the open transaction: a new (device,
        epoch) is inserted at once (the only constraint a row of non-null
        values can meet is the primary key), the stored digest read only
        when the insert was ignored."""
        digest = rel.payload_digest
        row = (rel.device, rel.epoch, rel.seq, digest, config_id_of(rel), sqlite3.Binary(rel.raw))
        if self.db.execute("INSERT OR IGNORE INTO frames VALUES (?, ?, ?, ?, ?, ?)", row).rowcount:
            return STORED
        have = self.db.execute("SELECT digest FROM frames WHERE device=? AND epoch=?",
                               (rel.device, rel.epoch)).fetchone()
        if have is None:  # ignored for another reason than the key: put_many says it, nothing written
            raise sqlite3.IntegrityError("frame of device %r epoch %d neither inserted nor found"
                                         % (rel.device, rel.epoch))
        if have[0] == digest:
            return DUPLICATE
        self.db.execute("INSERT OR IGNORE INTO conflicts VALUES (?, ?, ?, ?, ?, ?)", row)
        return CONFLICT

    def count(self, devices=None, config_id=None, device_range=None, exclude=None):
        """Number of stored frames (conflicts not included), optionally
        filtered as frames() is; counted in the database, no frame read."""
        sql, args = self._select("COUNT(*)", devices, config_id, device_range, exclude)
        return self._read(sql, args)[0][0]

    def stats(self):
        """{"frames", "devices", "configs": {config id: frames}, "bytes", "conflicts"}."""
        frames, size, devices = self._read(
            "SELECT COUNT(*), COALESCE(SUM(%s), 0), COUNT(DISTINCT device) FROM frames" % self._RAW_BYTES)[0]
        configs = dict(self._read("SELECT config_id, COUNT(*) FROM frames GROUP BY config_id ORDER BY 1"))
        conflicts = self._read("SELECT COUNT(*) FROM conflicts")[0][0]
        return {"frames": frames, "devices": devices, "configs": configs, "bytes": size, "conflicts": conflicts}

    def keys(self):
        """{(device, epoch, seq): payload digest} of every stored frame."""
        return {(d, e, s): h for d, e, s, h in self._read("SELECT device, epoch, seq, digest FROM frames")}

    def conflicts(self):
        """Sorted (device, epoch, seq, payload digest) of the frames kept aside."""
        return self._read("SELECT device, epoch, seq, digest FROM conflicts ORDER BY 1, 2, 3, 4")

    def _select(self, columns, devices=None, config_id=None, device_range=None, exclude=None):
        """SQL and arguments selecting ``columns`` of the stored frames (never
        the conflicts) of ``devices`` (ids), ``config_id`` and ``device_range``
        ((lo, hi): lo <= device < hi, None unbounded), without those of the
        devices in ``exclude`` (ids). A list of ids is one parameter, a JSON
        array read by json_each (SQLite 3.38+ has it built in): a statement's
        parameters are capped (32766), a revocation list or a --device list is
        not; SQLite builds the list's index once per statement."""
        where, args = [], []
        if devices:
            where.append("device IN (SELECT value FROM json_each(?))")
            args.append(json.dumps(list(devices)))
        if exclude:
            where.append("device NOT IN (SELECT value FROM json_each(?))")
            args.append(json.dumps(list(exclude)))
        if config_id:
            where.append("config_id = ?")
            args.append(config_id)
        lo, hi = device_range or (None, None)
        if lo is not None:
            where.append("device >= ?")
            args.append(lo)
        if hi is not None:
            where.append("device < ?")
            args.append(hi)
        return "SELECT %s FROM frames%s" % (columns, " WHERE " + " AND ".join(where) if where else ""), args

    def frames(self, devices=None, config_id=None, device_range=None, exclude=None):
        """Iterator of the exact bytes of the stored frames (never the
        conflicts) in (device, epoch) order, optionally filtered: ``devices``
        (ids: only these), ``config_id`` (only this configuration),
        ``device_range`` ((lo, hi): lo <= device < hi, either None for
        unbounded), ``exclude`` (ids, any number: never these devices' frames,
        which are not read at all). Streamed from the database one row at a
        time: memory does not grow with the number of frames. A reading
        snapshot: frames stored meanwhile are not seen."""
        sql, args = self._select("raw", devices, config_id, device_range, exclude)
        try:
            for (raw,) in self.db.execute(sql + " ORDER BY device, epoch", args):
                yield raw
        except sqlite3.Error as e:
            raise StoreError("%s: cannot read the store (%s)" % (self.path, e))

    def config_ids(self, devices=None, device_range=None, exclude=None):
        """Sorted distinct configuration ids of the selected stored frames (filters as frames())."""
        sql, args = self._select("DISTINCT config_id", devices, None, device_range, exclude)
        return [r[0] for r in self._read(sql + " ORDER BY 1", args)]

    def device_ranges(self, parts, config_id=None, exclude=None):
        """Up to ``parts`` (>= 1) consecutive device ranges (lo, hi) covering
        every device (the first lo and the last hi None, unbounded), with
        about equal numbers of stored frames of ``config_id`` (None: all),
        not counting the frames of the devices in ``exclude`` (ids).
        Every frame of a device falls in one range. One pass over the device
        column (the primary key's index alone when no other configuration is
        stored)."""
        check_parts(parts)
        if config_id and self.config_ids() == [config_id]:
            config_id = None
        sql, args = self._select("device", None, config_id, None, exclude)
        total = self._read("SELECT COUNT(*) FROM (%s)" % sql, args)[0][0]
        marks = {total * i // parts for i in range(1, parts)}
        cuts, first = [], None
        try:
            for n, (device,) in enumerate(self.db.execute(sql + " ORDER BY device, epoch", args)):
                if first is None:
                    first = device
                if n in marks and device > (cuts[-1] if cuts else first):
                    cuts.append(device)
        except sqlite3.Error as e:
            raise StoreError("%s: cannot read the store (%s)" % (self.path, e))
        bounds = [None] + cuts + [None]
        return list(zip(bounds[:-1], bounds[1:]))

    def releases(self, devices=None, config_id=None):
        """Decoded Releases of the stored frames (never the conflicts), optionally filtered.

        The bytes were verified at ingest; they are decoded again (with the
        same limits) because the database file is only as trusted as its disk.
        Several configurations without a ``config_id`` filter is an error that
        lists them, since frames of different configurations do not merge.
        A list: for a few frames (assembly streams frames() instead).
        """
        config_id = self.single_config(devices, config_id)
        return [parse_frame(raw)[0] for raw in self.frames(devices, config_id)]

    def single_config(self, devices=None, config_id=None, device_range=None, exclude=None):
        """The one configuration id of the selected frames (filters as
        frames(); ``config_id`` if given and any frame has it); InputError
        when none match or several configurations do."""
        ids = self.config_ids(devices, device_range, exclude)
        if config_id:
            ids = [i for i in ids if i == config_id]
        if not ids:
            raise InputError("%s: no stored frames match" % self.path)
        if len(ids) > 1:
            raise InputError("%s: the selected frames have %d configurations (%s); choose one with "
                             "--config-hash" % (self.path, len(ids), ", ".join(ids)))
        return ids[0]
