"""Test-data generators for benchmarks and tests (pure numpy).

All generators draw from a caller-supplied ``numpy.random.Generator`` so that
results are reproducible, and return float64 arrays of shape ``(n, d)``.

Units and ranges
----------------
``uniform`` and ``multifractal`` produce points in the unit cube ``[0, 1)^d``
(dimensionless; the same normalised coordinates in which PrivHP builds its
dyadic hierarchy). ``scale_to_box`` maps such points to a sensor's public
domain ``[lo, hi)`` per channel, in the channel's own units.

The multifractal is the binomial cascade the PrivHP paper uses to model skew (§3.3).
"""
import numpy as np

__all__ = ["multifractal", "uniform", "scale_to_box"]

_BLOCK_ROWS = 2 ** 16  # rows of random bits generated at once
_ONE_MINUS = np.nextafter(1.0, 0.0)  # largest float64 below 1


def _check_n_d(n, d):
    n = int(n)
    d = int(d)
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if d < 1:
        raise ValueError(f"d must be >= 1, got {d}")
    return n, d


def multifractal(rng, n, d, B, depth=40):
    """Binomial multifractal cascade on ``[0, 1)^d`` (the PrivHP paper, §3.3).

    In one dimension every dyadic cell gives a fraction ``B`` of its mass to
    its lower half and ``1 - B`` to its upper half, recursively. A point is
    ``x = sum_{l=1..depth} b_l 2^-l + U 2^-depth`` with i.i.d. bits
    ``Pr[b_l = 0] = B`` and ``U ~ U[0, 1)`` filling the cell below the
    truncation depth. In ``d`` dimensions each coordinate is an independent
    1-D multifractal with the same ``B``; this is exactly the distribution of
    the interleaved (Morton-order) cascade PrivHP's hierarchy sees, because
    the bits are i.i.d.

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of randomness.
    n : int
        Number of points (>= 0).
    d : int
        Dimension (>= 1).
    B : float
        Skew parameter in ``[0.5, 1]``. ``B = 0.5`` is the uniform
        distribution; ``B`` near 1 piles the mass up near the origin (a cell
        at level ``l`` whose path has ``z`` zeros and ``o`` ones has mass
        ``B**z * (1 - B)**o``).
    depth : int, optional
        Truncation depth of the cascade in bits per coordinate, 1..52
        (default 40; keep it well beyond the depth PrivHP resolves).

    Returns
    -------
    numpy.ndarray
        float64 array of shape ``(n, d)`` with values in ``[0, 1)``.

    Notes
    -----
    Bits are drawn in blocks of 2**16 rows, so memory stays at a few tens of
    MB whatever ``n`` is. The output for a given seed depends on this block
    size (and is stable as long as it does not change).
    """
    n, d = _check_n_d(n, d)
    B = float(B)
    if not 0.5 <= B <= 1.0:
        raise ValueError(f"B must be in [0.5, 1], got {B}")
    depth = int(depth)
    if not 1 <= depth <= 52:
        raise ValueError(f"depth must be in 1..52, got {depth}")
    # Bit weights 2^-1 .. 2^-depth. Every partial sum of distinct weights is a
    # multiple of 2^-depth below 1, hence exact in float64 whatever the
    # summation order of the matrix product.
    weights = np.ldexp(1.0, -np.arange(1, depth + 1))
    tail = np.ldexp(1.0, -depth)
    out = np.empty((n, d), dtype=np.float64)
    for j in range(d):
        for start in range(0, n, _BLOCK_ROWS):
            stop = min(n, start + _BLOCK_ROWS)
            bits = rng.random((stop - start, depth)) >= B  # 1 with prob 1 - B
            col = bits @ weights
            col += rng.random(stop - start) * tail
            out[start:stop, j] = col
    # (2^depth - 1 + U) * 2^-depth can round up to exactly 1.0; keep [0, 1).
    np.minimum(out, _ONE_MINUS, out=out)
    return out


def uniform(rng, n, d):
    """Uniform points on ``[0, 1)^d``.

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of randomness.
    n : int
        Number of points (>= 0).
    d : int
        Dimension (>= 1).

    Returns
    -------
    numpy.ndarray
        float64 array of shape ``(n, d)`` with values in ``[0, 1)``.
    """
    n, d = _check_n_d(n, d)
    return rng.random((n, d))


def scale_to_box(u, lo, hi):
    """Map points of the unit cube ``[0, 1)^d`` affinely to ``[lo, hi)``.

    Parameters
    ----------
    u : array_like, shape (n, d)
        Points in ``[0, 1)^d`` (a 1-D array is taken as ``d = 1``).
    lo, hi : float or array_like of length d
        Lower and upper bound of the box per channel, in the channel's units;
        ``hi > lo``.

    Returns
    -------
    numpy.ndarray
        float64 array of shape ``(n, d)``: ``lo + u * (hi - lo)``, kept
        strictly below ``hi`` (floating-point rounding could otherwise reach
        ``hi``).
    """
    u = np.asarray(u, dtype=np.float64)
    if u.ndim == 1:
        u = u[:, None]
    if u.ndim != 2:
        raise ValueError(f"u must have shape (n, d), got {u.shape}")
    d = u.shape[1]
    lo = np.broadcast_to(np.asarray(lo, dtype=np.float64), (d,))
    hi = np.broadcast_to(np.asarray(hi, dtype=np.float64), (d,))
    if not np.all(hi > lo):
        raise ValueError("every hi must be greater than its lo")
    out = lo + u * (hi - lo)
    return np.minimum(out, np.nextafter(hi, lo))
