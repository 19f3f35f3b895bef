"""Release phase of the marginals state: its msgpack map, keys sorted, with
the public schema written canonically (so a frame is self-describing)."""
from ..msgpack_out import Encoder, key

_K = {}
NAMES = ("budget", "cols", "groups", "kind", "q", "schema", "sigma", "totals")
SCHEMA_KEYS = ("bins", "bounds", "columns", "name", "values")


def prepare():
    if not _K:
        for name in NAMES + SCHEMA_KEYS:
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
    enc.raw(K["q"])
    enc.uint(m.q)
    enc.raw(K["schema"])
    encode_schema(m.schema, enc)
    enc.raw(K["sigma"])
    _uints(enc, m.sigma)
    enc.raw(K["totals"])
    enc.packed(m.tabs, "<i", 4)


def encode_schema(schema, enc):
    """The checked ``schema`` (build.schema_shape) as canonical msgpack: map
    keys sorted, bounds always float64, values as given (str, int, float64).
    Allocates only the UTF-8 bytes of each string (release phase)."""
    prepare()
    K = _K
    columns = schema["columns"]
    enc.map(1)
    enc.raw(K["columns"])
    enc.array(len(columns))
    for c in columns:
        if "values" in c:
            enc.map(2)
            enc.raw(K["name"])
            enc.str(c["name"].encode())
            enc.raw(K["values"])
            vals = c["values"]
            enc.array(len(vals))
            for v in vals:
                if isinstance(v, str):
                    enc.str(v.encode())
                elif isinstance(v, int):
                    enc.int(v)
                else:
                    enc.float(v)
        else:
            enc.map(3)
            enc.raw(K["bins"])
            enc.uint(c["bins"])
            enc.raw(K["bounds"])
            b = c["bounds"]
            enc.array(2)
            enc.float(float(b[0]))
            enc.float(float(b[1]))
            enc.raw(K["name"])
            enc.str(c["name"].encode())


def schema_bytes(schema):
    """The exact bytes encode_schema writes for ``schema`` (a spec's checked
    "schema"): the blob the host pre-encodes into the C core's config, which
    writes it raw into the frame."""
    out = bytearray()

    def sink(buf, n):
        out.extend(buf[:n] if n != len(buf) else buf)

    enc = Encoder()
    enc.reset(sink)
    encode_schema(schema, enc)
    return bytes(out)


def _uints(enc, values):
    enc.array(len(values))
    for v in values:
        enc.uint(v)
