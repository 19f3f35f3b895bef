"""The ingest store in PostgreSQL (``--store postgresql://...``): several
ingests and gateways, on one host or many, writing one store at once.

The rules, tables and API are the SQLite store's (edgesynth.fleet.store,
docs/trust.md §4-5): ``frames`` keyed by (device, epoch), ``conflicts`` keyed
by (device, epoch, digest), the same columns (``raw`` as bytea), and in any
delivery order a frame is stored, a duplicate (same payload bytes) or a
conflict (kept aside, never read back for assembly).

Concurrency: a frame is ``INSERT ... ON CONFLICT DO NOTHING`` into
``frames``; when nothing was inserted the stored digest is read back (READ
COMMITTED takes a new snapshot per statement, so a row another writer
committed meanwhile is seen: the unique index makes our insert wait for that
writer's transaction to end). Two writers racing on one (device, epoch) with
other bytes thus give one stored frame and one conflict, never an error. A
batch takes its rows in (device, epoch) order, so every writer locks index
entries in the same order and two batches cannot deadlock. A batch's inserts
are pipelined (psycopg's executemany): one round trip, still one statement
per frame, in order.

Isolation: every connection sets READ COMMITTED itself, whatever the
database's default_transaction_isolation (under REPEATABLE READ or
SERIALIZABLE the insert that waited for a racing writer would fail with a
serialization error instead of reading that writer's row).

Durability: a batch is one transaction with ``synchronous_commit=on``; its
results are returned only after COMMIT returned, i.e. after the server has
flushed its WAL (as far as the server's ``fsync`` setting and disks honour it).

The database is marked by the table ``edgesynth_store`` (one row: the schema
version). Only writers (``create=True``: ingest, gateway, migrate) create the
tables, in one transaction under an advisory lock, so concurrent first ingests
are safe and nobody sees half of a store; tables named ``frames`` or
``conflicts`` that edgesynth did not make are refused and left alone. Readers
run every transaction READ ONLY. frames() streams on a connection of its own,
so a put on the store's connection meanwhile commits at once (an ack only
after commit) and several frames() iterators can be read in any order.

psycopg is imported here only, when a PostgreSQL store is opened: SQLite users
never need it (``pip install edgesynth[postgres]``).
"""
import itertools
import urllib.parse

from edgesynth.errors import StoreError, StoreWriteError
from edgesynth.fleet.store import CONFLICT, DUPLICATE, STORED, Store, check_parts, config_id_of

SCHEMES = ("postgresql", "postgres")
MARK = "edgesynth_store"                       # the marker table's name
SCHEMA_VERSION = 1                             # the row of the marker table
LOCK_KEY = int.from_bytes(b"ESst", "big")      # pg_advisory_xact_lock key taken while creating the tables
FETCH_ROWS = 256                               # frames() rows per round trip (~7 MiB of 29 KB frames)
CONNECT_TIMEOUT_S = 10                         # unless the URL sets connect_timeout

# device and config_id sort bytewise (COLLATE "C"), as SQLite's BINARY does,
# so frames() and config_ids() come in the SQLite store's order whatever the
# database's locale
_COLUMNS = """
    device text COLLATE "C" NOT NULL,
    epoch bigint NOT NULL,
    seq bigint NOT NULL,
    digest text NOT NULL,
    config_id text COLLATE "C" NOT NULL,
    raw bytea NOT NULL"""
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS %s (version integer NOT NULL)" % MARK,
    "CREATE TABLE IF NOT EXISTS frames (%s, PRIMARY KEY (device, epoch))" % _COLUMNS,
    "CREATE TABLE IF NOT EXISTS conflicts (%s, PRIMARY KEY (device, epoch, digest))" % _COLUMNS,
    # frames are noisy msgpack that does not compress: store them out of line
    # without trying pglz on every insert
    "ALTER TABLE frames ALTER COLUMN raw SET STORAGE EXTERNAL",
    "ALTER TABLE conflicts ALTER COLUMN raw SET STORAGE EXTERNAL",
)
_INSERT = "INSERT INTO %s VALUES (%%s, %%s, %%s, %%s, %%s, %%s) ON CONFLICT DO NOTHING"


def is_url(target):
    """True when ``target`` is a str naming a PostgreSQL store (postgresql:// or postgres://)."""
    scheme, sep, _ = target.partition("://") if isinstance(target, str) else ("", "", "")
    return bool(sep) and scheme.lower() in SCHEMES


def _secret(name):
    """True for a URL parameter that holds a secret: ``password``,
    ``sslpassword`` and any other name ending in "password"."""
    return name.lower().endswith("password")


def label(url):
    """``url`` without its passwords (in the user info or any ``...password=``
    parameter): the store's name in messages."""
    try:
        parts = urllib.parse.urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            user, host = netloc.rsplit("@", 1)
            netloc = user.split(":", 1)[0] + "@" + host
        query = "&".join(q for q in parts.query.split("&") if q and not _secret(q.split("=", 1)[0]))
        return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    except ValueError:
        return "%s://(a malformed URL)" % url.partition("://")[0]


def _password(url):
    """The secrets in ``url`` (as given and %-decoded), to mask in libpq's
    messages; split by hand, not urlsplit, so that a URL urlsplit refuses
    (libpq then quotes it whole) still has its password found."""
    netloc = url.partition("://")[2].split("/", 1)[0].split("?", 1)[0]
    secrets = [netloc.rpartition("@")[0].partition(":")[2]]
    secrets += [v for k, vs in urllib.parse.parse_qs(url.partition("?")[2]).items() if _secret(k) for v in vs]
    return [v for s in secrets if s for v in {s, urllib.parse.unquote(s)}]


def _psycopg():
    try:
        import psycopg
    except ImportError:
        raise StoreError("a postgresql:// store needs psycopg 3: pip install 'edgesynth[postgres]'")
    return psycopg


class PgStore:
    """An open PostgreSQL store; the API and rules of fleet.store.Store.

    ``url``: a libpq URL, postgresql://[USER[:PASSWORD]@]HOST[:PORT]/DATABASE[?PARAMS];
    the password may instead come from PGPASSWORD or ~/.pgpass (libpq's rules).
    ``create=False`` (reading commands): every transaction is READ ONLY and the
    database must hold a store. ``create=True`` (ingest, gateway, migrate):
    create the tables if the database has none. ``path`` is the URL without its
    password, for messages; ``target`` the URL as given, for opening the store
    again elsewhere (the Dask tasks of fleet.assembly).
    """

    def __init__(self, url, create=False):
        self.target, self.path = url, label(url)
        self._secrets = _password(url)
        self._cursors = itertools.count()
        psycopg = self._pg = _psycopg()
        # libpq's own parser: it takes every URL libpq takes (multi-host
        # postgresql://u@h1:5432,h2:5433/db included); a bad port is libpq's connect error
        try:
            self._opts = psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.Error as e:
            raise StoreError("%s: not a valid postgresql:// URL (%s)" % (self.path, self._say(e)))
        self._opts.setdefault("connect_timeout", CONNECT_TIMEOUT_S)
        self._opts.setdefault("application_name", "edgesynth")
        self.db = self._connect(read_only=not create)
        try:
            if create:
                self.db.execute("SET synchronous_commit TO on")  # whatever the server's default
                self._create()
            self._check()
        except psycopg.Error as e:
            self.db.close()
            raise StoreError("%s: not a usable edgesynth store (%s)" % (self.path, self._say(e)))
        except StoreError:
            self.db.close()
            raise

    def _connect(self, read_only):
        """A new autocommit connection, READ COMMITTED (module docstring) and,
        for ``read_only``, every transaction READ ONLY; StoreError if it fails."""
        try:
            db = self._pg.connect(autocommit=True, **self._opts)
        except self._pg.Error as e:
            raise StoreError("%s: cannot connect (%s)" % (self.path, self._say(e)))
        try:
            db.execute("SET default_transaction_isolation TO 'read committed'")
            if read_only:
                db.execute("SET default_transaction_read_only TO on")
        except self._pg.Error as e:
            db.close()
            raise StoreError("%s: cannot connect (%s)" % (self.path, self._say(e)))
        return db

    def _say(self, e):
        """psycopg's message on one line, without the password."""
        text = " ".join(str(e).split()) or type(e).__name__
        for s in self._secrets:
            text = text.replace(s, "***")
        return text

    def _exists(self, table):
        return self.db.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()[0]

    def _foreign(self):
        """StoreError unless the tables edgesynth would make are all absent."""
        taken = [t for t in ("frames", "conflicts") if self._exists(t)]
        if taken:
            raise StoreError("%s: the database has table(s) %s that edgesynth did not make (no %s table); "
                             "left unchanged: give an empty database" % (self.path, ", ".join(taken), MARK))

    def _create(self):
        with self.db.transaction():
            self.db.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
            if self._exists(MARK):
                return
            self._foreign()
            for sql in _SCHEMA:
                self.db.execute(sql)
            self.db.execute("INSERT INTO %s VALUES (%%s)" % MARK, (SCHEMA_VERSION,))

    def _check(self):
        with self.db.transaction():
            if not self._exists(MARK):
                self._foreign()
                raise StoreError("%s: no edgesynth store in this database (create it with `edgesynth ingest`)"
                                 % self.path)
            versions = [v for (v,) in self.db.execute("SELECT version FROM %s" % MARK)]
        if versions != [SCHEMA_VERSION]:
            raise StoreError("%s: store schema %s, this edgesynth reads %d"
                             % (self.path, "/".join(map(str, versions)) or "missing", SCHEMA_VERSION))

    def _read(self, sql, args=()):
        """All rows of a query, in one transaction; a failure becomes a StoreError."""
        try:
            with self.db.transaction():
                return self.db.execute(sql, args).fetchall()
        except self._pg.Error as e:
            raise StoreError("%s: cannot read the store (%s)" % (self.path, self._say(e)))

    def put(self, rel):
        """Store one verified Release in its own transaction; STORED, DUPLICATE
        or CONFLICT once committed. StoreWriteError: not acknowledged (see put_many)."""
        return self.put_many([rel])[0]

    def put_many(self, rels):
        """Store verified Releases in one transaction; their results, in order,
        once COMMIT returned. A frame repeated in ``rels`` is a DUPLICATE (or a
        CONFLICT) the second time, as in separate transactions. Raises
        StoreWriteError when the transaction fails (the server unreachable, a
        full disk): then none of it is acknowledged; it may or may not have
        been committed (a connection lost during COMMIT leaves the outcome
        unknown), and putting the same frames again is safe (they come back
        STORED or DUPLICATE). Also a StoreWriteError, before writing anything,
        when the connection is inside a transaction (a caller's
        ``db.transaction()``): this batch would only be a savepoint of it,
        not committed when its results are returned."""
        if self.db.info.transaction_status != self._pg.pq.TransactionStatus.IDLE:
            raise StoreWriteError("%s: cannot write the store inside an open transaction (the results would "
                                  "come before the commit)" % self.path)
        rels = list(rels)
        # (device, epoch) order for the locks (see the module docstring); the
        # sort is stable, so repeats of one window keep their given order
        order = sorted(range(len(rels)), key=lambda i: (rels[i].device, rels[i].epoch))
        rows = {i: (rels[i].device, rels[i].epoch, rels[i].seq, rels[i].payload_digest, config_id_of(rels[i]),
                    rels[i].raw) for i in order}
        results = [STORED] * len(rels)
        try:
            with self.db.transaction(), self.db.cursor() as cur:
                # one round trip for the batch (executemany pipelines), each
                # insert still its own statement, in order
                cur.executemany(_INSERT % "frames" + " RETURNING true", [rows[i] for i in order], returning=True)
                taken = []
                for i in order:
                    if cur.fetchone() is None:
                        taken.append(i)
                    cur.nextset()
                if taken:  # the digest each of these windows is stored with (by us or a committed writer)
                    have = {(d, e): h for d, e, h in cur.execute(
                        "SELECT device, epoch, digest FROM frames WHERE (device, epoch) IN "
                        "(SELECT * FROM unnest(%s::text[], %s::bigint[]))",
                        ([rows[i][0] for i in taken], [rows[i][1] for i in taken]))}
                    clash = [i for i in taken if have[rows[i][:2]] != rows[i][3]]
                    for i in taken:
                        results[i] = DUPLICATE
                    for i in clash:
                        results[i] = CONFLICT
                    if clash:
                        cur.executemany(_INSERT % "conflicts", [rows[i] for i in clash])
        except self._pg.Error as e:
            raise StoreWriteError("%s: cannot write the store (%s)" % (self.path, self._say(e)))
        return results

    def frames(self, devices=None, config_id=None, device_range=None, exclude=None):
        """The stored frames' bytes (never the conflicts), ordered by (device,
        epoch), streamed through a server-side cursor FETCH_ROWS rows at a
        time (memory independent of the number of frames), on a read-only
        connection of its own opened at the first frame and closed when the
        iterator ends or is closed: writes on this store meanwhile commit as
        usual, and several iterators may be read in any order.

        devices: only these ids; config_id: only this configuration;
        device_range: (lo, hi), lo <= device < hi, either None for unbounded;
        exclude: never these devices' frames (ids, any number; not read at all).
        """
        where, args = _where(devices, config_id, device_range, exclude)
        name = "edgesynth_frames_%d" % next(self._cursors)  # a distinct name for each iterator (pg_cursors)
        db = self._connect(read_only=True)
        try:
            with db.transaction(), db.cursor(name=name, binary=True) as cur:
                cur.itersize = FETCH_ROWS
                cur.execute("SELECT raw FROM frames%s ORDER BY device, epoch" % where, args)
                for (raw,) in cur:
                    yield bytes(raw)
        except self._pg.Error as e:
            raise StoreError("%s: cannot read the store (%s)" % (self.path, self._say(e)))
        finally:
            db.close()

    def config_ids(self, devices=None, device_range=None, exclude=None):
        """Sorted distinct configuration ids of the selected frames (as frames())."""
        where, args = _where(devices, None, device_range, exclude)
        return [c for (c,) in self._read("SELECT DISTINCT config_id FROM frames%s ORDER BY 1" % where, args)]

    def device_ranges(self, parts, config_id=None, exclude=None):
        """Up to ``parts`` (lo, hi) device ranges covering every device (first
        lo and last hi None, each hi the next lo), cut at the devices that start
        each 1/parts of the frames (of ``config_id`` if given, not those of the
        devices in ``exclude``) in (device, epoch) order: roughly equal frame
        counts, a device never split."""
        check_parts(parts)
        where, args = _where(None, config_id, None, exclude)
        n = self._read("SELECT COUNT(*) FROM frames%s" % where, args)[0][0]
        marks = sorted({1 + k * n // parts for k in range(parts)})
        firsts = self._read("SELECT device FROM (SELECT device, row_number() OVER (ORDER BY device, epoch) AS i "
                            "FROM frames%s) t WHERE i = ANY(%%s) ORDER BY i" % where, args + [marks])
        cuts = sorted({d for (d,) in firsts[1:]} - {firsts[0][0]}) if firsts else []
        return list(zip([None] + cuts, cuts + [None]))

    def count(self, devices=None, config_id=None, device_range=None, exclude=None):
        """Number of stored frames (conflicts not included), filtered as
        frames(); counted in the database, no frame read."""
        where, args = _where(devices, config_id, device_range, exclude)
        return self._read("SELECT COUNT(*) FROM frames%s" % where, args)[0][0]

    # built on config_ids() and frames(): the same code for both backends
    # the reading code that is plain SQL both databases speak
    _RAW_BYTES = "octet_length(raw)"
    __enter__, __exit__, close = Store.__enter__, Store.__exit__, Store.close
    stats, keys, conflicts = Store.stats, Store.keys, Store.conflicts
    single_config = Store.single_config
    releases = Store.releases


def _where(devices, config_id, device_range, exclude=None):
    """(" WHERE ..." or "", parameters) selecting frames as frames() documents.
    ``exclude`` is one array parameter (any length) left out by an anti-join
    (NOT EXISTS): the planner hashes or sorts the list once instead of
    comparing every frame with every id (``<> ALL`` would)."""
    where, args = [], []
    if devices:
        where.append("device = ANY(%s)")
        args.append(list(devices))
    if exclude:
        where.append('NOT EXISTS (SELECT 1 FROM unnest(%s::text[]) AS x(d) WHERE x.d COLLATE "C" = frames.device)')
        args.append(list(exclude))
    if config_id:
        where.append("config_id = %s")
        args.append(config_id)
    lo, hi = device_range or (None, None)
    if lo is not None:
        where.append("device >= %s")
        args.append(lo)
    if hi is not None:
        where.append("device < %s")
        args.append(hi)
    return (" WHERE " + " AND ".join(where) if where else ""), args
