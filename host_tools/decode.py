"""Bounded msgpack decoding: what hostile bytes may cost before they are decoded.

``scan_msgpack`` walks the encoded bytes once, without decoding, and refuses
a nesting, object count or worst-case decoded size beyond the caller's limits;
only then does msgpack decode. Frames (edgesynth.frames) and generator files
(edgesynth.genfile) both go through it.
"""
from edgesynth.errors import BadPayload

_SCALAR, _STR, _BIN, _ARRAY, _MAP, _BAD = range(6)  # byte classes of the scan table


# Decoded Python objects may take at most 4 bytes per encoded byte plus this
# (scan_msgpack's worst-case CPython sizes: an empty array is 1 byte but a
# 56-byte list and an 8-byte slot; a float64 is 9 bytes and 32 decoded).
DECODE_SLACK = 64 << 20


def _scan_table():
    t = [(_SCALAR, 1, 0)] * 0x80                                     # positive fixint: cached ints
    t += [(_MAP, 0, b & 0x0F) for b in range(0x80, 0x90)]
    t += [(_ARRAY, 0, b & 0x0F) for b in range(0x90, 0xA0)]
    t += [(_STR, 0, b & 0x1F) for b in range(0xA0, 0xC0)]
    t += [(_SCALAR, 1, 0), (_BAD, 0, 0), (_SCALAR, 1, 0), (_SCALAR, 1, 0)]  # nil, (never used), false, true
    t += [(_BIN, 1, 0), (_BIN, 2, 0), (_BIN, 4, 0)]
    t += [(_BAD, 0, 0)] * 3                                          # ext 8/16/32
    t += [(_SCALAR, 5, 24), (_SCALAR, 9, 24)]                        # float32/64 -> float
    t += [(_SCALAR, n, 36) for n in (2, 3, 5, 9, 2, 3, 5, 9)]        # uint8..64, int8..64 -> int
    t += [(_BAD, 0, 0)] * 5                                          # fixext 1..16
    t += [(_STR, 1, 0), (_STR, 2, 0), (_STR, 4, 0)]
    t += [(_ARRAY, 2, 0), (_ARRAY, 4, 0), (_MAP, 2, 0), (_MAP, 4, 0)]
    t += [(_SCALAR, 1, 36)] * 0x20                                   # negative fixint
    return tuple(t)


_SCAN = _scan_table()


def scan_msgpack(data, max_nesting, max_objects, max_cost):
    """Walk the msgpack object in ``data`` without building it; BadPayload
    unless it is one complete object with at most ``max_nesting`` nested
    containers, at most ``max_objects`` objects, no ext type, and at most
    ``max_cost`` bytes of worst-case CPython objects once decoded. Returns
    that worst-case size in bytes.

    Iterative, and its stack holds one int per open container, so time is
    O(objects) and memory O(max_nesting) whatever the input. Costs in bytes
    (64-bit CPython, tracemalloc, msgpack with object_pairs_hook): list 56 +
    8 per item, map 72 + 176 per pair (pairs list, tuples, dict), str 80 + 4
    per byte (UCS-4 worst case), bin 40 + 1 per byte, float 24, int 36;
    positive fixint, nil and bools are shared objects (0).
    """
    n = len(data)
    pos = cost = 0
    claimed = 1
    rem = 1      # items still to read in the innermost open container (the root slot first)
    outer = []   # the same for every enclosing container
    table = _SCAN
    while True:
        if not rem:
            if not outer:
                break
            rem = outer.pop()
            continue
        if pos >= n:
            _refuse(cost, max_cost, "the msgpack data ends inside an object at byte %d" % n)
        kind, size, extra = table[data[pos]]
        rem -= 1
        if kind == _SCALAR:
            # most items: skipped with no check; the cost they add is checked
            # before any other refusal and after every string or container,
            # so the first limit passed is still the one named
            pos += size
            cost += extra
            continue
        if kind == _BAD:
            _refuse(cost, max_cost, "ext types and byte 0xc1 are not allowed (byte %d)" % pos)
        count = int.from_bytes(data[pos + 1:pos + 1 + size], "big") if size else extra
        pos += 1 + size
        if kind == _STR:
            pos += count
            cost += 80 + 4 * count
        elif kind == _BIN:
            pos += count
            cost += 40 + count
        else:
            if len(outer) >= max_nesting:
                _refuse(cost, max_cost, "the msgpack data nests containers more than %d deep" % max_nesting)
            items = count if kind == _ARRAY else 2 * count
            claimed += items
            if claimed > max_objects:
                _refuse(cost, max_cost, "the msgpack data holds more than %d objects" % max_objects)
            if items > n - pos:
                _refuse(cost, max_cost, "a container claims %d items but %d bytes remain" % (items, n - pos))
            cost += 56 + 8 * count if kind == _ARRAY else 72 + 176 * count
            outer.append(rem)
            rem = items
        if cost > max_cost:
            _refuse(cost, max_cost)
    if pos > n:
        _refuse(cost, max_cost, "the msgpack data ends inside an object at byte %d" % n)
    if pos < n:
        _refuse(cost, max_cost, "trailing bytes after the msgpack object")
    _refuse(cost, max_cost)
    return cost


def _refuse(cost, max_cost, why=None):
    """BadPayload: the decoded size's if ``cost`` passed ``max_cost`` (it was
    the first limit passed), else ``why`` (if given)."""
    if cost > max_cost:
        raise BadPayload("the msgpack data would decode to more than %d bytes of objects" % max_cost)
    if why:
        raise BadPayload(why)


def decode_budget(nbytes):
    """Most bytes of Python objects that ``nbytes`` of msgpack may decode to."""
    return 4 * nbytes + DECODE_SLACK
