"""Portable pairwise-independent hashing of tree node ids into sketch columns.

Multilinear hashing over Z_p with p = 32749 (the largest prime below 2**15) on
the node id split into 14-bit limbs:

    h(x) = (b + a1*x0 + a2*x1 + a3*x2) mod p,  x = x0 + x1*2**14 + x2*2**28

For two distinct ids the limb vectors differ, so (h(x), h(y)) is uniform on
Z_p x Z_p over the random choice of (b, a1, a2, a3): the family is strongly
universal. Why not Carter-Wegman mod 2**31-1: its products need 62 bits, which
become heap-allocated long ints on 32-bit microcontrollers (31-bit small ints).
Here every intermediate stays below 2**30 for ids below 2**30 (r <= 29):
32748 * (1 + 2*16383 + 3) < 2**30. Columns are ``h mod w``; for w <= 4096 the
non-uniformity of that reduction is at most w/p (1/8 at w = 4096, 1/128 at 256).

Parameters are derived from a public seed with SHA-256 so that any runtime can
rebuild them, and every frame also carries them explicitly.
"""
import hashlib

P = 32749
LIMB_BITS = 14
LIMB_MASK = (1 << LIMB_BITS) - 1
PARAMS_PER_HASH = 4  # b, a1, a2, a3
MAX_WIDTH = 4096


def derive_params(seed, count):
    """``count`` integers uniform in [0, P) from the public ``seed`` (bytes).

    SHA-256 in counter mode; 16-bit big-endian words rejected above 2P.
    """
    out = []
    block = 0
    while len(out) < count:
        h = hashlib.sha256(b"edgesynth-hash-v1" + bytes(seed) + block.to_bytes(4, "big")).digest()
        block += 1
        for i in range(0, 32, 2):
            v = (h[i] << 8) | h[i + 1]
            if v < 2 * P and len(out) < count:
                out.append(v % P)
    return out


def hash_id(params, base, node_id):
    """h(node_id) for the hash whose 4 parameters start at ``params[base]``."""
    x0 = node_id & LIMB_MASK
    x1 = (node_id >> LIMB_BITS) & LIMB_MASK
    x2 = node_id >> (2 * LIMB_BITS)
    return (params[base] + params[base + 1] * x0 + params[base + 2] * x1
            + params[base + 3] * x2) % P
