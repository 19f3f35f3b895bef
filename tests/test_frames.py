"""Frames: canonical bytes, determinism, tags, and typed rejection of bad bytes."""
import hashlib
import hmac
import struct

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import agent
from host_tools.errors import (BadEnvelope, BadPayload, BadTag, FrameError, SchemaError,
                               TruncatedFrame)
from host_tools.frames import iter_frames, parse_frame, split_envelope
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
