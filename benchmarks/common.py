"""Shared helpers for the edgesynth benchmarks (speed, utility, the 32 KiB target).

Nothing here is imported by the package or the tests. Every figure goes through
the real code path: ``agent.Agent`` -> ``edgesynth.mechanisms.privhp.vector.ingest`` (byte-identical
to per-item updates) -> ``Agent.release()`` -> ``edgesynth.frames.iter_frames``
-> ``edgesynth.mechanisms.privhp.generator.assemble_privhp`` -> ``Generator``.

The one shortcut is optional and explicit: ``noise="numpy"`` builds the agent
with its exact integer sampler stubbed out and then adds discrete Laplace noise
of *the same distribution* (difference of two geometrics, same alpha per level)
drawn with numpy. It makes large PMM states (2**21 counters, ~20 s of exact
draws) cheap for utility sweeps; it is never used for speed figures and never
on a device. ``noise="exact"`` (the default) uses the agent's own sampler.

W1 is always computed in normalised coordinates ``[0, 1)^d``:
* ``w1_marginal``: exact 1-D W1 between each channel of the data and the
  generator's marginal (``edgesynth.evaluation.metrics.w1_marginal_exact``), averaged
  over channels; no sampling error.
* ``w1_joint_ot``: ``edgesynth.evaluation.metrics.w1_joint`` (l-infinity, exact OT on
  m-point subsamples) with its subsampling floor.
* ``TreeBound``: a deterministic upper bound on the joint l-infinity W1 over
  the dyadic cells (a tree-metric bound, see ``TreeBound``), on all n points:
  no subsampling.
"""
import contextlib
import datetime
import math
import os
import platform
import shlex
import subprocess
import sys
import time
import zlib
from fractions import Fraction

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

import edgesynth.agent.dlap as _dlap_mod  # noqa: E402
from edgesynth import agent  # noqa: E402
from edgesynth.budget import privhp_budget  # noqa: E402
from edgesynth.evaluation.metrics import normalize, w1_joint, w1_marginal_exact  # noqa: E402
from edgesynth.frames import iter_frames  # noqa: E402
from edgesynth.mechanisms.privhp.generator import (
    Generator,  # noqa: E402
    assemble_privhp,  # noqa: E402
)
from edgesynth.mechanisms.privhp.growth import Leaves  # noqa: E402
from edgesynth.mechanisms.privhp.plan import counter_bytes  # noqa: E402
from edgesynth.mechanisms.privhp.vector import ingest  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")
CLAMP_SHARE = Fraction(1, 50)  # the planner's default share of epsilon for the clamp count


# --------------------------------------------------------------------------
# configs
# --------------------------------------------------------------------------

def make_config(d, r, k, w, j=1, sketch="cms", eps=Fraction(1), lo=None, hi=None,
                clamp_share=CLAMP_SHARE, hash_seed="bench", relation="add-remove"):
    """A PrivHP device config with the exact Eq. (23) budget split of
    ``edgesynth.budget.privhp_budget`` (same as tests/conftest.privhp_config)."""
    eps = Fraction(eps)
    lo = list(lo) if lo is not None else [0.0] * d
    hi = list(hi) if hi is not None else [1.0] * d
    q, sigma, clamp_p = privhp_budget(eps, d, k, r, j, clamp_share)
    return {"format": 1, "epsilon": [eps.numerator, eps.denominator], "relation": relation,
            "mechanisms": [{"kind": "privhp", "names": ["x%d" % i for i in range(d)],
                            "lo": lo, "hi": hi, "r": r, "k": k, "w": w, "j": j,
                            "sketch": sketch, "hash_seed": hash_seed, "q": q,
                            "sigma": sigma, "clamp_p": clamp_p}]}


def pmm_config(d, r, eps=Fraction(1), **kw):
    """PMM = PrivHP with k = 2**r: a complete noisy tree, no sketches."""
    return make_config(d, r, 1 << r, 1, 1, eps=eps, **kw)


def depth_for(eps, n, d=1):
    """r = ceil(log2(eps * n)) (the depth of the PrivHP paper's Corollary 1, §9), at least d, at most 29."""
    return int(min(29, max(d, math.ceil(math.log2(float(eps) * n)))))


def mech_params(cfg):
    m = cfg["mechanisms"][0]
    return m["r"], m["k"], m["w"], m["j"], m["sketch"]


def config_bytes(cfg):
    """Exact device bytes of counters + hash parameters (edgesynth.mechanisms.privhp.plan.counter_bytes)."""
    r, k, w, j, sk = mech_params(cfg)
    return counter_bytes(r, k, w, j, sk)


def pmm_bytes(r):
    return 4 * ((1 << (r + 1)) - 1)


# --------------------------------------------------------------------------
# agent construction, release, generator
# --------------------------------------------------------------------------

_WARM = []


def _warm_imports():
    """Build one tiny agent so that every lazily imported construction module
    is loaded (and has bound the real sampler) before any patching."""
    if not _WARM:
        agent.Agent(make_config(1, 2, 2, 4, 1), seed=b"warm-up-seed-000")
        _WARM.append(True)


@contextlib.contextmanager
def _no_exact_noise(calls):
    """Replace the exact sampler by ``0`` in every loaded agent module that
    bound it (robust to the sampler being imported by name anywhere); every
    call is counted in ``calls[0]``."""
    _warm_imports()
    real = _dlap_mod.discrete_laplace

    def zero(rng, num, den):
        calls[0] += 1
        return 0

    patched = []
    for name, mod in list(sys.modules.items()):
        # the agent is the package's edgesynth.agent (bare "agent" when run from agent/ itself)
        if (name in ("agent", "edgesynth.agent") or name.startswith(("agent.", "edgesynth.agent."))) and \
                getattr(mod, "discrete_laplace", None) is real:
            mod.discrete_laplace = zero
            patched.append(mod)
    try:
        yield
    finally:
        for mod in patched:
            mod.discrete_laplace = real


def dlap_numpy(rng, alpha, size):
    """Discrete Laplace P[z] = (1-a)/(1+a) a^|z|, as the difference of two
    geometrics on {0, 1, ...} with success probability 1 - a."""
    p = 1.0 - alpha
    return (rng.geometric(p, size) - rng.geometric(p, size)).astype(np.int64)


def n_noise_draws(cfg):
    """Noise draws the agent makes for ``cfg``: every counter, plus the clamp count."""
    total = 0
    for m in cfg["mechanisms"]:
        L = min(m["k"].bit_length() - 1, m["r"])
        total += (1 << (L + 1)) - 1 + (m["r"] - L) * m["j"] * m["w"] + (1 if m["clamp_p"] else 0)
    return total


def add_numpy_noise(state, rng):
    """Add discrete Laplace noise of the agent's per-level scales to a decoded
    host-side PrivHP state (edgesynth.mechanisms.privhp.wire.PrivHPState, wire layout:
    ``tree`` heap order, ``sketches`` (r-L, j, w), ``clamp``)."""
    q = state.q * state.factor
    for lvl in range(state.L + 1):
        off = (1 << lvl) - 1
        state.tree[off:off + (1 << lvl)] += dlap_numpy(rng, math.exp(-state.sigma[lvl] / q), 1 << lvl)
    for s, lvl in enumerate(range(state.L + 1, state.r + 1)):
        a = math.exp(-state.sigma[lvl] / (state.j * q))
        state.sketches[s] += dlap_numpy(rng, a, state.sketches[s].size).reshape(state.sketches[s].shape)
    if state.clamp_p:
        state.clamp += int(dlap_numpy(rng, math.exp(-state.clamp_p / q), 1)[0])


def build_agent(cfg, seed, noise="exact"):
    """``agent.Agent(cfg, seed=...)``. With ``noise`` "numpy" or "none" every
    exact draw is replaced by 0 (checked by counting the draws); the caller
    adds numpy noise to the decoded state (see ``privhp_generator``)."""
    if isinstance(seed, str):
        seed = seed.encode()
    if noise == "exact":
        return agent.Agent(cfg, seed=seed)
    if noise not in ("numpy", "none"):
        raise ValueError("noise must be 'exact', 'numpy' or 'none'")
    calls = [0]
    with _no_exact_noise(calls):
        a = agent.Agent(cfg, seed=seed)
    if calls[0] != n_noise_draws(cfg):
        raise RuntimeError("zero-noise agent: %d stubbed draws, expected %d; the agent now draws noise "
                           "another way and benchmarks/common.py needs updating (use exact noise)"
                           % (calls[0], n_noise_draws(cfg)))
    return a


def privhp_generator(cfg, data, seed, noise="exact"):
    """Generator (and frame size) of an agent that saw ``data`` (n, d).

    ``noise``: "exact" (the agent's sampler), "numpy" (zero-noise agent, then
    the same discrete Laplace distribution added with numpy to the decoded
    state before assembly), "none" (non-private ablation: no noise at all)."""
    a = build_agent(cfg, seed, noise)
    ingest(a.mechs[0], data)
    frame = a.release()
    rels = list(iter_frames(frame))
    if noise == "numpy":
        if isinstance(seed, str):
            seed = seed.encode()
        rng = np.random.default_rng(zlib.crc32(seed))
        for rel in rels:
            for m in rel.mechs:
                add_numpy_noise(m, rng)
    gen = assemble_privhp(rels)
    return gen, len(frame)


# --------------------------------------------------------------------------
# dyadic codes, the non-private histogram T_X, and the tree-metric W1 bound
# --------------------------------------------------------------------------

def coord_bits(d, r):
    """Bits of each channel after r cyclic splits: B_i = floor((r-1-i)/d) + 1."""
    return [((r - 1 - i) // d + 1) if i < r else 0 for i in range(d)]


def morton_codes(xn, r):
    """Level-r path (heap order bits, the agent's quantiser) of points in [0,1)^d."""
    xn = np.asarray(xn, dtype=np.float64)
    n, d = xn.shape
    bits = coord_bits(d, r)
    q = []
    for i in range(d):
        qi = np.floor(xn[:, i] * float(1 << bits[i])).astype(np.int64)
        np.clip(qi, 0, (1 << bits[i]) - 1, out=qi)
        q.append(qi)
    code = np.zeros(n, dtype=np.int64)
    for lvl in range(1, r + 1):
        i = (lvl - 1) % d
        t = (lvl - 1) // d
        code = (code << 1) | ((q[i] >> (bits[i] - 1 - t)) & 1)
    return code


def histogram_generator(xn, r):
    """T_X: exact counts of the occupied depth-r cells, uniform inside each cell
    (non-private; the resolution floor of PrivHP and PMM at depth r)."""
    d = xn.shape[1]
    codes, counts = np.unique(morton_codes(xn, r), return_counts=True)
    leaves = Leaves(np.full(codes.size, r), codes, counts.astype(np.float64))
    return Generator(["x%d" % i for i in range(d)], [0.0] * d, [1.0] * d, leaves,
                     {"mechanism": "exact-histogram"})


def topk_generator(xn, r, k):
    """T_topk: exact counts with exact top-k pruning (growth of Alg. 3 on true
    counts: complete tree to L = min(floor(log2 k), r), then the k largest
    candidates per level stay hot, ties to the smaller path). Non-private: the
    pruning floor of PrivHP at (r, k)."""
    d = xn.shape[1]
    L = min(int(k).bit_length() - 1, r)
    codes = np.sort(morton_codes(xn, r))

    def counts(lvl, nodes):
        pre = codes >> (r - lvl)
        return (np.searchsorted(pre, nodes, side="right") - np.searchsorted(pre, nodes, side="left")
                ).astype(np.float64)

    hot = np.arange(1 << L, dtype=np.int64)
    levels, paths, masses = [], [], []
    if L == r:
        levels.append(np.full(hot.size, r))
        paths.append(hot)
        masses.append(counts(r, hot))
    for lvl in range(L + 1, r + 1):
        cand = np.column_stack((2 * hot, 2 * hot + 1)).ravel()
        c = counts(lvl, cand)
        keep = np.zeros(cand.size, dtype=bool)
        if lvl < r:
            if cand.size <= k:
                keep[:] = True
            else:
                keep[np.lexsort((cand, -c))[:k]] = True
        levels.append(np.full(int((~keep).sum()), lvl))
        paths.append(cand[~keep])
        masses.append(c[~keep])
        hot = cand[keep]
    leaves = Leaves(np.concatenate(levels), np.concatenate(paths), np.concatenate(masses))
    return Generator(["x%d" % i for i in range(d)], [0.0] * d, [1.0] * d, leaves,
                     {"mechanism": "exact-topk"})


class TreeBound:
    """Upper bound on the joint l-infinity W1 between data and a leaf partition:

        W1 <= gamma_R + 1/2 sum_{l=1..R} (gamma_{l-1} - gamma_l) sum_theta |mu(theta) - nu(theta)|

    with gamma_l = 2**-floor(l/d), the diameter of a level-l cell: the cost
    diam(smallest common cell) dominates the l-inf distance and is a tree
    metric (up to a constant), whose W1 has this closed form. All n points are used;
    nu spreads each leaf's mass uniformly over its cell. Deterministic.
    """

    def __init__(self, xn, R):
        self.n, self.d = xn.shape
        self.R = R
        self.codes = np.sort(morton_codes(xn, R))

    def gamma(self, lvl):
        return 2.0 ** -(lvl // self.d)

    def __call__(self, leaves, prob):
        R = self.R
        lv = np.asarray(leaves.level, dtype=np.int64)
        if np.any(lv > R):
            raise ValueError("leaves deeper than the bound's depth R")
        start = np.asarray(leaves.path, dtype=np.int64) << (R - lv)
        size = (np.int64(1) << (R - lv)).astype(np.float64)
        order = np.argsort(start, kind="stable")
        start, size, m = start[order], size[order], np.asarray(prob, dtype=np.float64)[order]
        cum = np.concatenate(([0.0], np.cumsum(m)))

        def F(c):  # generator mass of codes [0, c)
            i = np.searchsorted(start, c, side="right") - 1
            ok = i >= 0
            ii = np.where(ok, i, 0)
            frac = np.minimum((c - start[ii]) / size[ii], 1.0)
            return np.where(ok, cum[ii] + m[ii] * frac, 0.0)

        total = self.gamma(R)
        codes = self.codes
        for lvl in range(1, R + 1):
            wgt = 0.5 * (self.gamma(lvl - 1) - self.gamma(lvl))
            if wgt == 0.0:
                continue
            pre = codes >> (R - lvl)
            cut = np.flatnonzero(np.diff(pre)) + 1
            first = np.concatenate(([0], cut))
            u = pre[first]
            mu = np.diff(np.concatenate((first, [pre.size]))) / self.n
            nu = F((u + 1) << (R - lvl)) - F(u << (R - lvl))
            total += wgt * (np.abs(mu - nu).sum() + max(0.0, 1.0 - nu.sum()))
        return float(total)


# --------------------------------------------------------------------------
# W1 figures
# --------------------------------------------------------------------------

def norm_boxes(gen):
    """The leaves' boxes in normalised coordinates; ``gen`` is a PrivHP model
    or what es.assemble returns (its ``.model``)."""
    gen = getattr(gen, "model", gen)
    return normalize(gen.box_lo, gen.lo, gen.hi), normalize(gen.box_hi, gen.lo, gen.hi)


def w1_marginal(gen, xn):
    """Exact marginal W1 averaged over channels (normalised coordinates)."""
    blo, bhi = norm_boxes(gen)
    prob = getattr(gen, "model", gen).prob
    return float(np.mean([w1_marginal_exact(xn[:, c], blo[:, c], bhi[:, c], prob)
                          for c in range(xn.shape[1])]))


def w1_joint_ot(gen, xn, rng, m=2000):
    """(w1, floor) of edgesynth.evaluation.metrics.w1_joint on m-point subsamples (one rep)."""
    synth = normalize(gen.sample(m, rng), gen.lo, gen.hi)
    out = w1_joint(xn, synth, rng, m=m, reps=1)
    return out["w1"], out["floor"]


# --------------------------------------------------------------------------
# statistics and formatting
# --------------------------------------------------------------------------

def mean_ci(values):
    """(mean, half-width of the 95% t confidence interval)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size < 2:
        return float(v.mean()), float("nan")
    from scipy.stats import t
    hw = t.ppf(0.975, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size)
    return float(v.mean()), float(hw)


def fmt_ci(values, digits=3):
    mu, hw = mean_ci(values)
    if not math.isfinite(hw):
        return "%.*g" % (digits, mu)
    return "%.*g ± %.2g" % (digits, mu, hw)


def fmt_bytes(b):
    if b >= 1 << 20:
        return "%.2f MiB" % (b / (1 << 20))
    if b >= 1 << 10:
        return "%.1f KiB" % (b / 1024)
    return "%d B" % b


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def median_time(fn, reps=5):
    """Median wall time of ``fn()`` over ``reps`` calls, and the list of times."""
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)), ts


# --------------------------------------------------------------------------
# RESULTS.md
# --------------------------------------------------------------------------

def _cpu_model():
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_head():
    try:
        out = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
        head = out.stdout.strip() or "unknown"
        return head + (" (+ uncommitted changes)" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def machine_info():
    import scipy
    try:
        load = "%.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        load = "n/a"
    return {
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "loadavg": load,
        "commit": _git_head(),
    }


def command_line():
    return " ".join(shlex.quote(a) for a in [os.path.basename(sys.executable)] +
                    [os.path.relpath(sys.argv[0], ROOT) if sys.argv and sys.argv[0] else ""] +
                    sys.argv[1:])


def results_append(section_markdown, title=None, elapsed=None, info=None):
    """Append a dated section (command, machine, then ``section_markdown``) to RESULTS.md."""
    info = info or machine_info()
    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    head = "## %s (%s)" % (title or os.path.basename(sys.argv[0]), now)
    lines = [head, "",
             "- command: `%s`" % command_line(),
             "- machine: %s; CPU %s; %s cores; Python %s, numpy %s, scipy %s; load average at start %s"
             % (info["platform"], info["cpu"], info["cores"], info["python"], info["numpy"],
                info["scipy"], info["loadavg"]),
             "- code: commit %s" % info["commit"]]
    if elapsed is not None:
        lines.append("- wall time of the run: %.0f s" % elapsed)
    lines += ["", section_markdown.strip(), "", ""]
    new = not os.path.exists(RESULTS) or os.path.getsize(RESULTS) == 0
    with open(RESULTS, "a", encoding="utf-8") as fh:
        if new:
            fh.write("# edgesynth benchmark results\n\nAppended by the scripts in benchmarks/ "
                     "(see benchmarks/README.md). Newest last. Timings are from a shared 2-core "
                     "machine: compare ratios measured within one run.\n\n")
        fh.write("\n".join(lines))


def selfcheck(seed=0):
    """Cheap consistency checks of the helpers against the package (run in --quick)."""
    rng = np.random.default_rng(seed)
    # numpy discrete Laplace matches the agent's variance formula
    from edgesynth.noise import dlap_variance
    a = math.exp(-1 / 20.0)
    z = dlap_numpy(rng, a, 200000)
    want = dlap_variance(20, 1)
    assert abs(z.var() / want - 1) < 0.03, (z.var(), want)
    # Morton codes agree with the host's leaf boxes (every point in its own box)
    for d, r in ((1, 9), (2, 11), (2, 12)):
        x = rng.random((5000, d))
        g = histogram_generator(x, r)
        code = morton_codes(x, r)
        idx = np.searchsorted(g.leaves.path, code)
        assert np.all(g.leaves.path[idx] == code)
        assert np.all((g.box_lo[idx] <= x) & (x < g.box_hi[idx]))
    # numpy noise on the decoded state has the exact sampler's spread, level by level
    cfg = make_config(2, 10, 16, 64, 1)
    zero = list(iter_frames(build_agent(cfg, b"s" * 16, "none").release()))[0].mechs[0]
    assert not zero.tree.any() and not zero.sketches.any()
    ex = [list(iter_frames(build_agent(cfg, b"s%015d" % i, "exact").release()))[0].mechs[0]
          for i in range(40)]
    nz = []
    for i in range(40):
        st = list(iter_frames(build_agent(cfg, b"s" * 16, "none").release()))[0].mechs[0]
        add_numpy_noise(st, rng)
        nz.append(st)
    for lvl in (0, 4):  # tree levels: compare pooled variances
        off = (1 << lvl) - 1
        a_ex = np.concatenate([s.tree[off:off + (1 << lvl)] for s in ex]).var()
        a_nz = np.concatenate([s.tree[off:off + (1 << lvl)] for s in nz]).var()
        want = ex[0].tree_var[lvl]
        assert 0.5 < a_ex / want < 2 and 0.5 < a_nz / want < 2, (lvl, a_ex, a_nz, want)
    sk_ex = np.concatenate([s.sketches.ravel() for s in ex]).var()
    sk_nz = np.concatenate([s.sketches.ravel() for s in nz]).var()
    assert abs(sk_nz / sk_ex - 1) < 0.1, (sk_ex, sk_nz)
    return True
