"""Cross-runtime release vectors: print the SHA-256 of fixed release frames.

    PYTHONPATH=<repo> python tests/mp/release_vector.py
    MICROPYPATH=<repo>:.frozen micropython tests/mp/release_vector.py

Builds three configs with fixed seeds (2-D integer bounds; 1-D float bounds with
float readings; count sketch), feeds each a deterministic pseudo-random stream
and prints one line per frame: ``name length sha256-hex``. The output must be
identical on every runtime and from .py or .mpy (tests/test_micropython.py).

Frames are streamed through a hashing sink, so the script also fits small heaps.
Float readings are built as integer * 2**-6 so that no runtime's decimal float
parser is involved: every float here is exact.
"""
import binascii
import hashlib

import agent


def lcg(x):
    """One step of x -> (1021 x + 12345) mod 2**20; intermediates stay < 2**30."""
    return (1021 * x + 12345) & 0xFFFFF


def privhp_cfg(lo, hi, r, k, w, j, sketch, hash_seed):
    """Config whose budgets add up to epsilon = 1/2 exactly, in integers."""
    q = 1 << 20
    total = q // 2
    clamp_p = total // 32
    rest = total - clamp_p
    base = rest // (r + 1)
    sigma = [base] * (r + 1)
    sigma[r] += rest - base * (r + 1)
    return {
        "format": 1, "epsilon": [1, 2], "relation": "add-remove",
        "mechanisms": [{
            "kind": "privhp", "lo": lo, "hi": hi, "r": r, "k": k, "w": w, "j": j,
            "sketch": sketch, "hash_seed": hash_seed, "q": q, "sigma": sigma,
            "clamp_p": clamp_p,
        }],
    }


def int2d_readings(n, x):
    for i in range(n):
        x = lcg(x)
        a = (x >> 4) % 4300 - 100     # [-100, 4200): both sides of [0, 4096]
        x = lcg(x)
        b = (x >> 4) % 4300 - 100
        if i % 101 == 0:
            a, b = 4096, 0            # the boundaries themselves
        yield (a, b)


def float1d_readings(n, x):
    for i in range(n):
        x = lcg(x)
        v = ((x >> 4) % 6400) * 0.015625 - 25.0   # [-25.0, 75.0) in steps of 2**-6
        if i % 97 == 0:
            v = 60.25 if i & 1 else -20.5          # hi and lo exactly
        yield (v,)


CASES = (
    # name, config, seed, device id, key, readings
    ("int2d-cms", privhp_cfg([0, 0], [4096, 4096], 12, 32, 128, 2, "cms", "vec-int"),
     b"vector-seed-int2d", "dev-int", None, int2d_readings, 4000, 1),
    ("float1d-cms", privhp_cfg([-20.5], [60.25], 10, 16, 64, 3, "cms", "vec-float"),
     b"vector-seed-float1d", "dev-float", b"device-key-0123456789abcdef-0001", float1d_readings, 4000, 2),
    ("int2d-cs", privhp_cfg([0, 0], [4096, 4096], 12, 16, 128, 3, "cs", "vec-cs"),
     b"vector-seed-cs", "dev-cs", None, int2d_readings, 4000, 3),
)


class HashSink:
    def __init__(self):
        self.h = hashlib.sha256()

    def __call__(self, buf, n):
        self.h.update(buf if n == len(buf) else memoryview(buf)[:n])


def main():
    for name, cfg, seed, dev, key, gen, n, s in CASES:
        a = agent.Agent(cfg, seed=seed, device_id=dev, epoch=7, seq=3, key=key)
        a.update_many(gen(n, s))
        sink = HashSink()
        size = a.release(sink)
        print("%s %d %s" % (name, size, binascii.hexlify(sink.h.digest()).decode()))
        a = None


main()
