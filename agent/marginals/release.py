"""Release phase of the marginals state: its msgpack map, keys sorted."""
from ..msgpack_out import key

_K = {}
NAMES = ("budget", "cols", "groups", "kind", "names", "q", "sigma", "sizes", "totals")


def prepare():
    if not _K:
        for name in NAMES:
            _K[name] = key(name)


def encode(m, enc):
    """Write the state as one msgpack map (docs/mechanisms/marginals.md, "Wire map")."""
    prepare()
    K = _K
    enc.map(len(NAMES))
    enc.raw(K["budget"])
    num, den = m.budget()
    enc.array(2)
    enc.uint(num)
    enc.uint(den)
    enc.raw(K["cols"])
    enc.array(len(m.cols))
    for cols in m.cols:
        _uints(enc, cols)
    enc.raw(K["groups"])
    enc.array(len(m.groups))
    for g in m.groups:
        if g is None:
            enc.nil()
        else:
            enc.packed((g,), "<H", 2)
    enc.raw(K["kind"])
    enc.str(b"marginals")
    enc.raw(K["names"])
    enc.array(m.d)
    for nb in m.name_bytes:
        enc.str(nb)
    enc.raw(K["q"])
    enc.uint(m.q)
    enc.raw(K["sigma"])
    _uints(enc, m.sigma)
    enc.raw(K["sizes"])
    _uints(enc, m.sizes)
    enc.raw(K["totals"])
    enc.packed(m.tabs, "<i", 4)


def _uints(enc, values):
    enc.array(len(values))
    for v in values:
        enc.uint(v)
