"""Exact privacy-budget arithmetic for configs: epsilon parsing and the
per-level split of PrivHP (the PrivHP paper, Lemma 5 and Eq. (23)).

Budgets travel as integers p_l over a common denominator q, chosen so that the
split adds up to epsilon *exactly*: q = 2**20 * den(epsilon), sum(p_l) + p_clamp
= epsilon * q. Rounding (largest remainder) only moves budget between levels,
never creates any, and every level keeps at least one unit.
"""
import math
from fractions import Fraction

from edgesynth.errors import InputError

Q_BITS = 20
MAX_EPS_DEN = 10 ** 6
MAX_EPS = 100


def parse_epsilon(text):
    """Parse '1', '0.5', '1/3' or '1e-1' into an exact positive Fraction."""
    try:
        eps = Fraction(str(text).strip())
    except (ValueError, ZeroDivisionError):
        raise InputError("epsilon must be a positive number like 1, 0.5 or 1/3, got %r" % text)
    if eps <= 0 or eps > MAX_EPS:
        raise InputError("epsilon must be in (0, %d], got %s" % (MAX_EPS, text))
    if eps.denominator > MAX_EPS_DEN:
        raise InputError("epsilon %s needs more than 6 decimal places; round it" % text)
    return eps


def split_integer(total, weights):
    """Integers >= 1 proportional to ``weights`` that add up to ``total`` exactly."""
    n = len(weights)
    if total < n:
        raise InputError("budget too small to give every level a share")
    s = float(sum(weights))
    raw = [(total - n) * w / s for w in weights]
    parts = [1 + int(math.floor(x)) for x in raw]
    rest = total - sum(parts)
    order = sorted(range(n), key=lambda i: (-(raw[i] - math.floor(raw[i])), i))
    for i in order[:rest]:
        parts[i] += 1
    assert sum(parts) == total
    return parts


def level_weights(d, k, r, j=1, uniform=False):
    """sqrt(c_l) of Eq. (23) on the cyclically split hypercube, l = 0..r.

    c_l = Gamma_{l-1} on tree levels and j*k*gamma_{l-1} on sketch levels, with
    gamma_l = 2**-floor(l/d), Gamma_l = 2**l * gamma_l, Gamma_{-1} = 1.
    """
    L = min(int(k).bit_length() - 1, r)
    if uniform:
        return [1.0] * (r + 1)

    def gamma(l):
        return 2.0 ** -(max(l, 0) // d)

    def Gamma(l):
        return 2.0 ** max(l, 0) * gamma(l)

    return [math.sqrt(Gamma(l - 1)) if l <= L else math.sqrt(j * k * gamma(l - 1))
            for l in range(r + 1)]


def privhp_budget(eps, d, k, r, j=1, clamp_share=Fraction(1, 50), uniform=False):
    """Integer budgets for PrivHP: returns (q, sigma[0..r], clamp_p).

    ``eps`` is this mechanism's Fraction of epsilon; ``clamp_share`` the part
    of it spent on the noisy count of clamped readings (0 disables it).
    """
    q = (1 << Q_BITS) * eps.denominator
    total = eps.numerator << Q_BITS  # = eps * q
    clamp_p = int(total * Fraction(clamp_share)) if clamp_share else 0
    sigma = split_integer(total - clamp_p, level_weights(d, k, r, j, uniform))
    return q, sigma, clamp_p
