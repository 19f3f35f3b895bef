"""Utility metrics: how close synthetic data is to the real data.

Every function here is pure: numpy arrays in, numbers or arrays out; the only
state is the ``numpy.random.Generator`` passed in where subsampling is needed.

All distances are computed in *normalised* coordinates, where the public
domain box ``[lo, hi]`` of each channel is mapped to ``[0, 1]``
(the unit box of the PrivHP paper's W1 bounds, §3.2). The joint metric uses the l-infinity (Chebyshev) ground
metric, the metric PrivHP's guarantees are stated in. Per-channel figures are
also given in each channel's own units (normalised W1 times ``hi - lo``).

Summary of the metrics
----------------------
``w1_1d``               exact W1 between two 1-D samples.
``w1_marginal_exact``   exact W1 between a 1-D sample and a mixture of uniform
                        distributions on intervals (the generator's marginal),
                        with no sampling error.
``w1_joint``            joint W1 (l-infinity) estimated by exact optimal
                        transport on subsamples, with its subsampling floor.
``sliced_w1``           W1 averaged over random 1-D projections, exact per
                        projection, on the public box.
``range_query_error``   mean absolute error of the fraction of points in random
                        axis-aligned boxes.
``utility_report``      all of the above for one real/synthetic pair and for a
                        uniform baseline, as a JSON-serialisable dict.
"""
import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist
from scipy.stats import wasserstein_distance

from edgesynth.errors import EvaluationInputError

__all__ = [
    "EvaluationInputError",
    "normalize",
    "w1_1d",
    "w1_marginal_exact",
    "w1_joint",
    "sliced_w1",
    "range_query_error",
    "uniform_baseline",
    "utility_report",
]

REPORT_SCHEMA = "edgesynth.utility/1"


# --------------------------------------------------------------------------
# input checks
# --------------------------------------------------------------------------

def _points(x, what, d=None, min_rows=1):
    """Return x as a finite float64 (n, d) array; a 1-D array is (n, 1)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise EvaluationInputError(f"{what} must have shape (n, d), got {x.shape}")
    if d is not None and x.shape[1] != d:
        raise EvaluationInputError(f"{what} has {x.shape[1]} columns, expected {d}")
    if x.shape[0] < min_rows:
        raise EvaluationInputError(
            f"{what} needs at least {min_rows} row(s), got {x.shape[0]}")
    if not np.all(np.isfinite(x)):
        raise EvaluationInputError(f"{what} contains NaN or infinite values")
    return x


def _sample_1d(x, what):
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1:
        raise EvaluationInputError(f"{what} must be 1-D, got shape {x.shape}")
    if x.size == 0:
        raise EvaluationInputError(f"{what} is empty")
    if not np.all(np.isfinite(x)):
        raise EvaluationInputError(f"{what} contains NaN or infinite values")
    return x


def _bounds(lo, hi, d):
    try:
        lo = np.broadcast_to(np.asarray(lo, dtype=np.float64), (d,)).copy()
        hi = np.broadcast_to(np.asarray(hi, dtype=np.float64), (d,)).copy()
    except ValueError:
        raise EvaluationInputError(
            f"bounds must give one lo and one hi per channel (d={d})") from None
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        raise EvaluationInputError("bounds must be finite")
    bad = np.flatnonzero(~(hi > lo))
    if bad.size:
        raise EvaluationInputError(f"channel {int(bad[0])}: hi must be greater than lo")
    return lo, hi


# --------------------------------------------------------------------------
# normalisation
# --------------------------------------------------------------------------

def normalize(x, lo, hi):
    """Map points of the box ``[lo, hi]`` to ``[0, 1]^d``, clipping outliers.

    Parameters
    ----------
    x : array_like, shape (n, d) or (n,)
        Points in the channels' own units.
    lo, hi : float or array_like of length d
        Public domain bounds per channel, ``hi > lo``.

    Returns
    -------
    numpy.ndarray
        float64 array of the same shape as ``x`` with
        ``clip((x - lo) / (hi - lo), 0, 1)``. Values outside the box are
        clipped onto its boundary, as the device clamps out-of-range readings.
        NaN stays NaN.
    """
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1] if x.ndim == 2 else 1
    lo, hi = _bounds(lo, hi, d)
    if x.ndim == 1:
        lo, hi = lo[0], hi[0]
    return np.clip((x - lo) / (hi - lo), 0.0, 1.0)


# --------------------------------------------------------------------------
# one-dimensional W1
# --------------------------------------------------------------------------

def w1_1d(a, b):
    """Exact 1-Wasserstein distance between two 1-D empirical distributions.

    Parameters
    ----------
    a, b : array_like, 1-D
        Samples (any sizes, each non-empty), equal weights within a sample.

    Returns
    -------
    float
        ``W1 = integral |F_a(t) - F_b(t)| dt``, in the units of the samples.
    """
    a = _sample_1d(a, "a")
    b = _sample_1d(b, "b")
    return float(wasserstein_distance(a, b))


def w1_marginal_exact(x, a, b, mass):
    """Exact W1 between a 1-D sample and a mixture of uniform intervals.

    The target ``T`` puts mass ``mass[i]`` uniformly on ``[a[i], b[i])``; the
    intervals may overlap (marginals of d-dimensional leaf boxes do) and an
    interval with ``a[i] == b[i]`` is a point mass. The function computes
    ``W1(mu_x, T) = integral |F_x(t) - F_T(t)| dt`` exactly (up to float64
    rounding): ``F_T`` is piecewise linear between the merged breakpoints of
    data points and interval ends, ``F_x`` is constant there, and ``|c - F_T|``
    is integrated in closed form on each piece, split at the crossing.

    Parameters
    ----------
    x : array_like, 1-D, length n >= 1
        The sample (for instance one normalised channel of the real data).
    a, b : array_like, 1-D, length k >= 1
        Interval ends, ``a[i] <= b[i]``.
    mass : array_like, 1-D, length k
        Non-negative weights. They are divided by their sum, so raw
        (consistent) leaf counts may be passed as they are.

    Returns
    -------
    float
        The W1 distance, in the units of ``x``.

    Notes
    -----
    Cost is O((n + k) log(n + k)) time and O(n + k) memory; about 0.3 s for
    n = 1e6 and k = 1e5. Slopes of ``F_T`` are accumulated in 64-bit fixed
    point, so intervals that have ended leave no rounding residue behind
    (a plain floating cumulative sum would, when very narrow, heavy intervals
    precede wide, light ones).
    """
    x = _sample_1d(x, "x")
    a = _sample_1d(a, "a")
    b = _sample_1d(b, "b")
    mass = _sample_1d(mass, "mass")
    if not (a.size == b.size == mass.size):
        raise EvaluationInputError("a, b and mass must have the same length")
    if np.any(b < a):
        raise EvaluationInputError("every interval needs a <= b")
    if np.any(mass < 0):
        raise EvaluationInputError("mass must be non-negative")
    total = mass.sum()
    if not total > 0:
        raise EvaluationInputError("mass must have a positive sum")
    keep = mass > 0
    a, b, mass = a[keep], b[keep], mass[keep] / total

    xs = np.sort(x)
    n = xs.size
    t = np.unique(np.concatenate([xs, a, b]))  # merged breakpoints t_0 < ... < t_K-1
    nt = t.size
    if nt == 1:  # everything sits on one point
        return 0.0

    width = b - a
    with np.errstate(divide="ignore", over="ignore"):
        dens = mass / width
    point = ~np.isfinite(dens)  # zero (or denormal) width: a point mass

    # Jumps of F_T at breakpoints (point masses).
    jump = np.zeros(nt)
    if np.any(point):
        np.add.at(jump, np.searchsorted(t, a[point]), mass[point])

    # Slope of F_T on each piece [t_k, t_k+1): sum of the densities of the
    # intervals covering it. Densities are quantised to multiples of a power
    # of two q with 2^61 q >= their total, so the integer running sum is exact.
    slope = np.zeros(nt - 1)
    cont = ~point
    if np.any(cont):
        dc = dens[cont]
        q = np.ldexp(1.0, int(np.ceil(np.log2(dc.sum()))) - 61)
        h = np.rint(dc / q).astype(np.int64)
        delta = np.zeros(nt, dtype=np.int64)
        np.add.at(delta, np.searchsorted(t, a[cont]), h)
        np.add.at(delta, np.searchsorted(t, b[cont]), -h)
        slope = np.cumsum(delta)[:-1].astype(np.float64) * q

    dt = np.diff(t)
    rise = slope * dt  # increase of F_T across each piece
    # F_T(t_k) (right-continuous value) and its left limit at t_k+1.
    f_at = np.cumsum(jump + np.concatenate(([0.0], rise)))
    y0 = f_at[:-1]
    y1 = y0 + rise
    c = np.searchsorted(xs, t[:-1], side="right") / n  # F_x on [t_k, t_k+1)

    u0 = y0 - c
    u1 = y1 - c
    abs0 = np.abs(u0)
    abs1 = np.abs(u1)
    same_side = u0 * u1 >= 0
    with np.errstate(invalid="ignore", divide="ignore"):
        crossing = (u0 * u0 + u1 * u1) / (abs0 + abs1)
    area = 0.5 * dt * np.where(same_side, abs0 + abs1, crossing)
    return float(area.sum())


# --------------------------------------------------------------------------
# joint W1 by optimal transport on subsamples
# --------------------------------------------------------------------------

def _ot_w1(p, q):
    """Exact W1 (Chebyshev ground metric) between two point sets of equal size.

    With uniform weights on n points each, some optimal transport plan is a
    permutation (the extreme points of the transport polytope are permutation
    matrices, Birkhoff-von Neumann), so W1 is the mean cost of a minimum-cost
    perfect matching, which scipy's assignment solver finds exactly.

    The solver augments one row of ``p`` at a time; rows drawn from a tight
    cluster contend for the same few columns and make it several times slower
    (m = 2000, clustered rows against uniform columns: 5.9 s, the other way
    round: 1.3 s), so pass the more spread-out set as ``p``.
    """
    cost = cdist(p, q, "chebyshev")
    rows, cols = linear_sum_assignment(cost)
    return float(cost[rows, cols].mean())


def _w1_subsampled(real, other, rng, m, reps):
    # Both subsamples have the same size k, so that each solve is a matching;
    # `other` (synthetic or uniform: at least as spread out as real data) is p.
    k = min(m, real.shape[0], other.shape[0])
    vals = []
    for _ in range(reps):
        ir = rng.choice(real.shape[0], size=k, replace=False)
        io = rng.choice(other.shape[0], size=k, replace=False)
        vals.append(_ot_w1(other[io], real[ir]))
    return float(np.mean(vals))


def _w1_floor(real, rng, m, reps):
    n = real.shape[0]
    half = m if n >= 2 * m else n // 2
    vals = []
    for _ in range(reps):
        idx = rng.choice(n, size=2 * half, replace=False)
        vals.append(_ot_w1(real[idx[:half]], real[idx[half:]]))
    return float(np.mean(vals))


def w1_joint(real, synth, rng, m=2000, reps=3):
    """Joint W1 with the l-infinity ground metric, by exact OT on subsamples.

    Each repetition draws ``k = min(m, len(real), len(synth))`` points of
    ``real`` and ``k`` of ``synth`` without replacement, builds the Chebyshev
    cost matrix and solves the transport problem with uniform weights exactly
    (as a minimum-cost perfect matching, ``scipy.optimize.linear_sum_assignment``).
    The result is the mean over ``reps`` repetitions.

    The estimate includes subsampling error, so it is reported together with
    its *floor*: the same estimator between two disjoint subsamples of
    ``real`` (``m`` points each, or half of ``real`` each when it has fewer
    than ``2 m`` points). A synthetic set is as good as the estimator can tell
    when its ``w1`` is near the floor. In d = 2 the floor is roughly
    proportional to ``m ** -0.5``.

    Parameters
    ----------
    real, synth : array_like, shape (n, d)
        Points in normalised coordinates (see ``normalize``); ``real`` needs
        at least 2 points, ``synth`` at least 1.
    rng : numpy.random.Generator or int or None
        Randomness for the subsamples.
    m : int, optional
        Subsample size (default 2000; one solve at m = 2000 takes about
        0.3 s for close point sets and 1 to 2 s for distant ones, such as
        the uniform baseline, and grows like m**2 to m**3).
    reps : int, optional
        Number of repetitions to average (default 3).

    Returns
    -------
    dict
        ``{"w1": float, "floor": float}`` in normalised units.
    """
    rng = np.random.default_rng(rng)
    real = _points(real, "real", min_rows=2)
    synth = _points(synth, "synth", d=real.shape[1])
    m, reps = int(m), int(reps)
    if m < 1 or reps < 1:
        raise EvaluationInputError("m and reps must be >= 1")
    return {
        "w1": _w1_subsampled(real, synth, rng, m, reps),
        "floor": _w1_floor(real, rng, m, reps),
    }


# --------------------------------------------------------------------------
# sliced W1
# --------------------------------------------------------------------------

_SLICE_CELLS = 1 << 21  # projected values held at once (x 8 bytes, a few arrays)


def _quantile_grid(n, m):
    """Pieces of [0, 1] on which both empirical quantile functions are constant.

    Returns the piece lengths and, per piece, the order-statistic index of a
    sample of size n and of one of size m. Exact: i/n and j/m that are equal
    as fractions round to the same float, so no spurious piece appears.
    """
    u = np.union1d(np.arange(n + 1) / n, np.arange(m + 1) / m)
    mid = 0.5 * (u[:-1] + u[1:])
    ia = np.minimum((mid * n).astype(np.int64), n - 1)
    ib = np.minimum((mid * m).astype(np.int64), m - 1)
    return np.diff(u), ia, ib


def _project(theta, xt):
    """theta (c, d) times xt (d, n), as d scaled row sums: a (c, d) @ (d, n)
    product with small c and d runs several times slower through BLAS."""
    out = theta[:, :1] * xt[0]
    for k in range(1, xt.shape[0]):
        out += theta[:, k:k + 1] * xt[k]
    return out


def sliced_w1(real, synth, lo, hi, rng, directions=256):
    """Sliced 1-Wasserstein distance on the public box, normalised to [0, 1]^d.

    Both point sets are mapped to ``[0, 1]^d`` by the public bounds
    (``normalize``: readings outside the box are clipped onto it, as the device
    clamps them), projected on ``directions`` unit vectors drawn uniformly on
    the sphere S^(d-1) from ``rng``, and the exact 1-D W1 of each projection
    (the distance of ``w1_1d``: ``integral |F_a^-1(u) - F_b^-1(u)| du``, any
    two sample sizes) is averaged over the directions. It is 0 for identical
    sets, symmetric in the two sets, at most the joint W1 in the Euclidean
    metric (projections are 1-Lipschitz), and for d = 1 it equals ``w1_1d`` on the normalised
    values (the only directions are +1 and -1).

    Parameters
    ----------
    real, synth : array_like, shape (n, d) or (n,)
        Points in the channels' own units; each non-empty, finite, the same d.
    lo, hi : float or array_like of length d
        Public domain bounds per channel, ``hi > lo`` (never read off the data).
    rng : numpy.random.Generator or int or None
        Source of the directions: fix it to compare methods on the same slices.
    directions : int, optional
        Number of random directions, >= 1 (default 256).

    Returns
    -------
    float
        Mean W1 of the projections, in normalised units, in ``[0, sqrt(d)]``.

    Notes
    -----
    The Monte Carlo error over directions is sd_theta(W1_theta) / sqrt(directions);
    the spread of W1_theta is that of |theta_1| for a shift along one axis
    (relative sd about 0.75 at d = 2 and 0.6 at d = 4), so 256 directions
    leave a relative error of about 4-5 % for such a difference and less when
    the difference is spread over directions. Comparing methods with the same
    ``rng`` seed uses the same directions for all and removes most of it.
    Time O(directions (n + m) log(n + m)): about 10 s for n = m = 3.3e5 and 256
    directions on a loaded, shared 2-core machine (sorting dominates); memory
    O(n + m) floats (directions are projected in chunks of about 2**21 / (n + m)).
    """
    rng = np.random.default_rng(rng)
    real = _points(real, "real")
    synth = _points(synth, "synth", d=real.shape[1])
    directions = int(directions)
    if directions < 1:
        raise EvaluationInputError("directions must be >= 1")
    n, d = real.shape
    m = synth.shape[0]
    at = np.ascontiguousarray(normalize(real, lo, hi).T)  # (d, n): rows of the products stay contiguous
    bt = np.ascontiguousarray(normalize(synth, lo, hi).T)
    theta = rng.standard_normal((directions, d))
    theta /= np.linalg.norm(theta, axis=1, keepdims=True)
    if n != m:
        dt, ia, ib = _quantile_grid(n, m)
    chunk = max(1, _SLICE_CELLS // (n + m))
    total = 0.0
    for s in range(0, directions, chunk):
        t = theta[s:s + chunk]
        pa = np.sort(_project(t, at), axis=1)  # (chunk, n) order statistics per direction
        pb = np.sort(_project(t, bt), axis=1)
        if n == m:  # equal sizes: the i-th order statistics are paired
            total += float(np.abs(pa - pb).sum()) / n
        else:
            total += float((np.abs(pa[:, ia] - pb[:, ib]) @ dt).sum())
    return total / directions


# --------------------------------------------------------------------------
# range queries
# --------------------------------------------------------------------------

def _random_boxes(rng, n_queries, d):
    ends = rng.random((n_queries, d, 2))
    ends.sort(axis=2)
    return ends[:, :, 0], ends[:, :, 1]


def _box_fractions(pts, qlo, qhi):
    """Fraction of the rows of pts inside each closed box [qlo_i, qhi_i].

    Points are sorted on the first coordinate once, so each box selects a
    contiguous run by binary search; only that run is compared on the other
    coordinates. Memory stays O(n), time O(n_queries * n * (d - 1)) at worst.
    """
    n, d = pts.shape
    order = np.argsort(pts[:, 0], kind="stable")
    first = pts[order, 0]
    i0 = np.searchsorted(first, qlo[:, 0], side="left")
    i1 = np.searchsorted(first, qhi[:, 0], side="right")
    if d == 1:
        return (i1 - i0) / n
    rest = np.ascontiguousarray(pts[order, 1:].T)  # (d - 1, n)
    counts = np.empty(qlo.shape[0], dtype=np.int64)
    for k in range(qlo.shape[0]):
        seg = rest[:, i0[k]:i1[k]]
        inside = (seg[0] >= qlo[k, 1]) & (seg[0] <= qhi[k, 1])
        for j in range(1, d - 1):
            inside &= (seg[j] >= qlo[k, j + 1]) & (seg[j] <= qhi[k, j + 1])
        counts[k] = np.count_nonzero(inside)
    return counts / n


def range_query_error(real, synth, rng, n_queries=1000):
    """Mean absolute error of random axis-aligned box queries.

    Each query is a box in normalised space whose side on every coordinate
    runs between two independent uniform points of ``[0, 1]`` (sorted). For
    each box the fraction of ``real`` points inside is compared with the
    fraction of ``synth`` points inside (closed boxes, exact counts).

    Parameters
    ----------
    real, synth : array_like, shape (n, d)
        Points in normalised coordinates (see ``normalize``), each non-empty.
    rng : numpy.random.Generator or int or None
        Randomness for the boxes.
    n_queries : int, optional
        Number of boxes (default 1000).

    Returns
    -------
    float
        ``mean_i |frac_real(box_i) - frac_synth(box_i)|``, in ``[0, 1]``.
        It is 0 for identical point sets. Expect about 1.5 s for
        n = 1e6 points, d = 2, 1000 queries.
    """
    rng = np.random.default_rng(rng)
    real = _points(real, "real")
    synth = _points(synth, "synth", d=real.shape[1])
    n_queries = int(n_queries)
    if n_queries < 1:
        raise EvaluationInputError("n_queries must be >= 1")
    qlo, qhi = _random_boxes(rng, n_queries, real.shape[1])
    diff = _box_fractions(real, qlo, qhi) - _box_fractions(synth, qlo, qhi)
    return float(np.mean(np.abs(diff)))


# --------------------------------------------------------------------------
# baseline and report
# --------------------------------------------------------------------------

def uniform_baseline(lo, hi, n, rng):
    """Points drawn uniformly in the public box: the data-free baseline.

    Parameters
    ----------
    lo, hi : array_like of length d
        Public domain bounds per channel, ``hi > lo``.
    n : int
        Number of points.
    rng : numpy.random.Generator or int or None
        Source of randomness.

    Returns
    -------
    numpy.ndarray
        float64 array of shape ``(n, d)``, uniform on ``[lo, hi)``, in the
        channels' own units.
    """
    rng = np.random.default_rng(rng)
    lo = np.atleast_1d(np.asarray(lo, dtype=np.float64))
    lo, hi = _bounds(lo, hi, lo.size)
    n = int(n)
    if n < 0:
        raise EvaluationInputError("n must be >= 0")
    return lo + rng.random((n, lo.size)) * (hi - lo)


def _figures(nreal, nother, width, names, rng, m, reps, qlo, qhi, real_frac, tick):
    """One side's figures; ``tick()`` after each of its len(names) + 2 steps."""
    channels = []
    for j, name in enumerate(names):
        w = w1_1d(nreal[:, j], nother[:, j])
        channels.append({
            "name": name,
            "w1_normalized": w,
            "w1": float(w * width[j]),
        })
        tick()
    rq = float(np.mean(np.abs(real_frac - _box_fractions(nother, qlo, qhi))))
    tick()
    joint = _w1_subsampled(nreal, nother, rng, m, reps)
    tick()
    return {
        "channels": channels,
        "w1_joint": joint,
        "range_query_error": rq,
    }


def utility_report(real, synth, lo, hi, names, rng, *, m=2000, reps=3, n_queries=1000, progress=None):
    """All utility figures for one real/synthetic pair, plus a uniform baseline.

    This is what ``edgesynth evaluate --json`` prints. Both data sets are first
    normalised to ``[0, 1]^d`` with the public bounds (clipping outliers). The
    baseline is ``uniform_baseline(lo, hi, n_synthetic)``: any useful
    synthetic data should beat it clearly. The baseline is scored with the
    same subsamples' sizes and the same range queries as the synthetic data.

    Parameters
    ----------
    real, synth : array_like, shape (n, d)
        Real and synthetic points in the channels' own units (a 1-D array is
        one channel). ``real`` needs at least 2 rows, ``synth`` at least 1.
    lo, hi : array_like of length d
        Public domain bounds per channel.
    names : sequence of str, length d
        Channel names (CSV column names).
    rng : numpy.random.Generator or int or None
        Randomness for subsamples, queries and the baseline.
    m, reps : int, optional
        Subsample size and repetitions of the joint W1 (see ``w1_joint``).
    n_queries : int, optional
        Number of random boxes (see ``range_query_error``).
    progress : callable, optional
        ``progress(done, total)`` after each step: the range queries on the
        real rows, then per side (synthetic, baseline) each channel's W1, the
        range queries and the joint W1, then the floor; ``total`` is
        ``2 d + 6``. The slow steps are the joint W1 and the floor (about 2 s
        each at m = 2000) and the 1-D W1 of large samples (about 1 s for
        1e6 rows).

    Returns
    -------
    dict
        JSON-serialisable (str, int, float, lists and dicts only), keys:

        ``schema`` : str
            ``"edgesynth.utility/1"``; bumped if keys change meaning.
        ``n_real``, ``n_synthetic``, ``d`` : int
            Row counts and number of channels.
        ``columns`` : list of str
            Channel names, in order.
        ``lo``, ``hi`` : list of float
            The bounds used for normalisation.
        ``ground_metric`` : str
            ``"chebyshev"`` (l-infinity) for ``w1_joint``, in normalised
            coordinates.
        ``joint_m``, ``joint_reps``, ``n_queries`` : int
            Effective subsample size (min of ``m`` and the row counts),
            repetitions and number of range queries.
        ``synthetic`` : dict
            Figures of the synthetic data:

            ``channels`` : list of dict, one per channel in column order,
                with ``name`` (str), ``w1_normalized`` (float, exact 1-D W1
                between the normalised marginals, in [0, 1]) and ``w1``
                (float, the same in the channel's units: ``w1_normalized *
                (hi - lo)``).
            ``w1_joint`` : float
                Joint W1 estimate, l-infinity metric, normalised units.
            ``range_query_error`` : float
                Mean absolute error of box-query fractions, in [0, 1].
        ``baseline`` : dict
            The same keys for ``n_synthetic`` uniform points in the box.
        ``w1_joint_floor`` : float
            Subsampling floor of ``w1_joint`` (two disjoint subsamples of the
            real data); joint figures near it cannot be told apart from a
            fresh sample of the real distribution.
    """
    rng = np.random.default_rng(rng)
    real = _points(real, "real", min_rows=2)
    d = real.shape[1]
    synth = _points(synth, "synthetic", d=d)
    names = [str(s) for s in names]
    if len(names) != d:
        raise EvaluationInputError(f"got {len(names)} column names for {d} channels")
    lo, hi = _bounds(lo, hi, d)
    m, reps, n_queries = int(m), int(reps), int(n_queries)
    if m < 1 or reps < 1 or n_queries < 1:
        raise EvaluationInputError("m, reps and n_queries must be >= 1")

    nreal = normalize(real, lo, hi)
    nsynth = normalize(synth, lo, hi)
    nbase = normalize(uniform_baseline(lo, hi, synth.shape[0], rng), lo, hi)
    width = hi - lo

    total, done = 2 * d + 6, 0

    def tick():
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    qlo, qhi = _random_boxes(rng, n_queries, d)
    real_frac = _box_fractions(nreal, qlo, qhi)
    tick()
    synthetic = _figures(nreal, nsynth, width, names, rng, m, reps, qlo, qhi, real_frac, tick)
    baseline = _figures(nreal, nbase, width, names, rng, m, reps, qlo, qhi, real_frac, tick)
    floor = _w1_floor(nreal, rng, m, reps)
    tick()

    return {
        "schema": REPORT_SCHEMA,
        "n_real": int(real.shape[0]),
        "n_synthetic": int(synth.shape[0]),
        "d": int(d),
        "columns": names,
        "lo": [float(v) for v in lo],
        "hi": [float(v) for v in hi],
        "ground_metric": "chebyshev",
        "joint_m": int(min(m, real.shape[0], synth.shape[0])),
        "joint_reps": reps,
        "n_queries": n_queries,
        "synthetic": synthetic,
        "baseline": baseline,
        "w1_joint_floor": floor,
    }
