"""Device keys: a keyring file mapping device ids to HMAC-SHA256 keys, or
deriving them from a fleet master key.

The keyring is JSON. Format 1, ``{"format": 1, "keys": {"<device id>": "<64 hex
digits>"}}``, holds explicit per-device keys (``keys new``). Format 2 adds
``"master": "<64 hex digits>"`` (``keys fleet``) and ``"revoked": [ids]``
(``keys revoke``); a file is written as format 2 only when it holds either, so
that an older edgesynth, which would ignore them (accept a revoked device,
refuse every derived one), refuses the file instead.

A device's key is, in this order: none if the device is revoked; its explicit
key if listed; else HKDF-SHA256 (RFC 5869) of the master with no salt, info
``b"edgesynth device key v1\x00" + device id (UTF-8)`` and 32 bytes of
output, if there is a master; else none. The file stays the size of the
master (plus explicit keys and revocations) for any fleet size.

The file is created with mode 0600 and only ever replaced atomically
(edgesynth.outputs: temporary file in the same directory, fsync, rename), so a
crash leaves the old or the new keyring, never a torn one. Keys are never
printed. A keyring that others can read or write is refused, as ssh refuses
such a private key: whoever reads a key can forge that device's frames, and
whoever reads the master can forge every derived device's.

The keyring path must name a regular file (or nothing yet, for the commands
that write it): a FIFO, device or directory is refused without blocking on
it. Reading follows a symlink; writing refuses one, since replacing a symlink
by rename would leave its target holding the old keys. The JSON is bounded
before parsing (size, nesting depth) and a device listed twice is refused, not
resolved by keeping one of the two keys.

Keys and masters come from ``secrets.token_bytes``.
"""
import fcntl
import hashlib
import hmac
import json
import os
import re
import secrets
import stat

from edgesynth.agent.errors import ConfigError
from edgesynth.agent.wire import device_id_bytes
from edgesynth.errors import InputError, Refused
from edgesynth.filekind import check as check_kind
from edgesynth.outputs import atomic_output
from edgesynth.stdio import STDIN, is_stdio, refuse, stdin_bytes

FORMAT = 1              # explicit keys only: what every edgesynth reads
FLEET_FORMAT = 2        # a master or revocations: refused by an edgesynth that knows format 1 only
KEY_BYTES = 32          # HMAC-SHA256 key length (the hash's output size); also the master's length
MAX_KEYRING = 16 << 20  # bytes: refuse to parse anything larger
MAX_DEPTH = 4           # JSON nesting of a keyring: {"keys": {...}} is 2 deep
SECRETS = "keys never go through stdin or stdout; give the file's path"
DEVICE_INFO = b"edgesynth device key v1\x00"  # HKDF info prefix; the device id's UTF-8 bytes follow
KEY_SUFFIX = ".key"     # export: DIR/<device id>.key
PROGRESS_EVERY = 4096   # export: files between two progress calls


# HKDF is two HMAC calls (RFC 5869 §2.2-2.3); hashlib/hmac give them in C, so
# a dependency (cryptography) would add a wheel to the base install for ten lines.
def hkdf_extract(salt, ikm):
    """RFC 5869 HKDF-Extract with SHA-256: the 32-byte PRK. An empty ``salt``
    is HashLen zero bytes, as the RFC says."""
    return hmac.digest(salt or bytes(hashlib.sha256().digest_size), ikm, "sha256")


def hkdf_expand(prk, info, length):
    """RFC 5869 HKDF-Expand with SHA-256: ``length`` (1..8160) bytes of OKM."""
    if not 0 < length <= 255 * 32:
        raise ValueError("HKDF-SHA256 output is 1..8160 bytes, not %d" % length)
    okm, block, i = b"", b"", 0
    while len(okm) < length:
        i += 1
        block = hmac.digest(prk, block + info + bytes([i]), "sha256")
        okm += block
    return okm[:length]


def hkdf(ikm, info, length, salt=b""):
    """RFC 5869 HKDF-SHA256: Expand(Extract(salt, ikm), info, length)."""
    return hkdf_expand(hkdf_extract(salt, ikm), info, length)


def _derive(prk, device_bytes):
    """The device key of a master whose PRK is ``prk``: HKDF-Expand to one
    block, i.e. a single HMAC (the per-device cost of a fleet)."""
    return hmac.digest(prk, DEVICE_INFO + device_bytes + b"\x01", "sha256")


def check_device_id(device_id):
    """``device_id`` if it is a valid device id (agent.wire.device_id_bytes:
    1..64 characters of A-Z a-z 0-9 . _ - :), else an InputError."""
    try:
        device_id_bytes(device_id)
    except ConfigError as e:
        raise InputError(str(e))
    return device_id


class Keyring:
    """Device id -> key bytes, loaded from ``path`` (see module docstring):
    ``keys`` the explicit keys, ``master`` the fleet master (32 bytes) or
    None, ``revoked`` the revoked device ids. ``identity``: file_identity()
    of the file that was read (fstat of the fd read;
    None if none was), so a reader can tell whether the file has changed since."""

    def __init__(self, path, keys, master=None, revoked=(), identity=None):
        self.path = path
        self.identity = identity
        self._keys = keys
        self._master = master
        self._prk = hkdf_extract(b"", master) if master is not None else None
        self._revoked = frozenset(revoked)

    def __contains__(self, device_id):
        """Whether the device has an explicit key (derived keys are not listed)."""
        return device_id in self._keys

    @property
    def has_master(self):
        """Whether the keyring holds a fleet master (its key is never shown)."""
        return self._master is not None

    def devices(self):
        """Sorted device ids with an explicit key (never the keys)."""
        return sorted(self._keys)

    def revoked(self):
        """Sorted revoked device ids."""
        return sorted(self._revoked)

    def key_for(self, device_id):
        """The device's key, or None (neither listed nor derivable): the
        ``key_for`` of edgesynth.frames.parse_frame. A revoked device raises
        edgesynth.errors.Refused saying so (its ``public`` reason, for the
        device's receipts, does not name the keyring's path)."""
        if device_id in self._revoked:
            raise Refused("device %r is revoked in the keyring %s; its frames are refused (`edgesynth keys "
                          "unrevoke` undoes it)" % (device_id, self.path), "device %r is revoked" % device_id)
        key = self._keys.get(device_id)
        if key is None and self._prk is not None:
            try:
                key = _derive(self._prk, device_id_bytes(device_id))
            except ConfigError:  # no such id can appear in a frame
                return None
        return key

    def require(self, device_id):
        """The device's key; an InputError naming the keyring when it has none."""
        try:
            key = self.key_for(device_id)
        except Refused as e:
            raise InputError(str(e))
        if key is None:
            raise InputError("%s: no key for device %r (run `edgesynth keys new %s --keyring %s`, or `edgesynth "
                             "keys fleet` to derive every device's key)" % (self.path, device_id, device_id, self.path))
        return key


def _no_duplicates(path):
    """A json object_pairs_hook that refuses a key given twice (json keeps the last)."""
    def hook(pairs):
        out = {}
        for k, v in pairs:
            if k in out:
                raise InputError("%s: %r appears twice in the keyring; remove one of the two entries" % (path, k))
            out[k] = v
        return out
    return hook


def _too_deep(data):
    """Whether JSON bytes nest objects or arrays deeper than MAX_DEPTH (or
    leave brackets unbalanced), found in a few linear passes before json.loads
    could recurse on them."""
    text = re.sub(rb"\\.", b"", data, flags=re.S)     # escapes: every '"' left delimits a string
    text = re.sub(rb'"[^"]*"', b"", text)             # strings, which may hold brackets
    brackets = re.sub(rb"[^][{}]", b"", text)
    for _ in range(MAX_DEPTH):  # each pass removes the innermost level
        brackets = brackets.replace(b"{}", b"").replace(b"[]", b"")
    return bool(brackets)


def _key_bytes(path, what, hexkey):
    """A 32-byte key given as hex in the keyring, else an InputError naming ``what``."""
    try:
        key = bytes.fromhex(hexkey)
    except (ValueError, TypeError):
        raise InputError("%s: %s is not hex" % (path, what))
    if len(key) != KEY_BYTES:
        raise InputError("%s: %s is not %d bytes" % (path, what, KEY_BYTES))
    return key


def load(path, missing_ok=False):
    """Read and validate a keyring; ``missing_ok`` gives an empty one for a new file.

    ``path`` may be a symlink; what it names must be a regular file, never
    "-" (stdin): keys do not go through pipes.
    """
    refuse(path, "a keyring", SECRETS)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        if missing_ok:
            return Keyring(path, {})
        raise InputError("%s: keyring does not exist (create it with `edgesynth keys new` or `keys fleet`)" % path)
    except OSError as e:
        raise InputError("%s: cannot read keyring (%s)" % (path, e.strerror or e))
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        mode, identity = st.st_mode, file_identity(st)
        if not stat.S_ISREG(mode):
            raise InputError("%s: keyring is not a regular file" % path)
        data = fh.read(MAX_KEYRING + 1)
    check_kind(path, "keyring", data)  # a config, frames...: say which, before any complaint about its mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise InputError("%s: keyring is accessible by other users (mode %03o); run chmod 600 %s"
                         % (path, mode & 0o777, path))
    if len(data) > MAX_KEYRING:
        raise InputError("%s: keyring is larger than %d bytes" % (path, MAX_KEYRING))
    if _too_deep(data):
        raise InputError("%s: keyring is not valid JSON or nests deeper than %d levels" % (path, MAX_DEPTH))
    try:
        doc = json.loads(data.decode("utf-8"), object_pairs_hook=_no_duplicates(path))
    except (UnicodeDecodeError, ValueError):
        raise InputError("%s: keyring is not valid JSON" % path)
    if (not isinstance(doc, dict) or type(doc.get("format")) is not int
            or doc["format"] not in (FORMAT, FLEET_FORMAT) or not isinstance(doc.get("keys"), dict)):
        raise InputError("%s: not an edgesynth keyring (format %d or %d)" % (path, FORMAT, FLEET_FORMAT))
    keys = {}
    for dev, hexkey in doc["keys"].items():
        keys[_listed_id(path, dev)] = _key_bytes(path, "key of device %r" % dev, hexkey)
    if doc["format"] == FORMAT:  # a format 1 file cannot carry the fleet fields: an older edgesynth ignores them
        extra = sorted(set(doc) & {"master", "revoked"})
        if extra:
            raise InputError("%s: a format %d keyring cannot hold %s (format %d can)"
                             % (path, FORMAT, " or ".join(map(repr, extra)), FLEET_FORMAT))
        return Keyring(path, keys, identity=identity)
    master = _key_bytes(path, "the fleet master", doc["master"]) if "master" in doc else None
    revoked = doc.get("revoked", [])
    if not isinstance(revoked, list) or not all(isinstance(d, str) for d in revoked):
        raise InputError("%s: 'revoked' must be a list of device ids" % path)
    if len(set(revoked)) != len(revoked):
        raise InputError("%s: a device is listed twice in 'revoked'; remove one of the two entries" % path)
    return Keyring(path, keys, master, [_listed_id(path, d) for d in revoked], identity)


def file_identity(st):
    """(st_dev, st_ino, st_mtime_ns, st_ctime_ns, st_size) of an os.stat_result:
    changes when the keyring is replaced (a rename gives a new inode and
    ctime) or written in place. A freed inode reused within one timestamp tick
    for a file of the same size would look unchanged: the reason a revocation
    should be checked (`keys list`) rather than assumed on coarse-clocked
    filesystems."""
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size


def _listed_id(path, device_id):
    try:
        return check_device_id(device_id)
    except InputError as e:
        raise InputError("%s: bad device id in the keyring: %s" % (path, e))


def _rewrite(path, change):
    """Replace the keyring at ``path`` by ``change(ring)`` (a Keyring, or an
    InputError), under an advisory lock on ``path + ".lock"`` that serialises
    concurrent writers. Refuses a symlink ``path``: the atomic rename would
    replace the link and leave its target with the old keys. Returns the new
    Keyring."""
    refuse(path, "a keyring", SECRETS)
    path = os.fspath(path)  # str or os.PathLike
    if os.path.islink(path):
        raise InputError("%s: keyring is a symbolic link (to %s); give the keyring's own path"
                         % (path, os.readlink(path)))
    try:
        lock = os.open(path + ".lock", os.O_WRONLY | os.O_CREAT, 0o600)
    except OSError as e:
        raise InputError("%s: cannot create the keyring lock (%s)" % (path, e.strerror or e))
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ring = change(load(path, missing_ok=True))
        doc = {"format": FORMAT, "keys": {d: k.hex() for d, k in sorted(ring._keys.items())}}
        if ring._master is not None or ring._revoked:
            doc["format"] = FLEET_FORMAT
            if ring._master is not None:
                doc["master"] = ring._master.hex()
            doc["revoked"] = ring.revoked()
        data = (json.dumps(doc, indent=1) + "\n").encode("utf-8")
        if len(data) > MAX_KEYRING:  # load() would refuse it, and then no command could undo the change
            raise InputError("%s: the keyring would be %d bytes, above the %d-byte limit; nothing changed "
                             "(revoke fewer devices, or drop explicit keys a fleet master can derive)"
                             % (path, len(data), MAX_KEYRING))
        with atomic_output(path, "wb", perms=0o600) as fh:
            fh.write(data)
        return ring
    finally:
        os.close(lock)


def new_key(path, device_id, force=False):
    """Create a fresh explicit key for ``device_id`` in the keyring at ``path``.

    Refuses to replace the device's existing key (explicit, or derived from
    the fleet master) unless ``force``: frames tagged with the old key would no
    longer verify. Rewrites the whole file, so it suits a few explicit keys;
    a fleet uses ``new_fleet_key`` and derived keys. Returns the Keyring after
    the change.
    """
    check_device_id(device_id)

    def change(ring):
        if not force and device_id in ring:
            raise InputError("%s: device %r already has a key; pass --force to replace it "
                             "(its old frames will no longer verify)" % (ring.path, device_id))
        if not force and ring.has_master:
            raise InputError("%s: device %r already has a key derived from the fleet master; pass --force to "
                             "give it an explicit key instead (its old frames will no longer verify)"
                             % (ring.path, device_id))
        return Keyring(ring.path, {**ring._keys, device_id: secrets.token_bytes(KEY_BYTES)},
                       ring._master, ring._revoked)
    return _rewrite(path, change)


def new_fleet_key(path, force=False):
    """Create a fleet master key (32 bytes from ``secrets``) in the keyring at
    ``path`` (created if missing). Every device without an explicit key then
    has a key derived from it (module docstring). Refuses to replace an
    existing master unless ``force``: every derived device key would change,
    and those devices' old frames stop verifying. Returns the Keyring."""
    def change(ring):
        if ring.has_master and not force:
            raise InputError("%s: the keyring already has a fleet master; pass --force to replace it (every "
                             "derived device key changes: re-export and re-flash those devices)" % ring.path)
        return Keyring(ring.path, ring._keys, secrets.token_bytes(KEY_BYTES), ring._revoked)
    return _rewrite(path, change)


def revoke_keys(path, devices):
    """Add ``devices`` (device ids) to the keyring's revocation list: from
    then key_for raises Refused for them, so ingest and the gateway refuse their
    new frames with a reason saying "revoked". Frames already stored stay in
    the store. Revoking a revoked device again is no change. Returns the Keyring."""
    ids = [check_device_id(d) for d in devices]
    return _rewrite(path, lambda ring: Keyring(ring.path, ring._keys, ring._master, ring._revoked.union(ids)))


def unrevoke_keys(path, devices):
    """Remove ``devices`` from the keyring's revocation list (their keys,
    explicit or derived, are the same as before the revocation). Returns the Keyring."""
    ids = [check_device_id(d) for d in devices]
    return _rewrite(path, lambda ring: Keyring(ring.path, ring._keys, ring._master, ring._revoked.difference(ids)))


def read_device_ids(path):
    """Yield the device ids of a file (``"-"``: stdin), one per line; blank
    lines are skipped, and a line that is not a device id is an InputError
    with its line number. Lines are read with a bound, so memory stays small
    whatever the input."""
    fh = stdin_bytes() if is_stdio(path) else _open_ids(path)
    name = STDIN if is_stdio(path) else path
    try:
        for i, line in enumerate(iter(lambda: fh.readline(128), b""), 1):
            if len(line) == 128 and not line.endswith(b"\n"):
                raise InputError("%s: line %d is longer than a device id (64 characters)" % (name, i))
            text = line.strip()
            if not text:
                continue
            try:
                yield check_device_id(text.decode("ascii"))
            except (InputError, UnicodeDecodeError) as e:
                raise InputError("%s: line %d: %s" % (name, i, e if isinstance(e, InputError) else
                                                       "device id may hold only A-Z a-z 0-9 . _ - :"))
    finally:
        if not is_stdio(path):
            fh.close()


def _open_ids(path):
    try:
        return open(path, "rb")
    except OSError as e:
        raise InputError("%s: cannot read the device ids (%s)" % (path, e.strerror or e))


def export_keys(ring, devices, directory, force=False, progress=None):
    """Write each device's key for flashing as ``directory/<device id>.key``:
    the 32 raw key bytes, mode 0600.

    ring: a Keyring or a keyring path; devices: an iterable of device ids
    (each once; repeats are written once); directory: created with mode 0700
    when missing (its parent must exist). Every id is checked first (valid,
    not revoked, has a key), and nothing is written if one fails or, without
    ``force``, if a key file of one of them exists already (a symlink
    included). Files are created with O_CREAT|O_EXCL|O_NOFOLLOW in the
    directory's fd, so no pre-planted name is followed; with ``force`` an
    existing one is replaced by rename (the entry itself, never a link's
    target). No file is fsynced, the directory once at the end: the keys are
    derived deterministically, so after a crash the export is simply run
    again with ``force``. A file whose write fails is removed (never left
    short under its final name) and the InputError says how many were
    written before it and how to resume. ``progress(done, total)`` is called
    every 4096 files and at the end. Returns the number of files written.
    """
    if not isinstance(ring, Keyring):
        ring = load(ring)
    ids = {}
    for dev in devices:
        if dev in ids:
            continue
        if not isinstance(dev, str):  # device_id_bytes also takes an envelope's bytes; a file name needs str
            raise InputError("device ids must be strings, got %s" % type(dev).__name__)
        try:
            ids[dev] = device_id_bytes(dev)
        except ConfigError as e:
            raise InputError(str(e))
        if dev in ring._revoked or (ring._prk is None and dev not in ring._keys):
            ring.require(dev)  # the InputError saying why it has no key
    if not ids:
        raise InputError("no device ids to export")
    dfd = _key_dir(directory)
    try:
        names = [dev + KEY_SUFFIX for dev in ids]
        present = set(os.listdir(dfd)).intersection(names)
        if present and not force:
            raise InputError("%s: %d of the key files exist already (e.g. %s); pass --force to replace them"
                             % (directory, len(present), min(present)))
        total, done = len(ids), 0
        try:
            for (dev, b), name in zip(ids.items(), names):
                key = ring._keys.get(dev) or _derive(ring._prk, b)
                _write_key(dfd, directory, name, key, name in present)
                done += 1
                if progress is not None and (done % PROGRESS_EVERY == 0 or done == total):
                    progress(done, total)
            os.fsync(dfd)
        except (OSError, InputError) as e:
            why = "cannot write the key files (%s)" % (e.strerror or e) if isinstance(e, OSError) else e
            if done:
                raise InputError("%s: %s; the %d key file(s) before it were written (run the export again with "
                                 "--force to replace them, or remove them)" % (directory, why, done))
            raise InputError("%s: %s" % (directory, why))
        return done
    finally:
        os.close(dfd)


_CREATE = os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC


def _write_key(dfd, directory, name, key, replace):
    """Write one key file in the directory ``dfd``: created exclusively, or
    (``replace``) written under a temporary name and renamed over the old entry."""
    target = name + "~" if replace else name  # "~" is no device id character: never another device's file
    if replace:
        try:
            os.unlink(target, dir_fd=dfd)  # left by an interrupted export
        except FileNotFoundError:
            pass
    try:
        fd = os.open(target, _CREATE, 0o600, dir_fd=dfd)
    except FileExistsError:
        raise InputError("%s exists already (created meanwhile); pass --force to replace it" % name)
    except OSError as e:
        raise InputError("cannot create %s (%s)" % (name, e.strerror or e))
    try:
        try:
            if os.write(fd, key) != len(key):
                raise InputError("short write of %s" % name)
        finally:
            os.close(fd)
    except (OSError, InputError) as e:
        os.unlink(target, dir_fd=dfd)  # a key cut short must not stay under a name that is flashed
        raise e if isinstance(e, InputError) else InputError("cannot write %s (%s)" % (name, e.strerror or e))
    if replace:
        os.replace(target, name, src_dir_fd=dfd, dst_dir_fd=dfd)


def _key_dir(directory):
    """An fd of the export directory, created with mode 0700 if missing."""
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        raise InputError("%s: cannot create the key directory (%s)" % (directory, e.strerror or e))
    try:
        return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise InputError("%s: cannot open the key directory (%s)" % (directory, e.strerror or e))


def write_credentials(ring, device_id, path):
    """Write the credentials file of ``device_id`` for its board: JSON
    ``{"id": ..., "key": "<64 hex digits>"}``, mode 0600, replaced atomically.
    The key is the device's explicit or derived one (Keyring.key_for). The
    device's main loop reads it (``device.credentials`` in its config) to
    tag frames and authenticate its state record (docs/trust.md §6).
    Never to stdout ("-" is refused)."""
    refuse(path, "a credentials file", SECRETS)
    key = ring.require(check_device_id(device_id))
    with atomic_output(path, "w", perms=0o600, encoding="utf-8") as fh:
        fh.write(json.dumps({"id": device_id, "key": key.hex()}) + "\n")
