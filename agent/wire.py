"""Frame constants the device writes and the host reads, defined once here.

The host (edgesynth.frames, the keyring, the store) imports these rather than
writing them again; the byte layout is docs/wire-format.md.
"""
from .errors import ConfigError

FORMAT = 1          # config "format" and payload "fmt"
MAGIC = b"ESF1"     # first element of every frame envelope
# The mechanisms a config may name, in their registry order; one package each
# in agent/ (and host_tools/mechanisms/ on the host).
MECHANISMS = ("privhp", "cdf", "profile", "phdstream", "marginals")
MAX_MECHANISMS = 8  # per config and per frame
RELATIONS = {"add-remove": 1, "replace": 2}  # neighbouring relation -> noise scale factor
PAYLOAD_KEYS = ("device", "epoch", "eps", "fmt", "mechs", "relation", "seq")  # canonical key order
MAX_DEVICE_ID = 64  # bytes of a device id


def device_id_bytes(v):
    """The device id ``v`` (str, or the envelope's bytes) checked and as bytes.

    The one rule for device ids, on the device and on the host (keys, frame
    envelopes): 1..64 characters of A-Z a-z 0-9 . _ - :. Ids are printed in
    ingest acks and logs, so a newline or other control character in one could
    forge a line; raises ConfigError otherwise.
    """
    b = v
    if isinstance(v, str):
        try:
            b = v.encode()
        except UnicodeError:
            b = b"\x00"  # unencodable (a lone surrogate): refused below
    if not isinstance(b, bytes):
        raise ConfigError("device id must be a string")
    if not 0 < len(b) <= MAX_DEVICE_ID:
        raise ConfigError("device id must be 1..%d characters, got %d" % (MAX_DEVICE_ID, len(b)))
    for c in b:
        if not (48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122 or c in (45, 46, 58, 95)):
            raise ConfigError("device id %r may hold only A-Z a-z 0-9 . _ - :" % (v,))
    return b
