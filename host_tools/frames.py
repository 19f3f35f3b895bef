"""Reading release frames on the host: envelope, tag check, bounded decode, schema.

Order matters: the envelope is parsed by hand with fixed, tiny rules; the HMAC
tag is checked over the exact bytes before any msgpack parsing; the payload's
msgpack structure is walked without building anything (scan_msgpack: nesting,
object count and memory bounded before decoding), then decoded with explicit
size limits and duplicate keys refused; then every field is checked against
the schema of docs/wire-format.md. Any failure raises a FrameError subclass
naming the fault. Files are streamed frame by frame (iter_file_frames).
"""
import hashlib
import hmac
import struct

import msgpack

from edgesynth.agent.errors import ConfigError
from edgesynth.agent.marginals.build import MAX_SIZE as MARGINALS_MAX_SIZE
from edgesynth.agent.privhp.build import MAX_COUNTERS
from edgesynth.agent.wire import FORMAT, MAGIC, MAX_DEVICE_ID, MAX_MECHANISMS, PAYLOAD_KEYS, RELATIONS, device_id_bytes
from edgesynth.decode import decode_budget, scan_msgpack
from edgesynth.errors import BadEnvelope, BadPayload, BadTag, FrameError, InputError, SchemaError, TruncatedFrame
from edgesynth.mechanisms import REGISTRY
from edgesynth.stdio import is_stdio, label, open_input

MAX_PAYLOAD = 4 * MAX_COUNTERS + (1 << 20)  # bytes: the largest state a config allows, plus room
# The deepest legal path is payload.mechs[i].schema.columns[j].values (a
# marginals state's public schema): 7 nested containers.
MAX_NESTING = 7
MAX_ARRAY = MARGINALS_MAX_SIZE  # items of one array: a marginals schema column's values (at most MAX_SIZE - 1)
# Objects of the largest legal payload: the top map (keys, values, eps's two
# numbers) and MAX_MECHANISMS of the largest mechanism map. A payload claiming more
# is refused before msgpack builds any of them.
MAX_OBJECTS = 1 + 2 * len(PAYLOAD_KEYS) + 2 + MAX_MECHANISMS * max(
    m.wire.MAX_OBJECTS for m in REGISTRY.values())
READ_CHUNK = 1 << 20  # bytes read from a file at a time


class Release:
    """One decoded, validated release frame.

    ``device`` str, ``epoch``/``seq`` ints, ``eps`` (num, den), ``relation``
    str, ``mechs`` list of mechanism objects, ``raw`` the exact frame bytes,
    ``payload`` a view of the payload inside ``raw`` (not a second copy),
    ``tagged``/``verified`` whether it carried a tag and whether it was checked.
    """

    def __init__(self, payload, raw, payload_span, tagged, verified):
        self.device = payload["device"]
        self.epoch = payload["epoch"]
        self.seq = payload["seq"]
        self.eps = tuple(payload["eps"])
        self.relation = payload["relation"]
        self.mechs = payload["mechs"]
        self.raw = raw
        self._span = payload_span
        self.tagged = tagged
        self.verified = verified

    @property
    def payload(self):
        return memoryview(self.raw)[self._span[0]:self._span[1]]

    @property
    def digest(self):
        """SHA-256 of the whole frame (envelope, payload and tag)."""
        return hashlib.sha256(self.raw).hexdigest()

    @property
    def payload_digest(self):
        """SHA-256 of the payload alone: equal for a resend whether tagged or not."""
        return hashlib.sha256(self.payload).hexdigest()


def _need(buf, pos, n):
    short = pos + n - len(buf)
    if short > 0:
        e = TruncatedFrame("frame truncated at byte %d (needs %d more bytes)" % (pos, short))
        e.missing = short  # what a streaming reader must read before trying again
        raise e


def split_envelope(buf, pos=0):
    """Parse one envelope at ``buf[pos:]`` without msgpack.

    Returns (device_id, payload_start, payload_end, tag or None, end).
    """
    _need(buf, pos, 6)
    if buf[pos] != 0x94 or buf[pos + 1] != 0xA4 or bytes(buf[pos + 2:pos + 6]) != MAGIC:
        raise BadEnvelope("not an edgesynth frame at byte %d (bad magic)" % pos)
    p = pos + 6
    _need(buf, p, 1)
    t = buf[p]
    if 0xA1 <= t <= 0xBF:
        n, p = t & 0x1F, p + 1
    elif t == 0xD9:
        _need(buf, p, 2)
        n, p = buf[p + 1], p + 2
    else:
        raise BadEnvelope("device id must be a short string (byte %d)" % p)
    if n == 0 or n > MAX_DEVICE_ID:
        raise BadEnvelope("device id length %d is outside 1..%d" % (n, MAX_DEVICE_ID))
    _need(buf, p, n)
    try:
        device = device_id_bytes(bytes(buf[p:p + n])).decode()
    except ConfigError as e:
        raise BadEnvelope(str(e))
    p += n
    _need(buf, p, 5)
    if buf[p] != 0xC6:
        raise BadEnvelope("payload must be a bin32 block (byte %d)" % p)
    size = struct.unpack_from(">I", buf, p + 1)[0]
    if size > MAX_PAYLOAD:
        raise BadEnvelope("payload claims %d bytes, above the %d-byte limit" % (size, MAX_PAYLOAD))
    p += 5
    _need(buf, p, size)
    start, end = p, p + size
    p = end
    _need(buf, p, 1)
    if buf[p] == 0xC0:
        return device, start, end, None, p + 1
    if buf[p] == 0xC4:
        _need(buf, p, 34)
        if buf[p + 1] != 32:
            raise BadEnvelope("tag must be 32 bytes")
        return device, start, end, bytes(buf[p + 2:p + 34]), p + 34
    raise BadEnvelope("tag must be nil or bin8(32) (byte %d)" % p)


def _no_dup_map(pairs):
    out = dict(pairs)   # at C speed; keys are str or bytes (strict_map_key), so hashable
    if len(out) == len(pairs) and set(map(type, out)) <= {str}:
        return out
    out = {}            # a duplicate or a non-str key: find the first, for its message
    for k, v in pairs:
        if not isinstance(k, str):
            raise SchemaError("map keys must be strings")
        if k in out:
            raise SchemaError("duplicate key %r" % k)
        out[k] = v
    return out


def _reject_ext(code, data):
    raise BadPayload("ext types are not allowed (ext %d)" % code)


def decode_payload(data):
    """msgpack-decode a payload (bytes-like) once scan_msgpack has bounded its
    nesting, object count and decoded size by the largest legal frame's."""
    scan_msgpack(data, MAX_NESTING, MAX_OBJECTS, decode_budget(len(data)))
    try:
        return msgpack.unpackb(
            data, raw=False, strict_map_key=True, use_list=True,
            max_str_len=1024, max_bin_len=MAX_PAYLOAD, max_array_len=MAX_ARRAY,
            max_map_len=64, max_ext_len=0, ext_hook=_reject_ext,
            object_pairs_hook=_no_dup_map)
    except FrameError:
        raise
    except msgpack.ExtraData:
        raise BadPayload("trailing bytes after the payload map")
    except Exception as e:  # msgpack raises many types on hostile input
        raise BadPayload("payload is not valid msgpack: %s" % (str(e) or type(e).__name__))


def _check_top(p):
    if not isinstance(p, dict):
        raise SchemaError("payload must be a map")
    keys = sorted(p)
    if keys != list(PAYLOAD_KEYS):
        raise SchemaError("payload keys %s differ from %s" % (keys, list(PAYLOAD_KEYS)))
    if p["fmt"] != FORMAT or isinstance(p["fmt"], bool):
        raise SchemaError("unsupported format version %r" % (p["fmt"],))
    for name in ("epoch", "seq"):
        v = p[name]
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 1 << 32:
            raise SchemaError("%s must be an integer in [0, 2**32)" % name)
    e = p["eps"]
    if not (isinstance(e, list) and len(e) == 2 and all(isinstance(x, int) and not isinstance(x, bool)
                                                         and 1 <= x < 1 << 64 for x in e)):
        raise SchemaError("eps must be [numerator, denominator] of positive integers")
    if not isinstance(p["relation"], str) or p["relation"] not in RELATIONS:
        raise SchemaError("relation must be one of %s" % (tuple(sorted(RELATIONS)),))
    if not isinstance(p["device"], str):
        raise SchemaError("device must be a string")
    mechs = p["mechs"]
    if not isinstance(mechs, list) or not 1 <= len(mechs) <= MAX_MECHANISMS:
        raise SchemaError("mechs must list 1..%d mechanism states" % MAX_MECHANISMS)


def parse_frame(buf, pos=0, key_for=None, require_tag=False):
    """Decode and validate the frame at ``buf[pos:]``.

    ``key_for(device_id)`` returns the device's HMAC key or None, or raises
    edgesynth.errors.Refused (passed on) for a device refused for good (revoked).
    A frame whose device has a key must carry a valid tag; ``require_tag``
    rejects untagged frames outright. Returns (Release, end offset).
    """
    device, start, end, tag, stop = split_envelope(buf, pos)
    key = key_for(device) if key_for else None
    verified = False
    if key is not None:
        if tag is None:
            raise BadTag("frame from %r is not tagged but the device has a key" % device)
        with memoryview(buf) as view:  # no copy of a payload of up to MAX_PAYLOAD bytes
            want = hmac.new(key, view[pos:end], hashlib.sha256).digest()
        if not hmac.compare_digest(want, tag):
            raise BadTag("tag of the frame from %r does not verify" % device)
        verified = True
    elif require_tag:
        raise BadTag("no key known for device %r; cannot verify its frame" % device)
    with memoryview(buf) as view:
        payload = decode_payload(view[start:end])
    _check_top(payload)
    if payload["device"] != device:
        raise SchemaError("payload device %r differs from the envelope's %r" % (payload["device"], device))
    factor = 2 if payload["relation"] == "replace" else 1
    mechs = []
    for i, m in enumerate(payload["mechs"]):
        if not isinstance(m, dict) or not isinstance(m.get("kind"), str) or m["kind"] not in REGISTRY:
            raise SchemaError("mechs[%d] has an unknown kind" % i)
        mechs.append(REGISTRY[m["kind"]].State.from_payload(m, factor))
    e = payload["eps"]
    for state in mechs:
        if hasattr(state, "bind_budget"):  # a continual mechanism (phdstream): its frame's eps says its budget
            if len(mechs) != 1:
                raise SchemaError("a %s state must be the only mechanism of its frame" % state.kind)
            state.bind_budget(e)
    num, den = 0, 1
    for state in mechs:
        n, dd = state.budget
        num, den = num * dd + n * den, den * dd
    if num * e[1] != e[0] * den:
        raise SchemaError("mechanism budgets add up to %d/%d, not eps %d/%d" % (num, den, e[0], e[1]))
    payload["mechs"] = mechs
    with memoryview(buf) as view:
        raw = bytes(view[pos:stop])
    return Release(payload, raw, (start - pos, end - pos), tag is not None, verified), stop


def iter_frames(buf, key_for=None, require_tag=False):
    """Yield every Release in a byte string of frames written back to back."""
    pos = 0
    while pos < len(buf):
        rel, pos = parse_frame(buf, pos, key_for, require_tag)
        yield rel


def iter_file_frames(fh, key_for=None, require_tag=False):
    """Yield every Release of binary file ``fh``, streamed to its end.

    Holds one frame (at most MAX_PAYLOAD plus its envelope) and READ_CHUNK
    bytes of read-ahead at a time, whatever the file's size; a frame cut off
    by the end of the file raises TruncatedFrame, never a silent stop.
    """
    buf = bytearray()
    while True:
        if not buf and not read_into(fh, buf, READ_CHUNK):
            return
        try:
            rel, stop = parse_frame(buf, 0, key_for, require_tag)
        except TruncatedFrame as e:
            if not read_into(fh, buf, max(e.missing, READ_CHUNK)):
                raise
            continue
        yield rel
        del buf[:stop]  # O(1): CPython drops a bytearray's head in place


def read_into(fh, buf, n):
    """Append up to ``n`` more bytes of ``fh`` to bytearray ``buf``,
    READ_CHUNK at a time: a length claim or limit costs only the bytes really
    there (``fh.read(n)`` would allocate n at once). False at the end of the file."""
    start = len(buf)
    while len(buf) - start < n:
        chunk = fh.read(min(READ_CHUNK, n - (len(buf) - start)))
        if not chunk:
            break
        buf += chunk
    return len(buf) > start


def read_frames(path, key_for=None, require_tag=False):
    """All releases in a file of any size, or stdin for "-", as a list (see stream_frames)."""
    return list(stream_frames(path, key_for, require_tag))


def stream_frames(path, key_for=None, require_tag=False):
    """Yield every release of a file of any size, or of stdin for "-", one
    at a time (iter_file_frames); FrameError messages name the file and frame
    index, and a file without frames is one."""
    n = 0
    where = label(path)
    try:
        with open_input(path, "frames") as fh:
            for rel in iter_file_frames(fh, key_for, require_tag):
                n += 1
                yield rel
    except InputError as e:
        raise FrameError(str(e))
    except OSError as e:
        raise FrameError("%s: cannot read (%s)" % (where, e.strerror or e))
    except FrameError as e:
        raise type(e)("%s: frame %d: %s" % (where, n, e))
    if not n:
        raise FrameError("%s: %s" % (where, "no frames" if is_stdio(path) else "file is empty"))
