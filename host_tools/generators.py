"""Generator files of every kind: load by kind, assemble by mechanism.

``edgesynth sample`` and ``inspect`` load any generator through
``load_generator``; ``edgesynth assemble`` builds one through ``assemble``.
Each kind lives in its own module (PrivHP: generator.py; CDF:
cdf_generator.py; profile: profile_result.py).
"""
import msgpack

from host_tools.errors import InputError, MergeError
from host_tools.frames import decode_budget, scan_msgpack

MECHANISMS = ("privhp", "cdf", "profile")
MAX_FILE = 256 << 20  # bytes of one generator file
# The deepest generator file nests 4 containers (a profile's stats.naive.tails);
# two more levels leave room for provenance.
MAX_NESTING = 6


def _unpack(data, source):
    """The decoded file, or None when it is not a map; its nesting and decoded
    size (at most frames.decode_budget of its bytes) are bounded before decoding."""
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
    m = _unpack(data, source)
    if m is None or m.get("kind") != kind or m.get("fmt") != fmt:
        raise InputError("%s is not an edgesynth %s" % (source, what))
    return m


def _classes():
    from host_tools.cdf_generator import KIND as CDF_KIND, CDFGenerator
    from host_tools.generator import KIND as HP_KIND, Generator
    from host_tools.profile_result import KIND as PR_KIND, ProfileResult
    return {HP_KIND: Generator, CDF_KIND: CDFGenerator, PR_KIND: ProfileResult}


def load_generator(data, source="generator"):
    """The generator object saved in ``data``, whatever its kind."""
    m = _unpack(data, source)
    kind = m.get("kind") if m is not None else None
    del m  # from_bytes decodes the file again: never hold two decoded copies
    cls = _classes().get(kind)
    if cls is None:
        raise InputError("%s is not an edgesynth generator (assemble writes one)" % source)
    return cls.from_bytes(data, source)


def kinds_in(releases):
    return sorted({m.kind for rel in releases for m in rel.mechs})


def assemble(releases, mechanism=None, force_sum=False):
    """Build the generator of ``mechanism`` (default: the only kind present)."""
    kinds = kinds_in(releases)
    if mechanism is None:
        if len(kinds) != 1:
            raise MergeError("the releases carry several mechanisms (%s); choose one with --mechanism"
                             % ", ".join(kinds))
        mechanism = kinds[0]
    if mechanism not in kinds:
        raise MergeError("no %s state in the given releases (they carry %s)" % (mechanism, ", ".join(kinds)))
    if mechanism == "cdf":
        from host_tools.cdf_generator import assemble_cdf
        return assemble_cdf(releases)
    if mechanism == "profile":
        from host_tools.profile_result import assemble_profile
        return assemble_profile(releases, force=force_sum)
    from host_tools.assemble import assemble_privhp
    return assemble_privhp(releases)
