"""What kind of file a path holds, told from its first bytes, so that a
command given the wrong file names the kind it found and the command that
takes it ("device.json is a device config, not a generator; `edgesynth
simulate --config device.json` takes it") instead of a parser's complaint.

Only the readers' error paths call ``check``: a file of the right kind never
pays for sniffing, and a damaged file of the right kind (or of no known
kind) keeps its reader's own message.
"""
import json
import shlex

from edgesynth.agent.wire import MAGIC
from edgesynth.errors import InputError
from edgesynth.stdio import label

SNIFF_BYTES = 1 << 20  # JSON files (configs, keyrings) are parsed whole up to this size
FRAME_HEAD = b"\x94\xa4" + MAGIC  # a frame's envelope: fixarray(4), fixstr(4) "ESF1"
SQLITE_HEAD = b"SQLite format 3\x00"
STORE_MARK = b"ESst"  # an ingest store's SQLite application_id (header bytes 68..71)
PARQUET_HEAD = b"PAR1"

# kind: (what it is, which command takes it; {p} is the path, quoted for a shell)
KINDS = {
    "config": ("a device config", "`edgesynth simulate --config {p}` takes it"),
    "frames": ("a frame file", "`edgesynth assemble {p}` takes it"),
    "generator": ("a generator", "`edgesynth sample {p} -n N` takes it"),
    "keyring": ("a keyring", "`--keyring {p}` of simulate, assemble or ingest takes it"),
    "credentials": ("a device's credentials file", "it goes onto its board (edgesynth docs deployment)"),
    "store": ("an ingest store", "`edgesynth assemble --store {p}` takes it"),
    "parquet": ("a Parquet table", "`edgesynth simulate --input {p}` takes readings"),
    "table": ("a text table (CSV)", "`edgesynth simulate --input {p}` takes readings"),
}
WANTED = {"config": "a device config", "frames": "a frame file", "generator": "a generator",
          "keyring": "a keyring", "store": "an ingest store", "table": "a CSV table", "parquet": "a Parquet table"}


def sniff(data):
    """The kind of a file whose first bytes (up to SNIFF_BYTES, or all of
    it) are ``data``: a key of KINDS, or None when it is none of them."""
    data = bytes(data)
    if data.startswith(FRAME_HEAD):
        return "frames"
    if data.startswith(SQLITE_HEAD):
        return "store" if data[68:72] == STORE_MARK else None
    if data.startswith(PARQUET_HEAD):
        return "parquet"
    if _is_generator(data[:64]):
        return "generator"
    text = _text(data)
    if text is None or not text.strip():
        return None
    if text.lstrip().startswith("{"):
        return _json_kind(text)
    return "table"


def _is_generator(head):
    """A generator file is a msgpack map whose "kind" (its first or second
    key) is a string "edgesynth-...": 0x80-0x8f is a small map."""
    i = head.find(b"\xa4kind")
    return bool(head) and 0x80 <= head[0] <= 0x8f and 0 < i < 16 and head[i + 6:i + 16] == b"edgesynth-"


def _text(data):
    """``data`` as text when it is UTF-8 without NUL bytes (its end may cut a
    character), else None."""
    if b"\x00" in data:
        return None
    for cut in range(4):
        try:
            return data[:len(data) - cut].decode("utf-8-sig")
        except UnicodeDecodeError:
            continue
    return None


def _json_kind(text):
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):  # hostile nesting is its reader's to refuse
        return None
    if not isinstance(doc, dict):
        return None
    if isinstance(doc.get("mechanisms"), list):
        return "config"
    if isinstance(doc.get("keys"), dict):
        return "keyring"
    if set(doc) == {"id", "key"}:
        return "credentials"
    return None


def kind_of(path):
    """The kind of the file at ``path`` (see sniff); None when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            return sniff(fh.read(SNIFF_BYTES))
    except OSError:
        return None


def check(path, wanted, data=None):
    """Raise InputError when ``path`` holds a known kind other than
    ``wanted`` (a KINDS key or a tuple of them), naming what it is and the
    command that takes it; return otherwise. ``data``: the file's bytes when
    already read (always, for "-": stdin cannot be read again)."""
    wanted = (wanted,) if isinstance(wanted, str) else tuple(wanted)
    found = kind_of(path) if data is None else sniff(bytes(data[:SNIFF_BYTES]))
    if found is None or found in wanted:
        return
    what, taker = KINDS[found]
    names = [WANTED[w] for w in wanted]
    expected = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
    raise InputError("%s is %s, not %s; %s" % (label(path), what, expected, taker.format(p=shlex.quote(str(path)))))
