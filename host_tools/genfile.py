"""Generator files on disk: the bounded decode every kind's loader starts with.

A generator file is one msgpack map with "kind" and "fmt"; each mechanism's
generator class (edgesynth.mechanisms.<name>.generator) reads its own kind
through ``read_file_map`` and the registry picks the class by kind.
"""
import msgpack

from edgesynth.decode import decode_budget, scan_msgpack
from edgesynth.errors import InputError

MAX_FILE = 256 << 20  # bytes of one generator file


# The deepest generator file nests 4 containers (a profile's stats.naive.tails);
# two more levels leave room for provenance.
MAX_NESTING = 6


def unpack(data, source):
    """The decoded file, or None when it is not a map; its nesting and decoded
    size (at most decode_budget of its bytes) are bounded before decoding."""
    try:
        scan_msgpack(data, MAX_NESTING, len(data), decode_budget(len(data)))
        m = msgpack.unpackb(data, raw=False, max_bin_len=MAX_FILE, max_str_len=1 << 16,
                            max_array_len=1 << 24, max_map_len=1024, max_ext_len=0, strict_map_key=False)
    except Exception as e:
        raise InputError("%s is not a generator file (%s)" % (source, str(e) or type(e).__name__))
    return m if isinstance(m, dict) else None


def read_file_map(data, source, kind, fmt, what):
    """The top map of a generator file of ``kind`` and format ``fmt``;
    InputError naming ``source`` (and ``what`` was expected) otherwise."""
    m = unpack(data, source)
    if m is None or m.get("kind") != kind or m.get("fmt") != fmt:
        raise InputError("%s is not an edgesynth %s" % (source, what))
    return m
