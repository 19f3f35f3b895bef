"""Release phase of the profile sketch: its msgpack map, keys sorted."""
from ..msgpack_out import key

_K = {}
NAMES = ("budget", "cap", "counts", "hi", "kind", "lo", "names", "p", "q", "sample")
SAMPLE = ("bits", "keys")


def prepare():
    if not _K:
        for name in NAMES + SAMPLE:
            _K[name] = key(name)


def encode(m, enc):
    """Write the state as one msgpack map (docs/mechanisms/profile.md, "Wire map")."""
    prepare()
    K = _K
    enc.map(len(NAMES))
    enc.raw(K["budget"])
    enc.array(2)
    enc.uint(m.p)
    enc.uint(m.q)
    enc.raw(K["cap"])
    enc.uint(m.cap)
    enc.raw(K["counts"])
    enc.packed((m.ctr,), "<i", 4)
    enc.raw(K["hi"])
    enc.uint(m.hi)
    enc.raw(K["kind"])
    enc.str(b"profile")
    enc.raw(K["lo"])
    enc.uint(m.lo)
    enc.raw(K["names"])
    enc.array(1)
    enc.str(m.name_bytes[0])
    enc.raw(K["p"])
    enc.uint(m.p)
    enc.raw(K["q"])
    enc.uint(m.q)
    enc.raw(K["sample"])
    if m.bits:
        enc.map(2)
        enc.raw(K["bits"])
        enc.uint(m.bits)
        enc.raw(K["keys"])
        enc.array(len(m.keys))
        for k in m.keys:
            enc.uint(k)
    else:
        enc.nil()
