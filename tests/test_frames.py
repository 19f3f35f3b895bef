"""Frames: canonical bytes, determinism, tags, and typed rejection of bad bytes."""
import hashlib
import hmac
import struct

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgesynth import agent
from edgesynth.errors import BadEnvelope, BadPayload, BadTag, FrameError, SchemaError, TruncatedFrame
from edgesynth.frames import iter_frames, parse_frame, split_envelope
from tests.helpers import release

KEY = b"k" * 32


@pytest.fixture(scope="module")
def frame():
    from tests.conftest import privhp_config
    data = np.random.default_rng(0).random((300, 2))
    return release(privhp_config(d=2, r=8, k=8, w=16, j=2), data, device_id="dev-1")


def envelope(payload_bytes, device=b"dev-1", key=None):
    """Wrap payload bytes the way the device does (tests build hostile payloads)."""
    head = b"\x94\xa4ESF1" + bytes([0xA0 | len(device)]) + device + b"\xc6" + struct.pack(">I", len(payload_bytes))
    body = head + payload_bytes
    if key is None:
        return body + b"\xc0"
    return body + b"\xc4\x20" + hmac.new(key, body, hashlib.sha256).digest()


def payload_of(frame_bytes):
    _, a, b, _, _ = split_envelope(frame_bytes)
    return msgpack.unpackb(frame_bytes[a:b])


def test_payload_is_canonical_msgpack(frame):
    _, a, b, _, _ = split_envelope(frame)
    p = msgpack.unpackb(frame[a:b])
    assert msgpack.packb(p) == frame[a:b]            # smallest formats, same key order
    assert list(p) == sorted(p) and list(p["mechs"][0]) == sorted(p["mechs"][0])


def test_same_seed_same_stream_same_bytes(make_config):
    cfg = make_config(d=2, r=10, k=16, w=32, j=2)
    data = np.random.default_rng(1).random((500, 2))
    assert release(cfg, data, b"seed-a-000000000") == release(cfg, data, b"seed-a-000000000")
    assert release(cfg, data, b"seed-a-000000000") != release(cfg, data, b"seed-b-000000000")


def test_release_twice_is_identical_and_sealed(make_config):
    a = agent.Agent(make_config(), seed=b"seal-seed-000000")
    a.update((0.5, 0.5))
    f1, f2 = a.release(), a.release()
    assert f1 == f2
    with pytest.raises(agent.SealedError):
        a.update((0.1, 0.1))


def test_streamed_release_equals_returned_bytes(make_config):
    a = agent.Agent(make_config(), seed=b"stream-seed-0000", key=KEY)
    for i in range(100):
        a.update((i / 100, (i * 7 % 100) / 100))
    out = bytearray()
    n = a.release(lambda buf, m: out.extend(bytes(buf[:m])))
    assert n == len(out) and bytes(out) == a.release()


def test_tag_verifies_and_tampering_is_caught(make_config):
    a = agent.Agent(make_config(), seed=b"tag-seed-0000000", device_id="dev-1", key=KEY)
    f = a.release()
    rel, end = parse_frame(f, key_for=lambda d: KEY)
    assert rel.verified and end == len(f)
    with pytest.raises(BadTag):
        parse_frame(f, key_for=lambda d: b"x" * 32)
    for pos in (10, len(f) // 2, len(f) - 40):
        bad = bytearray(f)
        bad[pos] ^= 1
        with pytest.raises(FrameError):
            parse_frame(bytes(bad), key_for=lambda d: KEY)
    untagged = agent.Agent(make_config(), seed=b"tag-seed-0000000", device_id="dev-1").release()
    with pytest.raises(BadTag):
        parse_frame(untagged, key_for=lambda d: KEY)
    with pytest.raises(BadTag):
        parse_frame(untagged, require_tag=True)


def test_every_truncation_is_rejected(frame):
    for n in range(0, len(frame), max(1, len(frame) // 300)):
        with pytest.raises(TruncatedFrame):
            parse_frame(frame[:n])


def test_frames_back_to_back_and_trailing_garbage(frame):
    assert len(list(iter_frames(frame + frame))) == 2
    with pytest.raises(FrameError):
        list(iter_frames(frame + b"\x00"))


def test_envelope_faults(frame):
    with pytest.raises(BadEnvelope):
        parse_frame(b"\x94\xa4ESF2" + frame[6:])
    huge = frame[:split_envelope(frame)[1] - 5] + b"\xc6\xff\xff\xff\xff"
    with pytest.raises(BadEnvelope, match="limit"):
        parse_frame(huge)
    with pytest.raises(BadEnvelope):
        parse_frame(envelope(b"\x80", device=b""))


def mutate(frame, fn):
    p = payload_of(frame)
    fn(p)
    return envelope(msgpack.packb(p))


@pytest.mark.parametrize("name,fn", [
    ("missing key", lambda p: p.pop("seq")),
    ("extra key", lambda p: p.update(extra=1)),
    ("bool epoch", lambda p: p.update(epoch=True)),
    ("huge seq", lambda p: p.update(seq=2 ** 40)),
    ("float eps", lambda p: p.update(eps=[1.0, 1])),
    ("format", lambda p: p.update(fmt=2)),
    ("device mismatch", lambda p: p.update(device="other")),
    ("relation", lambda p: p.update(relation="whatever")),
    ("unknown kind", lambda p: p["mechs"][0].update(kind="nope")),
    ("short tree", lambda p: p["mechs"][0].update(tree=p["mechs"][0]["tree"][:-4])),
    ("long sketches", lambda p: p["mechs"][0].update(sketches=p["mechs"][0]["sketches"] + b"\0" * 4)),
    ("absurd r", lambda p: p["mechs"][0].update(r=60)),
    ("absurd w", lambda p: p["mechs"][0].update(w=2 ** 31)),
    ("w not pow2", lambda p: p["mechs"][0].update(w=12)),
    ("nan bound", lambda p: p["mechs"][0].update(lo=[float("nan"), 0.0])),
    ("inverted bounds", lambda p: p["mechs"][0].update(lo=[2.0, 0.0])),
    ("budget lie", lambda p: p["mechs"][0].update(budget=[1, 1])),
    ("eps lie", lambda p: p.update(eps=[2, 1])),
    ("hash param", lambda p: p["mechs"][0].update(hash=b"\xff\xff" * (len(p["mechs"][0]["hash"]) // 2))),
    ("sigma zero", lambda p: p["mechs"][0]["sigma"].__setitem__(0, 0)),
    ("clamp type", lambda p: p["mechs"][0].update(clamp="3")),
    ("names", lambda p: p["mechs"][0].update(names=["a"])),
])
def test_schema_violations_are_typed(frame, name, fn):
    with pytest.raises(SchemaError):
        parse_frame(mutate(frame, fn))


def test_hostile_msgpack_is_typed(frame):
    dup = b"\x82\xa3fmt\x01\xa3fmt\x01"
    deep = b"\x91" * 100000 + b"\xc0"
    cases = {
        "duplicate keys": (dup, SchemaError),
        "deep nesting": (deep, BadPayload),
        "ext type": (b"\xd4\x05\x00", BadPayload),
        "array claims 4G": (b"\xdd\xff\xff\xff\xff", BadPayload),
        "bin claims 4G": (b"\xc6\xff\xff\xff\xff", BadPayload),
        "not a map": (b"\x93\x01\x02\x03", SchemaError),
        "trailing": (msgpack.packb({"a": 1}) + b"\x00", BadPayload),
        "int keys": (b"\x81\x01\x02", BadPayload),
        "garbage": (b"\xc1", BadPayload),
    }
    for name, (payload, err) in cases.items():
        with pytest.raises(err):
            parse_frame(envelope(payload))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_mutated_frames_only_raise_frame_errors(frame, data):
    buf = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 8))):
        op = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        pos = data.draw(st.integers(0, max(0, len(buf) - 1)))
        if op == "flip" and buf:
            buf[pos] ^= data.draw(st.integers(1, 255))
        elif op == "cut":
            del buf[pos:pos + data.draw(st.integers(1, 64))]
        else:
            buf[pos:pos] = data.draw(st.binary(min_size=1, max_size=16))
    try:
        list(iter_frames(bytes(buf)))
    except FrameError:
        pass


# ------------------------------------------------------------ hostile corpus, with caps
TIME_CAP = 2.0            # seconds per rejection; real figures are well under 10 ms
MEM_CAP = 16 << 20        # bytes of peak Python allocation per rejection, beyond the input


def _nest(depth, leaf=0):
    return b"\x91" * depth + msgpack.packb(leaf)


def _field(frame, path, raw_value):
    """The frame's payload with the field at ``path`` replaced by raw msgpack
    bytes (so values msgpack.packb cannot express, e.g. deep nesting, fit in)."""
    marker = "\u2603MARK\u2603"
    p = payload_of(frame)
    target = p
    for k in path[:-1]:
        target = target[k]
    target[path[-1]] = marker
    packed = msgpack.packb(p)
    m = msgpack.packb(marker)
    assert packed.count(m) == 1
    return packed.replace(m, raw_value)


def hostile_corpus(frame):
    """(name, frame bytes, expected FrameError subclass) of hostile frames
    beyond the parametrised cases above; every one is a complete envelope."""
    mech = ("mechs", 0)
    P = msgpack.packb
    tree_len = len(payload_of(frame)["mechs"][0]["tree"])
    cases = [
        # claims of huge sizes inside the payload (decoded without allocating them)
        ("map32 claims 4G entries", envelope(b"\xdf\xff\xff\xff\xff"), BadPayload),
        ("str32 claims 4G bytes", envelope(b"\xdb\xff\xff\xff\xff"), BadPayload),
        ("ext32 claims 4G bytes", envelope(b"\xc9\xff\xff\xff\xff\x05"), BadPayload),
        ("tree bin32 claims 4G", envelope(_field(frame, mech + ("tree",), b"\xc6\xff\xff\xff\xff")), BadPayload),
        ("sigma array32 claims 4G", envelope(_field(frame, mech + ("sigma",), b"\xdd\xff\xff\xff\xff")),
         BadPayload),
        # nesting where a scalar belongs: refused by the structure scan before decoding
        ("epoch nested 1000 deep", envelope(_field(frame, ("epoch",), _nest(1000))), BadPayload),
        ("lo nested 1000 deep", envelope(_field(frame, mech + ("lo",), _nest(1000, 0.5))), BadPayload),
        ("epoch nested 2 deep", envelope(_field(frame, ("epoch",), _nest(2))), SchemaError),
        ("names nested 2000 deep", envelope(_field(frame, mech + ("names",), _nest(2000))), BadPayload),
        # duplicate keys inside the mechanism map
        ("duplicate mechanism key", envelope(msgpack.packb(payload_of(frame)).replace(
            b"\xa1j\x01", b"\xa1j\x01", 1).replace(b"\xde\x00\x12", b"\xde\x00\x13", 1)
            .replace(b"\xa1k", b"\xa1j\x02\xa1k", 1)), SchemaError),
        # wrong types: bool, NaN, infinities, huge and negative ints, timestamps
        ("NaN epoch", envelope(_field(frame, ("epoch",), P(float("nan")))), SchemaError),
        ("inf seq", envelope(_field(frame, ("seq",), P(float("inf")))), SchemaError),
        ("uint64 max seq", envelope(_field(frame, ("seq",), P(2 ** 64 - 1))), SchemaError),
        ("int64 min epoch", envelope(_field(frame, ("epoch",), P(-2 ** 63))), SchemaError),
        ("bool in eps", envelope(_field(frame, ("eps",), P([True, 1]))), SchemaError),
        ("bool r", envelope(_field(frame, mech + ("r",), P(True))), SchemaError),
        ("uint64 max k", envelope(_field(frame, mech + ("k",), P(2 ** 64 - 1))), SchemaError),
        ("negative j", envelope(_field(frame, mech + ("j",), P(-1))), SchemaError),
        ("NaN hi", envelope(_field(frame, mech + ("hi",), P([float("nan"), 1.0]))), SchemaError),
        ("inf lo", envelope(_field(frame, mech + ("lo",), P([float("-inf"), 0.0]))), SchemaError),
        ("bool clamp", envelope(_field(frame, mech + ("clamp",), P(True))), SchemaError),
        ("huge clamp", envelope(_field(frame, mech + ("clamp",), P(2 ** 63))), SchemaError),
        ("str tree", envelope(_field(frame, mech + ("tree",), P("x" * tree_len))), SchemaError),
        ("invalid UTF-8 name", envelope(_field(frame, mech + ("names",), b"\x92\xa2\xff\xfe\xa1b")), BadPayload),
        # ext types anywhere, including the timestamp ext msgpack decodes natively
        ("ext in mechanism", envelope(_field(frame, mech + ("clamp",), b"\xd4\x05\x00")), BadPayload),
        ("timestamp epoch", envelope(_field(frame, ("epoch",), b"\xd6\xff\x00\x00\x00\x01")), BadPayload),
        ("timestamp96 out of range", envelope(_field(frame, ("seq",), b"\xc7\x0c\xff" + b"\xff" * 12)),
         BadPayload),
        # counter blocks that disagree with the declared parameters
        ("hash and counter blocks for another k", envelope(_field(frame, mech + ("k",), P(4))), SchemaError),
        ("hash and counter blocks for another j", envelope(_field(frame, mech + ("j",), P(3))), SchemaError),
        ("sketch block for another w", envelope(_field(frame, mech + ("w",), P(32))), SchemaError),
        ("sigma one level short", envelope(_field(frame, mech + ("sigma",),
                                                  P(payload_of(frame)["mechs"][0]["sigma"][:-1]))), SchemaError),
        ("hash block one row short", envelope(_field(frame, mech + ("hash",),
                                                     P(payload_of(frame)["mechs"][0]["hash"][:-8]))), SchemaError),
        # parameters that would make the host allocate absurd arrays
        ("tree of 2**30 counters", envelope(_reshaped(frame, r=29, k=2 ** 29)), SchemaError),
        ("29 sketch levels of 16 x 4096", envelope(_reshaped(frame, r=29, k=1, j=16, w=4096)), SchemaError),
        ("eps 1/(2**64-1)", envelope(_field(frame, ("eps",), P([1, 2 ** 64 - 1]))), SchemaError),
        ("1024 mechanisms", envelope(_field(frame, ("mechs",), b"\xdc\x04\x00" + b"\xc0" * 1024)), SchemaError),
        ("9 mechanisms", envelope(_field(frame, ("mechs",), b"\x99" + b"\xc0" * 9)), SchemaError),
        # trailing bytes: inside the envelope, after a frame, and a partial second frame
        ("bytes after the payload map", envelope(msgpack.packb(payload_of(frame)) + b"\xc0"), BadPayload),
        ("frame then a partial frame", frame + frame[:40], TruncatedFrame),
        ("frame then garbage", frame + b"\xff" * 7, BadEnvelope),
        ("tag of wrong length", frame[:-1] + b"\xc4\x10" + b"\x00" * 32, BadEnvelope),
    ]
    return cases


def _reshaped(frame, **params):
    """Payload declaring other shape parameters (consistent budget and sigma)
    while keeping the original, far smaller, counter blocks."""
    p = payload_of(frame)
    m = p["mechs"][0]
    m.update(params)
    m.update(sigma=[1] * (m["r"] + 1), budget=[m["r"] + 1 + m["clamp_p"], m["q"]])
    return msgpack.packb(p)


def test_hostile_corpus_is_rejected_typed_within_time_and_memory(frame):
    import time
    import tracemalloc
    for name, buf, err in hostile_corpus(frame):
        tracemalloc.start()
        t0 = time.perf_counter()
        try:
            with pytest.raises(err):
                list(iter_frames(buf))
        except BaseException as e:
            raise AssertionError("%s: %r" % (name, e)) from e
        finally:
            elapsed = time.perf_counter() - t0
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        assert elapsed < TIME_CAP, (name, elapsed)
        assert peak < MEM_CAP + 4 * len(buf), (name, peak)


def test_hostile_corpus_within_an_address_space_limit(frame, tmp_path):
    """The same corpus in a child process whose address space is capped at
    256 MiB above what it uses at start: an allocation sized from a hostile
    header would die there with MemoryError instead of passing."""
    import pickle
    import subprocess
    import sys
    corpus = tmp_path / "corpus.pkl"
    corpus.write_bytes(pickle.dumps([(n, b, e.__name__) for n, b, e in hostile_corpus(frame)]))
    code = r'''
import pickle, resource, sys
import edgesynth.errors as E
from edgesynth.frames import iter_frames
vm = [int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmSize")][0]
resource.setrlimit(resource.RLIMIT_AS, (vm + (256 << 20), vm + (256 << 20)))
bad = []
for name, buf, err in pickle.loads(open(sys.argv[1], "rb").read()):
    try:
        list(iter_frames(buf))
        bad.append((name, "accepted"))
    except getattr(E, err):
        pass
    except BaseException as e:
        bad.append((name, repr(e)))
print(bad)
'''
    import os
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=str(tmp_path.parent) + os.pathsep + os.getcwd())
    r = subprocess.run([sys.executable, "-c", code, str(corpus)], capture_output=True, text=True, timeout=120,
                       env=env, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr


_msgpack_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2 ** 63, 2 ** 64 - 1) | st.floats() | st.text(max_size=8)
    | st.binary(max_size=64),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids, max_size=4),
    max_leaves=12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_tagged_payload_fields_only_raise_frame_errors(frame, data):
    """Structure-aware: replace fields of a valid payload by arbitrary msgpack
    values and tag the result, so every case passes the tag check and reaches
    the decoder and schema; anything but a FrameError or a valid Release is a bug."""
    p = payload_of(frame)
    mech = p["mechs"][0]
    for _ in range(data.draw(st.integers(1, 3))):
        target = p if data.draw(st.sampled_from(["top", "mech"])) == "top" else mech
        field = data.draw(st.sampled_from(sorted(target)))
        target[field] = data.draw(_msgpack_values)
    buf = envelope(msgpack.packb(p), key=KEY)
    try:
        rel, end = parse_frame(buf, key_for=lambda d: KEY)
    except FrameError:
        return
    assert rel.verified and end == len(buf)
