"""Profile inversion (the profile reconstruction paper, Wu and Pagh, §4;
docs/mechanisms/profile.md).

From d noisy counters h + Z (Z discrete Laplace with ratio alpha, saturated at
the public cap U) to the profile f[t] = (ids seen exactly t times) / d,
t = 0..n with n = U (k U for k summed sketches):

1. unfold saturated counters to U + Geo(alpha) (§4.1, Lemma 4.1: memorylessness);
2. noisy profile f~ over [-R, n + R], R = k tau, tau = ceil(ln(4d/beta)/eps);
3. Algorithm 2 (Lemma 4.3, Theorem 4.5): x0 = M^-1 f~ by FFT (M the circulant of the truncated noise
   pmf), then the min-norm correction that puts mass 1 on [0, n], p in
   {1, 2, inf}; lambda_min of M is checked;
4. Algorithm 3 (Lemma 4.4, Theorem 4.7): clip to [0, 1] and project onto the simplex.

``solve_exact`` solves the constrained problem (P) itself (dense LP/QP): the
reference against which Algorithms 2 + 3 are validated on small cases.

Tails P[count >= a] come from the telescoped three-tap inverse of the
untruncated kernel (consistent with the paper's Lemma F.1): unbiased, with an error that does not grow with
the width of the range. The naive estimate (the empirical profile of the
clipped noisy counters) is returned beside it: its bias does not shrink with d.
All of this is post-processing of the release.
"""
import math

import numpy as np

from edgesynth.errors import InversionError

DEFAULT_BETA = 1e-3
# p = 2: no p is best everywhere, but over eps 0.5-2 and d 5,000-80,000 (bench_profile,
# docs/mechanisms/profile.md) its l1 error is at most about 3% above the best p's (p = 1 and
# p = inf up to about 5%), and its rounding is non-expansive in l2 (the paper's Lemma 4.9).
DEFAULT_P = 2


def unfold(counts, cap, alpha, rng):
    """Counters at the cap become cap + G, G ~ Geo(alpha) on {0, 1, ...}:
    then each has the law of the unsaturated h + Z (Lemma 4.1)."""
    out = np.asarray(counts, dtype=np.int64).copy()
    sat = out >= cap
    out[sat] = cap + rng.geometric(1.0 - alpha, int(sat.sum())) - 1
    return out


def truncation(d, alpha, beta=DEFAULT_BETA):
    """tau = ceil(ln(4d / beta) / eps): all d noises are within tau w.p. >= 1 - beta/2."""
    return max(1, math.ceil(math.log(4 * d / beta) / -math.log(alpha)))


def inversion_need(d, alpha, n, k=1, beta=DEFAULT_BETA):
    """Bytes of host memory that assembling d counters (k summed sketches,
    largest count n = k cap, noise ratio alpha) takes, from those public
    parameters alone: 16 float64 arrays of the padded length n + 2 k tau + 1
    (the FFT solves: 12 traced by tracemalloc, the rest the FFT's scratch,
    seen in the RSS), 6 of d (unfolding, clipping), the statistics' lists of
    n + 1 Python floats and 1 MiB (tests/test_hostile.py checks it)."""
    m = n + 2 * k * truncation(d, alpha, beta) + 1
    return 8 * (16 * m + 6 * d) + 40 * (n + 1) + (1 << 20)


def profile_what(d, cap, eps, alpha, k=1, beta=DEFAULT_BETA):
    """How refusals name a profile configuration: ids, cap, epsilon and the
    noise radius tau its inversion pads by."""
    return "a profile of %d ids with cap %d and epsilon %s (noise radius tau = %d%s)" % (
        d, cap, eps, truncation(d, alpha, beta), ", %d summed sketches" % k if k > 1 else "")


def kernel(alpha, tau, k=1):
    """The k-fold convolution of the discrete Laplace pmf truncated at tau,
    normalised; length 2 k tau + 1, centred."""
    j = np.arange(-tau, tau + 1)
    base = alpha ** np.abs(j)
    base /= base.sum()
    out = base
    for _ in range(k - 1):
        out = np.convolve(out, base)
    return out


def invert(values, n, alpha, beta=DEFAULT_BETA, p=DEFAULT_P, k=1):
    """Algorithms 2 + 3 on unfolded noisy counts ``values`` (length d).

    Returns (f-hat over t = 0..n, f~ over t = -R..n+R, diagnostics dict).
    The diagnostics include ``delta`` (the mass M^-1 f~ puts outside [0, n])
    and ``residual`` = ||M f* - f~||_p for Algorithm 2's output f* (Lemma 4.3):
    the optimum |delta| / ||w||_q of the relaxation (P2), hence a
    lower bound on the optimum of (P).
    Raises InversionError when lambda_min <= 0.
    """
    # scipy.fft takes ~0.25 s to import: loaded by assembly, not by every
    # importer of the mechanism registry (frames, ingest, the CLI)
    from scipy.fft import irfft, next_fast_len, rfft
    values = np.asarray(values, dtype=np.int64)
    d = values.size
    tau = truncation(d, alpha, beta)
    R = k * tau
    m = next_fast_len(n + 2 * R + 1, real=True)
    ft = np.bincount(np.clip(values, -R, n + R) + R, minlength=m).astype(float) / d
    kern = kernel(alpha, tau, k)
    c = np.zeros(m)
    c[:R + 1] = kern[R:]
    c[m - R:] = kern[:R]
    lam = rfft(c).real
    lam_min = float(lam.min())
    if not lam_min > 0:
        raise InversionError("noise matrix not invertible (lambda_min = %.3g): raise beta or epsilon" % lam_min)

    def solve(y):
        return irfft(rfft(y) / lam, n=m)

    x0 = solve(ft)
    b = np.zeros(m)
    b[R:R + n + 1] = 1.0
    w = solve(b)
    delta = 1.0 - float(b @ x0)
    if p == 2:
        y = delta * w / float(w @ w)
    elif p == 1:
        y = np.zeros(m)
        ks = int(np.argmax(np.abs(w)))
        y[ks] = delta / w[ks]
    elif p == "inf":
        y = delta * np.sign(w) / float(np.abs(w).sum())
    else:
        raise ValueError("p must be 1, 2 or 'inf'")
    fstar = x0 + solve(y)
    fhat = project_simplex(np.clip(fstar[R:R + n + 1], 0.0, 1.0))
    diag = {"tau": tau, "radius": R, "m": m, "lambda_min": lam_min, "kappa_eff": 1.0 / lam_min,
            # M f* - f~ = y: its norm is the (P2) objective Algorithm 2 reached
            "delta": delta, "residual": float(np.linalg.norm(y, np.inf if p == "inf" else p))}
    return fhat, ft[:n + 2 * R + 1], diag


def noise_columns(alpha, tau, n, k=1):
    """Columns t = 0..n of M as a dense (n + 2R + 1) x (n + 1) matrix, rows
    t = -R..n+R (R = k tau): column t is the noise pmf centred at t, which
    never wraps around, so this is M restricted to profiles supported on [0, n]."""
    kern = kernel(alpha, tau, k)
    R = k * tau
    A = np.zeros((n + 2 * R + 1, n + 1))
    for t in range(n + 1):
        A[t:t + 2 * R + 1, t] = kern
    return A


def fit_norm(A, y, p, eq, bounds):
    """min ||A x - y||_p over x with eq . x = 1 and ``bounds`` (one (lo, hi)
    pair for every coordinate, None for unbounded), p in {1, 2, 'inf'}.

    p = 1 and inf are LPs with slack variables, solved by HiGHS; p = 2 is a
    least-squares QP, solved by SLSQP on the smooth half squared objective with
    its exact gradient (on (P) it agrees with a projected-gradient solve to
    ~1e-7 in x; it stops within ~1e-5 relative of the optimal value).
    Dense: for validation on small problems (rows x columns up to ~1e6).
    Returns (x, optimal objective value); raises RuntimeError if a solver fails.
    """
    from scipy.optimize import linprog, minimize  # validation only: plan/assemble need not load it (~0.1 s)
    rows, cols = A.shape
    if p == 2:
        H, g = A.T @ A, A.T @ y
        r = minimize(lambda x: 0.5 * x @ H @ x - g @ x, np.full(cols, 1.0 / eq.sum()), jac=lambda x: H @ x - g,
                     method="SLSQP", bounds=[bounds] * cols,
                     constraints=[{"type": "eq", "fun": lambda x: eq @ x - 1.0, "jac": lambda x: eq}],
                     options={"ftol": 1e-15, "maxiter": 1000})
        if not r.success:
            raise RuntimeError("SLSQP: %s" % r.message)
        return r.x, float(np.linalg.norm(A @ r.x - y))
    if p not in (1, "inf"):
        raise ValueError("p must be 1, 2 or 'inf'")
    # |A x - y| <= s elementwise: one slack per row for l1, one shared slack for l-infinity
    S = np.eye(rows) if p == 1 else np.ones((rows, 1))
    ns = S.shape[1]
    r = linprog(np.concatenate([np.zeros(cols), np.ones(ns)]), A_ub=np.block([[A, -S], [-A, -S]]),
                b_ub=np.concatenate([y, -y]), A_eq=np.concatenate([eq, np.zeros(ns)])[None], b_eq=[1.0],
                bounds=[bounds] * cols + [(0, None)] * ns, method="highs")
    if r.status != 0:
        raise RuntimeError("HiGHS: %s" % r.message)
    return r.x[:cols], float(r.fun)


def solve_exact(ft, n, alpha, tau, p=DEFAULT_P, k=1):
    """The constrained problem (P) of the paper's §4.2 solved exactly (as the LP
    approach of Dwork et al. 2010 would, in any norm p): x on
    the simplex over t = 0..n (0 <= x <= 1, sum 1, zero outside [0, n])
    minimising ||M x - f~||_p, f~ over t = -R..n+R as ``invert`` returns it.

    Same kernel, radius and norm as ``invert``, so the two solve the same
    objective; (P2) relaxes (P), hence residual <= the optimum here <= the
    objective of Algorithm 3's output. Returns (x, optimal objective value).
    """
    return fit_norm(noise_columns(alpha, tau, n, k), np.asarray(ft, dtype=float), p, np.ones(n + 1), (0.0, 1.0))


def project_simplex(g):
    """Euclidean projection onto the probability simplex (Algorithm 3's
    water-filling; also covers a sum below 1 from rounding)."""
    u = np.sort(g)[::-1]
    css = np.cumsum(u) - 1.0
    r = np.nonzero(u - css / np.arange(1, u.size + 1) > 0)[0][-1]
    theta = css[r] / (r + 1)
    return np.maximum(g - theta, 0.0)


def tails(ft, R, alpha, thresholds):
    """P[count >= a] for each a by the telescoped three-tap estimator on f~
    (indexed from t = -R): sum_{t>=a} f~[t] + alpha/(1-alpha)^2 (f~[a] - f~[a-1])."""
    ft = np.asarray(ft, dtype=float)
    suffix = np.cumsum(ft[::-1])[::-1]
    g = alpha / (1.0 - alpha) ** 2
    return {int(a): float(suffix[a + R] + g * (ft[a + R] - ft[a + R - 1])) for a in thresholds}


def naive_profile(counts, n):
    """The empirical profile of the noisy counters clipped to [0, n]."""
    return np.bincount(np.clip(np.asarray(counts, dtype=np.int64), 0, n), minlength=n + 1) / len(counts)


def thresholds(n):
    """1, 2, 5, 10, 20, 50, ... up to n."""
    out, base = [], 1
    while base <= n:
        out.extend(a for a in (base, 2 * base, 5 * base) if a <= n)
        base *= 10
    return out
