"""`edgesynth inspect`: say what a file is and summarise it without trusting it."""
import json
from fractions import Fraction

from edgesynth.errors import FrameError, InputError
from edgesynth.filekind import FRAME_HEAD
from edgesynth.filekind import check as check_kind
from edgesynth.frames import iter_file_frames, read_into
from edgesynth.mechanisms import load_generator
from edgesynth.stdio import label, open_input

MAX_INSPECT = 512 << 20  # bytes of a generator or config; frame files are streamed, any size
DESCRIBED = ("frames", "generator", "config")
EPSILON_KEYS = ("epsilon", "mechanism_epsilon")


def plain_epsilon(obj):
    """``obj`` with every epsilon (the keys EPSILON_KEYS, at any depth) as a
    plain number: frames, configs and generators write it as an exact
    fraction ("1048576/1048576", [1, 3], "1/3"). A float when it is exact,
    else the float and the exact reduced fraction under "<key>_exact"
    ("1/3"); a value that is no fraction is left as it is."""
    if isinstance(obj, list):
        return [plain_epsilon(v) for v in obj]
    if not isinstance(obj, dict):
        return obj
    out = {}
    for k, v in obj.items():
        frac = _fraction(v) if k in EPSILON_KEYS else None
        if frac is None:
            out[k] = plain_epsilon(v)
            continue
        out[k] = float(frac)
        if Fraction(out[k]) != frac:
            out[k + "_exact"] = str(frac)
    return out


def _fraction(v):
    """The Fraction of "a/b", "a" or [a, b] (ints, b > 0), else None."""
    try:
        if isinstance(v, str):
            return Fraction(v)
        if isinstance(v, (list, tuple)) and len(v) == 2 and all(type(x) is int for x in v) and v[1] > 0:
            return Fraction(v[0], v[1])
    except (ValueError, ZeroDivisionError):
        pass
    return None


def describe(path, key=None):
    """JSON-ready description of a frame file, generator file or device
    config at ``path`` ("-": stdin)."""
    name = label(path)
    try:
        with open_input(path, "a frame file, generator or device config") as fh:
            if fh.peek(len(FRAME_HEAD)).startswith(FRAME_HEAD):
                return _frames(name, fh, key)
            data = bytearray()
            read_into(fh, data, MAX_INSPECT + 1)
    except OSError as e:
        raise InputError("%s: cannot read (%s)" % (name, e.strerror or e))
    check_kind(path, DESCRIBED, data)  # a keyring, store or table: say what it is and what takes it
    if not data:
        raise InputError("%s: file is empty" % name)
    if len(data) > MAX_INSPECT:
        raise InputError("%s: larger than %d bytes" % (name, MAX_INSPECT))
    if data.lstrip()[:1] == b"{":
        return plain_epsilon(_config(name, data))
    try:
        gen = load_generator(data, name)
    except InputError:
        raise InputError("%s: not a frame file, generator or device config" % name)
    return plain_epsilon({"file": name, "type": "generator", **gen.summary()})


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
                if m.kind == "marginals":  # the frame carries its public schema
                    mechs.append({"kind": m.kind, "columns": m.names, "sizes": m.sizes,
                                  "marginals": [[m.names[i] for i in c] for c in m.cols],
                                  "partitioned": int(sum(m.grouped)), "group_totals": sum(len(t) for t in m.totals),
                                  "epsilon": "%d/%d" % m.budget, "config_id": m.config_id()})
                    continue
                mechs.append({"kind": m.kind, "channels": m.names, "lo": m.lo.tolist(), "hi": m.hi.tolist(),
                              "integer": [n for n, f in zip(m.names, m.integer) if f],
                              "r": m.r, "k": m.k, "L": m.L, "w": m.w, "j": m.j, "sketch": m.sketch,
                              "epsilon": "%d/%d" % m.budget, "noisy_root": int(m.tree[0]),
                              "noisy_clamped": m.clamp, "config_id": m.config_id()})
            out.append({"index": i, "device": rel.device, "epoch": rel.epoch, "seq": rel.seq,
                        "epsilon": "%d/%d" % rel.eps, "relation": rel.relation, "bytes": len(rel.raw),
                        "tagged": rel.tagged, "tag_verified": rel.verified, "sha256": rel.digest,
                        "mechanisms": mechs})
    except FrameError as e:
        raise type(e)("%s: frame %d: %s" % (path, len(out), e))
    return plain_epsilon({"file": path, "type": "frames", "count": len(out), "frames": out})


def _config(path, data):
    try:
        cfg = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise InputError("%s: looks like JSON but does not parse (%s)" % (path, e))
    if not isinstance(cfg, dict) or "mechanisms" not in cfg:
        raise InputError("%s: JSON but not an edgesynth device config" % path)
    return {"file": path, "type": "device-config", **cfg}
