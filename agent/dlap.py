"""Exact discrete Laplace sampling with integer arithmetic only.

Canonne, Kamath and Steinke 2020 ("The discrete Gaussian for differential
privacy", Algorithms 1-2), written over integer pairs so that it runs unchanged
on CPython and MicroPython and byte-for-byte like the C core. No float, no true
division, no ``fractions``: floating-point Laplace is attackable (Mironov 2012)
and MCU floats are single precision. See docs/privacy.md for the argument.

``rng`` is any object with ``below(m)`` returning an exact uniform integer in
``[0, m)`` (firmware_shims.drbg.ByteSource). The order of draws is part of the
cross-runtime contract: do not reorder.
"""


def bernoulli(rng, num, den):
    """1 with probability num/den (0 <= num <= den)."""
    return rng.below(den) < num


def bernoulli_exp_le1(rng, num, den):
    """1 with probability exp(-num/den), for 0 <= num <= den."""
    k = 1
    while bernoulli(rng, num, den * k):
        k += 1
    return k & 1


def bernoulli_exp(rng, num, den):
    """1 with probability exp(-num/den), for any num >= 0."""
    while num > den:
        if not bernoulli_exp_le1(rng, 1, 1):
            return 0
        num -= den
    return bernoulli_exp_le1(rng, num, den)


def geometric(rng, s, t):
    """Geometric on {0, 1, ...} with P[X = x] = (1 - e^(-s/t)) e^(-x s/t)."""
    while True:
        u = rng.below(t)
        if bernoulli_exp(rng, u, t):
            break
    v = 0
    while bernoulli_exp_le1(rng, 1, 1):
        v += 1
    return (u + t * v) // s


def discrete_laplace(rng, scale_num, scale_den):
    """Discrete Laplace with scale b = scale_num/scale_den (integers >= 1).

    P[X = x] = (1 - a) / (1 + a) * a^|x| with a = exp(-1/b).
    Expected O(1) iterations whatever the scale.
    """
    if scale_num < 1 or scale_den < 1:
        raise ValueError("discrete Laplace needs a positive rational scale")
    while True:
        negative = rng.below(2)
        mag = geometric(rng, scale_den, scale_num)
        if negative and mag == 0:
            continue  # +0 and -0 would otherwise double the mass at zero
        return -mag if negative else mag
