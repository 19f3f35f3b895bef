"""Release phase of the CDF tree state: its msgpack map, keys sorted."""
from ..msgpack_out import key

_K = {}
NAMES = ("bins", "branching", "budget", "hi", "kind", "lo", "names", "nodes", "q", "sigma")


def prepare():
    if not _K:
        for name in NAMES:
            _K[name] = key(name)


def encode(m, enc):
    """Write the state as one msgpack map (docs/mechanisms/cdf.md, "Wire map")."""
    prepare()
    K = _K
    enc.map(len(NAMES))
    enc.raw(K["bins"])
    enc.uint(m.K)
    enc.raw(K["branching"])
    _uints(enc, m.branching)
    enc.raw(K["budget"])
    num, den = m.budget()
    enc.array(2)
    enc.uint(num)
    enc.uint(den)
    enc.raw(K["hi"])
    enc.bounds(m.hi, m.lo, m.hi)
    enc.raw(K["kind"])
    enc.str(b"cdf")
    enc.raw(K["lo"])
    enc.bounds(m.lo, m.lo, m.hi)
    enc.raw(K["names"])
    enc.array(m.d)
    for nb in m.name_bytes:
        enc.str(nb)
    enc.raw(K["nodes"])
    enc.packed(m.counters(), "<i", 4)
    enc.raw(K["q"])
    enc.uint(m.q)
    enc.raw(K["sigma"])
    _uints(enc, m.sigma)


def _uints(enc, values):
    enc.array(len(values))
    for v in values:
        enc.uint(v)
