"""Profile sketch benchmarks: error vs d (slope), fast vs exact LP (HiGHS),
naive vs fast, tails, merging k sketches, inversion time, device sizes.

    python3 benchmarks/bench_profile.py [--quick]

Appends a section to benchmarks/RESULTS.md. The accuracy sweeps draw the
device's noise law (discrete Laplace, alpha = e**-eps, as a difference of
two geometrics) with numpy; the timing and size rows use the real agent.
"""
import sys
import time
from fractions import Fraction

import common  # noqa: F401
import numpy as np
from scipy.optimize import linprog

from common import md_table, median_time, results_append
from host_tools.profile_invert import invert, kernel, naive_profile, tails, unfold

QUICK = "--quick" in sys.argv


def dlap(rng, alpha, size):
    return rng.geometric(1 - alpha, size) - rng.geometric(1 - alpha, size)


def norms(e):
    return np.abs(e).sum(), np.sqrt((e ** 2).sum()), np.abs(e).max()


def lp(ft, n, alpha, R, tau, inf=False):
    m = ft.size
    kern = kernel(alpha, tau)
    A = np.zeros((m, n + 1))
    for t in range(n + 1):
        A[t:t + 2 * R + 1, t] = kern
    if inf:  # min s, -s <= Ax - f~ <= s
        Aub = np.block([[A, -np.ones((m, 1))], [-A, -np.ones((m, 1))]])
        c = np.concatenate([np.zeros(n + 1), [1.0]])
        ns = 1
    else:
        Aub = np.block([[A, -np.eye(m)], [-A, -np.eye(m)]])
        c = np.concatenate([np.zeros(n + 1), np.ones(m)])
        ns = m
    r = linprog(c, A_ub=Aub, b_ub=np.concatenate([ft, -ft]),
                A_eq=np.concatenate([np.ones(n + 1), np.zeros(ns)])[None], b_eq=[1],
                bounds=[(0, 1)] * (n + 1) + [(0, None)] * ns, method="highs")
    return r.x[:n + 1]


def main():
    t0 = time.time()
    parts = []
    rng = np.random.default_rng(0)
    # error vs d
    reps = 4 if QUICK else 10
    ds = [2 ** k for k in range(10, 21, 2)]
    rows, l2f, l2n = [], [], []
    for d in ds:
        ef, en, lm = [], [], []
        for _ in range(reps):
            h = np.minimum(rng.poisson(2, d), 15)
            f = np.bincount(h, minlength=16) / d
            v = h + dlap(rng, np.exp(-1.0), d)
            fh, _, diag = invert(v, 15, np.exp(-1.0))
            ef.append(norms(fh - f))
            en.append(norms(naive_profile(v, 15) - f))
            lm.append(diag["lambda_min"])
        ef, en = np.mean(ef, axis=0), np.mean(en, axis=0)
        l2f.append(ef[1])
        l2n.append(en[1])
        rows.append([d, "%.4f / %.4f / %.4f" % tuple(ef), "%.4f / %.4f / %.4f" % tuple(en), "%.4f" % min(lm)])
    sf = np.polyfit(np.log(ds), np.log(l2f), 1)[0]
    sn = np.polyfit(np.log(ds), np.log(l2n), 1)[0]
    parts.append("### Error vs d: Poisson(2) counts, cap 15, eps = 1, p = 2, %d repetitions\n\n" % reps
                 + md_table(["d", "fast l1 / l2 / linf", "naive l1 / l2 / linf", "lambda_min"], rows)
                 + "\n\nlog-log slope of the l2 error in d: fast **%.3f**, naive %.3f (bias: does not fall)."
                 % (sf, sn))
    # fast vs exact LP
    rows = []
    for eps in (0.5, 1.0):
        a = np.exp(-eps)
        acc = {k: [] for k in ("p1", "p2", "pinf", "lp1", "lpinf")}
        for _ in range(10 if QUICK else 40):
            h = np.minimum(rng.poisson(3, 20000), 14)
            f = np.bincount(h, minlength=15) / h.size
            v = h + dlap(rng, a, h.size)
            for p, k in ((1, "p1"), (2, "p2"), ("inf", "pinf")):
                fh, ft, diag = invert(v, 14, a, p=p)
                acc[k].append(norms(fh - f))
            acc["lp1"].append(norms(lp(ft, 14, a, diag["radius"], diag["tau"]) - f))
            acc["lpinf"].append(norms(lp(ft, 14, a, diag["radius"], diag["tau"], inf=True) - f))
        m = {k: np.mean(v, axis=0) for k, v in acc.items()}
        rows.append([eps] + ["%.3f / %.3f / %.3f" % tuple(m[k]) for k in ("p1", "p2", "pinf", "lp1", "lpinf")]
                    + [" / ".join("%.3f" % (m[k][0] / m["lp1"][0]) for k in ("p1", "p2", "pinf"))])
    parts.append("### Fast (Algorithms 2 + 3) vs exact (P) by HiGHS: Poisson(3), d = 20,000, n = 14, %d reps\n\n"
                 "Cells: l1 / l2 / linf error to the true profile.\n\n" % (10 if QUICK else 40)
                 + md_table(["eps", "fast p=1", "fast p=2", "fast p=inf", "LP l1", "LP linf",
                             "l1 ratio to LP l1, p = 1 / 2 / inf"], rows))
    # naive bias vs fast and tails (fleet profile)
    rows = []
    for eps, d in ((1.0, 4096), (1.0, 65536), (0.5, 65536), (2.0, 4096)):
        a = np.exp(-eps)
        b0f, b0n, tf, tn = [], [], [], []
        for _ in range(reps):
            kind = rng.random(d)
            h = np.where(kind < 0.1, 0, np.where(kind < 0.9, rng.poisson(20, d), rng.poisson(60, d)))
            h = np.minimum(h, 150)
            v = h + dlap(rng, a, d)
            fh, ft, diag = invert(v, 150, a)
            nv = naive_profile(v, 150)
            b0f.append(fh[0] - np.mean(h == 0))
            b0n.append(nv[0] - np.mean(h == 0))
            tf.append(tails(ft, diag["radius"], a, [40])[40] - np.mean(h >= 40))
            tn.append(nv[40:].sum() - np.mean(h >= 40))
        rows.append([eps, d, "%+.4f ± %.4f" % (np.mean(b0f), np.std(b0f)), "%+.4f ± %.4f" % (np.mean(b0n), np.std(b0n)),
                     "%+.5f ± %.5f" % (np.mean(tf), np.std(tf)), "%+.5f ± %.5f" % (np.mean(tn), np.std(tn))])
    parts.append("### Bias: never-seen fraction f[0] and tail P[count >= 40], sensor-fleet profile "
                 "(10%% silent, 80%% Poisson(20), 10%% Poisson(60), cap 150), %d reps (mean ± sd of the error)\n\n"
                 % reps + md_table(["eps", "d", "f[0] fast", "f[0] naive", "tail telescoped", "tail naive"], rows))
    # merging k sketches of the same ids
    rows = []
    a = np.exp(-1.0)
    d = 50000
    h = rng.poisson(1, d)
    for k in (1, 2, 3):
        hk = np.minimum(h * k, 12 * k)
        v = hk + sum(dlap(rng, a, d) for _ in range(k))
        fh, _, diag = invert(v, 12 * k, a, k=k)
        e = norms(fh - np.bincount(hk, minlength=12 * k + 1) / d)
        rows.append([k, "%.1f" % diag["kappa_eff"], "%.1f" % (((1 + a) / (1 - a)) ** 2) ** k, "%.3f / %.4f / %.4f" % e])
    parts.append("### k independently noised sketches of the same ids summed (eps = 1, d = 50,000)\n\n"
                 + md_table(["k", "1/lambda_min", "kappa**k", "l1 / l2 / linf"], rows))
    # timing and the real device
    d, n = 10 ** 6, 1000
    h = np.minimum(rng.poisson(3, d), n)
    raw = np.minimum(h + dlap(rng, a, d), n)
    tm, _ = median_time(lambda: invert(unfold(raw, n, a, np.random.default_rng(1)), n, a), reps=7)
    import agent
    from host_tools.profile_plan import plan_profile
    from host_tools.frames import iter_frames
    from host_tools.profile_result import assemble_profile
    cfg = plan_profile(0, 4096, 100, Fraction(1))
    t = time.perf_counter()
    dev = agent.Agent(cfg, seed=b"bench-profile-00")
    t_noise = time.perf_counter() - t
    ids = rng.integers(0, 4096, 100000).tolist()
    t = time.perf_counter()
    for x in ids:
        dev.update((x,))
    rate = len(ids) / (time.perf_counter() - t)
    frame = dev.release()
    ta, _ = median_time(lambda: assemble_profile(list(iter_frames(frame))), reps=5)
    parts.append("### Time and size\n\n"
                 "- inversion (unfold + bincount + Algorithms 2 + 3), d = 10**6, n = 1000: **%.3f s** "
                 "(median of 7; target <= 0.2 s)\n"
                 "- device, d = 4096, cap 100, eps = 1 (CPython, exact noise): counters %d B, frame %d B, "
                 "noise draw %.2f s, %.0f updates/s; host assemble from the frame %.4f s"
                 % (tm, dev.counter_bytes(), len(frame), t_noise, rate, ta))
    results_append("\n\n".join(parts), title="bench_profile", elapsed=time.time() - t0)


if __name__ == "__main__":
    main()
