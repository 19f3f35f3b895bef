"""Device keys: a keyring file mapping device ids to HMAC-SHA256 keys.

The keyring is JSON, ``{"format": 1, "keys": {"<device id>": "<64 hex digits>"}}``,
created with mode 0600 and only ever replaced atomically (edgesynth.outputs:
temporary file in the same directory, fsync, rename), so a crash leaves the old
or the new keyring, never a torn one. Keys are never printed. A keyring that
others can read or write is refused, as ssh refuses such a private key: whoever
reads a key can forge that device's frames.

The keyring path must name a regular file (or nothing yet, for ``keys new``):
a FIFO, device or directory is refused without blocking on it. Reading follows
a symlink; ``keys new`` refuses one, since replacing a symlink by rename would
leave its target holding the old keys. The JSON is bounded before parsing
(size, nesting depth) and a device listed twice is refused, not resolved by
keeping one of the two keys.

One key per device (docs/trust.md): a leaked key lets someone forge that
device's frames and nothing else. Keys come from ``secrets.token_bytes``.
"""
import fcntl
import json
import os
import re
import secrets
import stat

from edgesynth.agent.errors import ConfigError
from edgesynth.agent.wire import device_id_bytes
from edgesynth.errors import InputError
from edgesynth.filekind import check as check_kind
from edgesynth.outputs import atomic_output
from edgesynth.stdio import refuse

FORMAT = 1
KEY_BYTES = 32          # HMAC-SHA256 key length (the hash's output size)
MAX_KEYRING = 16 << 20  # bytes: refuse to parse anything larger
MAX_DEPTH = 4           # JSON nesting of a keyring: {"keys": {...}} is 2 deep
SECRETS = "keys never go through stdin or stdout; give the file's path"


def check_device_id(device_id):
    """``device_id`` if it is a valid device id (agent.wire.device_id_bytes:
    1..64 characters of A-Z a-z 0-9 . _ - :), else an InputError."""
    try:
        device_id_bytes(device_id)
    except ConfigError as e:
        raise InputError(str(e))
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
        """The device's key, or None: the ``key_for`` of edgesynth.frames.parse_frame."""
        return self._keys.get(device_id)

    def require(self, device_id):
        """The device's key; an InputError naming the keyring when it has none."""
        key = self._keys.get(device_id)
        if key is None:
            raise InputError("%s: no key for device %r (run `edgesynth keys new %s --keyring %s`)"
                             % (self.path, device_id, device_id, self.path))
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
        raise InputError("%s: keyring does not exist (create it with `edgesynth keys new`)" % path)
    except OSError as e:
        raise InputError("%s: cannot read keyring (%s)" % (path, e.strerror or e))
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fh.fileno()).st_mode
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
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("keys"), dict):
        raise InputError("%s: not an edgesynth keyring (format %d)" % (path, FORMAT))
    keys = {}
    for dev, hexkey in doc["keys"].items():
        try:
            check_device_id(dev)
        except InputError as e:
            raise InputError("%s: bad device id in the keyring: %s" % (path, e))
        try:
            key = bytes.fromhex(hexkey)
        except (ValueError, TypeError):
            raise InputError("%s: key of device %r is not hex" % (path, dev))
        if len(key) != KEY_BYTES:
            raise InputError("%s: key of device %r is not %d bytes" % (path, dev, KEY_BYTES))
        keys[dev] = key
    return Keyring(path, keys)


def new_key(path, device_id, force=False):
    """Create a fresh key for ``device_id`` in the keyring at ``path``.

    Refuses to replace an existing key unless ``force``: frames tagged with the
    old key would no longer verify. Refuses a symlink ``path``: the atomic
    rename would replace the link and leave its target with the old keys.
    Concurrent writers are serialised with an advisory lock on
    ``path + ".lock"``. Returns the Keyring after the change.
    """
    refuse(path, "a keyring", SECRETS)
    path = os.fspath(path)  # str or os.PathLike
    check_device_id(device_id)
    if os.path.islink(path):
        raise InputError("%s: keyring is a symbolic link (to %s); give the keyring's own path"
                         % (path, os.readlink(path)))
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
        with atomic_output(path, "w", perms=0o600, encoding="utf-8") as fh:
            fh.write(json.dumps(doc, indent=1) + "\n")
        return Keyring(path, keys)
    finally:
        os.close(lock)


def write_credentials(ring, device_id, path):
    """Write the credentials file of ``device_id`` for its board: JSON
    ``{"id": ..., "key": "<64 hex digits>"}``, mode 0600, replaced atomically.
    The device's main loop reads it (``device.credentials`` in its config) to
    tag frames and authenticate its state record (docs/trust.md §6).
    Never to stdout ("-" is refused)."""
    refuse(path, "a credentials file", SECRETS)
    key = ring.require(check_device_id(device_id))
    with atomic_output(path, "w", perms=0o600, encoding="utf-8") as fh:
        fh.write(json.dumps({"id": device_id, "key": key.hex()}) + "\n")
