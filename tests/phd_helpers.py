"""Shared helpers of the PHDStream tests (tests/test_phdstream_*.py)."""
from edgesynth.agent.msgpack_out import Encoder


def encoded(m):
    """The payload entry ``m.encode`` writes, as bytes (its length is the encoder's count)."""
    chunks = []
    enc = Encoder()
    enc.reset(lambda buf, n: chunks.append(bytes(buf[:n])))
    m.encode(enc)
    data = b"".join(chunks)
    assert len(data) == enc.n
    return data


def agent_frames(a, windows):
    """One continual agent ``a`` over ``windows`` (lists of readings): its frame per window."""
    frames = []
    for i, ev in enumerate(windows):
        if i:
            a.next_window()
        for x in ev:
            a.update(x)
        frames.append(a.release())
    return frames
