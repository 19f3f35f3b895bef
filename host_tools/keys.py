"""Device keys: a keyring file mapping device ids to HMAC-SHA256 keys.

The keyring is JSON, ``{"format": 1, "keys": {"<device id>": "<64 hex digits>"}}``,
created with mode 0600 and only ever replaced atomically (write a temporary file
in the same directory, fsync, rename), so a crash leaves the old or the new
keyring, never a torn one. Keys are never printed. A keyring that others can
read or write is refused, as ssh refuses such a private key: whoever reads a
key can forge that device's frames.

One key per device (docs/trust.md): a leaked key lets someone forge that
device's frames and nothing else. Keys come from ``secrets.token_bytes``.
"""
import json
import os
import secrets
import stat

from host_tools.errors import InputError

FORMAT = 1
KEY_BYTES = 32          # HMAC-SHA256 key length (the hash's output size)
MAX_DEVICE_ID = 64      # bytes of UTF-8, as in the frame envelope
MAX_KEYRING = 16 << 20  # bytes: refuse to parse anything larger


def check_device_id(device_id):
    """The device id as the envelope carries it: 1..64 bytes of UTF-8."""
    n = len(device_id.encode("utf-8"))
    if not 0 < n <= MAX_DEVICE_ID:
        raise InputError("device id must be 1..%d bytes of UTF-8, got %d" % (MAX_DEVICE_ID, n))
    return device_id


class Keyring:
    """Device id -> key bytes, loaded from ``path`` (see module docstring)."""

    def __init__(self, path, keys):
        self.path = path
        self._keys = keys

    def __contains__(self, device_id):
        return device_id in self._keys

    def devices(self):
        """Sorted device ids (never the keys)."""
        return sorted(self._keys)

    def key_for(self, device_id):
        """The device's key, or None: the ``key_for`` of host_tools.frames.parse_frame."""
        return self._keys.get(device_id)

    def require(self, device_id):
        """The device's key; an InputError naming the keyring when it has none."""
        key = self._keys.get(device_id)
        if key is None:
            raise InputError("%s: no key for device %r (run `edgesynth keys new %s --keyring %s`)"
                             % (self.path, device_id, device_id, self.path))
        return key


def load(path, missing_ok=False):
    """Read and validate a keyring; ``missing_ok`` gives an empty one for a new file."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        if missing_ok:
            return Keyring(path, {})
        raise InputError("%s: keyring does not exist (create it with `edgesynth keys new`)" % path)
    except OSError as e:
        raise InputError("%s: cannot read keyring (%s)" % (path, e.strerror or e))
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fh.fileno()).st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise InputError("%s: keyring is accessible by other users (mode %03o); run chmod 600 %s"
                             % (path, mode & 0o777, path))
        data = fh.read(MAX_KEYRING + 1)
    if len(data) > MAX_KEYRING:
        raise InputError("%s: keyring is larger than %d bytes" % (path, MAX_KEYRING))
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise InputError("%s: keyring is not valid JSON" % path)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("keys"), dict):
        raise InputError("%s: not an edgesynth keyring (format %d)" % (path, FORMAT))
    keys = {}
    for dev, hexkey in doc["keys"].items():
        try:
            check_device_id(dev)
            key = bytes.fromhex(hexkey)
        except (InputError, ValueError, TypeError):
            raise InputError("%s: malformed entry for device %r" % (path, dev))
        if len(key) != KEY_BYTES:
            raise InputError("%s: key of device %r is not %d bytes" % (path, dev, KEY_BYTES))
        keys[dev] = key
    return Keyring(path, keys)


def _write_private(path, text):
    """Replace ``path`` atomically with ``text``, mode 0600 from the first byte."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, ".%s.%s.tmp" % (os.path.basename(path), secrets.token_hex(6)))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)  # make the rename itself durable
    finally:
        os.close(dfd)


def new_key(path, device_id, force=False):
    """Create a fresh key for ``device_id`` in the keyring at ``path``.

    Refuses to replace an existing key unless ``force``: frames tagged with the
    old key would no longer verify. Concurrent writers are serialised with an
    advisory lock on ``path + ".lock"``. Returns the Keyring after the change.
    """
    import fcntl
    check_device_id(device_id)
    try:
        lock = os.open(path + ".lock", os.O_WRONLY | os.O_CREAT, 0o600)
    except OSError as e:
        raise InputError("%s: cannot create the keyring lock (%s)" % (path, e.strerror or e))
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ring = load(path, missing_ok=True)
        if device_id in ring and not force:
            raise InputError("%s: device %r already has a key; pass --force to replace it "
                             "(its old frames will no longer verify)" % (path, device_id))
        keys = dict(ring._keys)
        keys[device_id] = secrets.token_bytes(KEY_BYTES)
        doc = {"format": FORMAT, "keys": {d: k.hex() for d, k in sorted(keys.items())}}
        try:
            _write_private(path, json.dumps(doc, indent=1) + "\n")
        except OSError as e:
            raise InputError("%s: cannot write keyring (%s)" % (path, e.strerror or e))
        return Keyring(path, keys)
    finally:
        os.close(lock)
