"""Cross-runtime vector of the marginals device state (tests/test_marginals_device.py).

    PYTHONPATH=<repo> python tests/mp/marginals_vector.py
    MICROPYPATH=<repo>:.frozen micropython tests/mp/marginals_vector.py

Builds a fixed spec (a categorical, a binned and a mixed-type column, 1- and
2-way marginals, one partitioned) with a fixed seed, feeds it a deterministic
stream of cell indices (some out of range, some floats and NaN, so flooring
and the "other" cells count), the updates under
``micropython.heap_lock()`` on MicroPython (no allocation per update), and
prints the encoded map as hex. The output must be identical on every runtime.
"""
import binascii

try:
    import micropython
except ImportError:
    micropython = None

from agent.marginals import Marginals
from agent.msgpack_out import Encoder
from firmware_shims.drbg import seeded_source

SCHEMA = {"columns": [{"name": "site", "values": ["A", "B"]}, {"name": "hour", "bounds": [0, 24], "bins": 4},
                      {"name": "temp", "values": [-3, 0.25, "hot"]}]}
SPEC = {"kind": "marginals", "schema": SCHEMA,
        "cols": [[0], [1], [2], [0, 1], [0, 2], [1, 2]],
        "groups": [None, None, None, None, [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 4, 4], None],
        "q": 1 << 20, "sigma": [1 << 15, 1 << 16, 1 << 16, 1 << 17, 1 << 17, (1 << 20) - (5 << 15) - (1 << 18)]}
N = 500
NAN = float("nan")


def lcg(x):
    """One step of x -> (1021 x + 12345) mod 2**20; intermediates stay < 2**30."""
    return (1021 * x + 12345) & 0xFFFFF


def main():
    m = Marginals(SPEC)
    m.draw_noise(seeded_source(b"marginals-vector"))
    rows = []
    x = 7
    for _ in range(64):
        r = []
        for s in (3, 5, 4):
            x = lcg(x)
            r.append(x % (s + 2) - 1)  # -1 and s are out of range: the "other" cell
        if len(rows) % 8 == 3:
            r[1] = r[1] + 0.75  # a float index is floored (s - 0.25 too: it stays in range)
        if len(rows) % 8 == 5:
            r[2] = NAN  # the "other" cell
        rows.append(tuple(r))
    up = m.update
    n = 0
    if micropython is not None:
        micropython.heap_lock()
    try:
        while n < N:
            up(rows[n & 63])
            n += 1
    finally:
        if micropython is not None:
            micropython.heap_unlock()
    m.prepare_release()
    out = bytearray()

    def sink(buf, k):
        out.extend(buf[:k] if k != len(buf) else buf)

    enc = Encoder()
    enc.reset(sink)
    m.encode(enc)
    print(binascii.hexlify(bytes(out)).decode())


main()
