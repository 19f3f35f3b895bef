"""`edgesynth inspect`: say what a file is and summarise it without trusting it."""
import json

from edgesynth.errors import FrameError, InputError
from edgesynth.frames import MAGIC, iter_file_frames, read_into
from edgesynth.mechanisms import load_generator

MAX_INSPECT = 512 << 20  # bytes of a generator or config; frame files are streamed, any size


def describe(path, key=None):
    """JSON-ready description of a frame file, generator file or device config."""
    try:
        with open(path, "rb") as fh:
            head = fh.peek(6)[:6]
            if head[:2] == b"\x94\xa4" and head[2:6] == MAGIC:
                return _frames(path, fh, key)
            data = bytearray()
            read_into(fh, data, MAX_INSPECT + 1)
    except OSError as e:
        raise InputError("%s: cannot read (%s)" % (path, e.strerror or e))
    if not data:
        raise InputError("%s: file is empty" % path)
    if len(data) > MAX_INSPECT:
        raise InputError("%s: larger than %d bytes" % (path, MAX_INSPECT))
    if data.lstrip()[:1] == b"{":
        return _config(path, data)
    try:
        gen = load_generator(data, path)
    except InputError:
        raise InputError("%s: not a frame file, generator or device config" % path)
    return {"file": path, "type": "generator", **gen.summary()}


def _frames(path, fh, key):
    """Summaries of every frame of ``fh``, streamed: one frame in memory at a time."""
    out = []
    key_for = (lambda device: key) if key else None
    try:
        for i, rel in enumerate(iter_file_frames(fh, key_for=key_for)):
            mechs = []
            for m in rel.mechs:
                if hasattr(m, "describe"):  # cdf, profile
                    mechs.append(m.describe())
                    continue
                mechs.append({"kind": m.kind, "channels": m.names, "lo": m.lo.tolist(), "hi": m.hi.tolist(),
                              "r": m.r, "k": m.k, "L": m.L, "w": m.w, "j": m.j, "sketch": m.sketch,
                              "epsilon": "%d/%d" % m.budget, "noisy_root": int(m.tree[0]),
                              "noisy_clamped": m.clamp, "config_id": m.config_id()})
            out.append({"index": i, "device": rel.device, "epoch": rel.epoch, "seq": rel.seq,
                        "epsilon": "%d/%d" % rel.eps, "relation": rel.relation, "bytes": len(rel.raw),
                        "tagged": rel.tagged, "tag_verified": rel.verified, "sha256": rel.digest,
                        "mechanisms": mechs})
    except FrameError as e:
        raise type(e)("%s: frame %d: %s" % (path, len(out), e))
    return {"file": path, "type": "frames", "count": len(out), "frames": out}


def _config(path, data):
    try:
        cfg = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise InputError("%s: looks like JSON but does not parse (%s)" % (path, e))
    if not isinstance(cfg, dict) or "mechanisms" not in cfg:
        raise InputError("%s: JSON but not an edgesynth device config" % path)
    return {"file": path, "type": "device-config", **cfg}
