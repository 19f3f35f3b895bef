"""Release phase of the PrivHP device state: its msgpack map, keys sorted.

Loaded only when the agent releases (see firmware_shims/memory.py).
"""
from ..hashing import P
from ..msgpack_out import key

_K = {}


def prepare():
    """Build the key table ahead of the first release."""
    _keys()


def _keys():
    if not _K:
        for name in ("budget", "clamp", "clamp_p", "hash", "hash_p", "hi", "j", "k", "kind",
                     "lo", "names", "q", "r", "sigma", "sketch", "sketches", "tree", "w"):
            _K[name] = key(name)
    return _K


def encode(m, enc):
    """Write this state as one msgpack map (keys in sorted order)."""
    K = _keys()
    enc.map(18)
    enc.raw(K["budget"])
    num, den = m.budget()
    enc.array(2)
    enc.uint(num)
    enc.uint(den)
    enc.raw(K["clamp"])
    if m.clamp_p:
        enc.int(m.clamp)
    else:
        enc.nil()
    enc.raw(K["clamp_p"])
    enc.uint(m.clamp_p)
    enc.raw(K["hash"])
    enc.packed((m.hash,), "<H", 2)
    enc.raw(K["hash_p"])
    enc.uint(P)
    enc.raw(K["hi"])
    enc.bounds(m.hi, m.lo, m.hi)
    enc.raw(K["j"])
    enc.uint(m.j)
    enc.raw(K["k"])
    enc.uint(m.k)
    enc.raw(K["kind"])
    enc.str(b"privhp")
    enc.raw(K["lo"])
    enc.bounds(m.lo, m.lo, m.hi)
    enc.raw(K["names"])
    enc.array(m.d)
    for nb in m.name_bytes:
        enc.str(nb)
    enc.raw(K["q"])
    enc.uint(m.q)
    enc.raw(K["r"])
    enc.uint(m.r)
    enc.raw(K["sigma"])
    enc.array(len(m.sigma))
    for s in m.sigma:
        enc.uint(s)
    enc.raw(K["sketch"])
    enc.str(b"cms" if m.sketch == "cms" else b"cs")
    enc.raw(K["sketches"])
    enc.packed(m.sketch_rows, "<i", 4)
    enc.raw(K["tree"])
    enc.packed(m.tree_rows, "<i", 4)
    enc.raw(K["w"])
    enc.uint(m.w)
