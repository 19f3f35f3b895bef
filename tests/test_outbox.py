"""The device outbox (agent/transport/outbox.py) under CPython: order, capacity,
durability across a reopen, torn files."""
import hashlib
import os

import pytest

from edgesynth.agent.transport.outbox import Outbox, OutboxFull


def _frame(i, n=100):
    return bytes((i * 7 + j) & 0xFF for j in range(n))


def test_put_free_and_reopen_keeps_order(tmp_path):
    box = Outbox(str(tmp_path / "ob"), max_frames=8, max_bytes=10000)
    slots = [box.put(10 + i, i, _frame(i)) for i in range(5)]
    box.free(slots[1])
    box.free(slots[3])
    again = Outbox(str(tmp_path / "ob"), max_frames=8, max_bytes=10000)
    held = again.slots()
    assert [(again.epoch(s), again.seq(s)) for s in held] == [(10, 0), (12, 2), (14, 4)]
    buf = bytearray(200)
    for s, i in zip(held, (0, 2, 4)):
        n = again.read_into(s, buf)
        assert bytes(buf[:n]) == _frame(i)
        assert bytes(again.digest(s)) == hashlib.sha256(_frame(i)).digest()
    assert again.count == 3 and again.bytes == 300
    # new frames queue after the old ones, even when a lower slot is free
    s5 = again.put(15, 5, _frame(5))
    assert again.slots()[-1] == s5
    assert [again.epoch(s) for s in Outbox(str(tmp_path / "ob"), 8, 10000).slots()] == [10, 12, 14, 15]


def test_same_frame_twice_is_kept_once(tmp_path):
    box = Outbox(str(tmp_path), max_frames=2, max_bytes=1000)
    a = box.put(1, 0, _frame(1))
    assert box.put(1, 0, bytearray(_frame(1))) == a
    assert box.count == 1


@pytest.mark.parametrize("frames, nbytes, sizes", [(2, 10000, (100, 100, 100)), (8, 250, (100, 100, 100))])
def test_full_outbox_refuses_and_overwrites_nothing(tmp_path, frames, nbytes, sizes):
    box = Outbox(str(tmp_path), max_frames=frames, max_bytes=nbytes)
    box.put(0, 0, _frame(0, sizes[0]))
    box.put(1, 0, _frame(1, sizes[1]))
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(OutboxFull, match="outbox full.*epoch 2 seq 0 was not stored"):
        box.put(2, 0, _frame(2, sizes[2]))
    assert sorted(os.listdir(tmp_path)) == before and box.count == 2
    box.free(box.slots()[0])
    box.put(2, 0, _frame(2, sizes[2]))
    assert [box.epoch(s) for s in box.slots()] == [1, 2]


def test_torn_and_damaged_files_are_dropped_complete_tmp_promoted(tmp_path):
    box = Outbox(str(tmp_path), max_frames=8, max_bytes=10000)
    for i in range(3):
        box.put(i, 0, _frame(i))
    names = sorted(os.listdir(tmp_path))
    # a rename a power cut undid: the complete record only in .tmp
    os.rename(tmp_path / names[0], tmp_path / (names[0] + ".tmp"))
    # a flipped bit in a frame
    data = bytearray((tmp_path / names[1]).read_bytes())
    data[-1] ^= 1
    (tmp_path / names[1]).write_bytes(bytes(data))
    # a torn write of a newer record
    (tmp_path / "000000009.f.tmp").write_bytes((tmp_path / names[2]).read_bytes()[:60])
    again = Outbox(str(tmp_path), max_frames=8, max_bytes=10000)
    assert [again.epoch(s) for s in again.slots()] == [0, 2]
    assert again.dropped == 2
    assert sorted(os.listdir(tmp_path)) == [names[0], names[2]]


def test_reopen_with_smaller_capacity_refuses(tmp_path):
    box = Outbox(str(tmp_path), max_frames=4, max_bytes=10000)
    for i in range(3):
        box.put(i, 0, _frame(i))
    with pytest.raises(OutboxFull, match="holds more than its capacity"):
        Outbox(str(tmp_path), max_frames=2, max_bytes=10000)
    assert len(os.listdir(tmp_path)) == 3


@pytest.mark.parametrize("v", [0, 1, 0xFFFF, 0x10000, (1 << 30) - 1, 1 << 30, (1 << 32) - 1])
def test_header_fields_are_little_endian_uint32(tmp_path, v):
    box = Outbox(str(tmp_path / "ob"), 2, 1000)
    box.put(v, (1 << 32) - 1 - v, b"x")
    raw = open(tmp_path / "ob" / "000000000.f", "rb").read()
    assert raw[4:12] == v.to_bytes(4, "little") + ((1 << 32) - 1 - v).to_bytes(4, "little")
    again = Outbox(str(tmp_path / "ob"), 2, 1000)
    assert (again.epoch(0), again.seq(0)) == (v, (1 << 32) - 1 - v)
    with pytest.raises(ValueError, match="2\\*\\*32"):
        box.put(1 << 32, 0, b"y")


def test_a_full_flash_is_outbox_full_and_leaves_nothing(tmp_path, monkeypatch):
    from edgesynth.agent.transport import outbox
    box = Outbox(str(tmp_path / "ob"), 4, 1000)

    def enospc(path, write):
        open(path + ".tmp", "wb").write(b"partial")
        raise OSError(28, "ENOSPC")
    monkeypatch.setattr(outbox.fs, "write_atomic", enospc)
    with pytest.raises(OutboxFull, match="flash full"):
        box.put(3, 4, b"frame")
    assert box.count == 0 and os.listdir(tmp_path / "ob") == []


def test_no_big_int_constants_or_wide_shifts_on_the_device():
    # MicroPython small ints end below 2**30: a larger literal or a shift of 17+ bits allocates a big int
    import ast

    import edgesynth.agent.transport.outbox as mod
    tree = ast.parse(open(mod.__file__).read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and type(node.value) is int:
            assert node.value < 1 << 30, node.lineno
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.LShift):
            assert isinstance(node.right, ast.Constant) and node.right.value <= 16, node.lineno
