"""PrivHP device state: a noisy complete tree plus one private sketch per deeper level.

Holland et al., "Private Synthetic Data Generation in Small Memory", Alg. 1-2,
with the corrections of notes/privhp.md. The domain is a public box split into
a binary hierarchy of depth r; level l (1-based) halves coordinate (l-1) mod d.
Levels 0..L (L = min(floor(log2 k), r)) keep one counter per node; levels
L+1..r keep a j x w count-min (or count) sketch keyed by the heap id 2**l + v.

Noise is drawn here, at construction, before any reading (privacy rule 2):
discrete Laplace of scale q/p_l per tree counter and j*q/p_l per sketch cell
(times 2 for replace-one neighbours), so the state is private at rest.
docs/privacy.md states the argument.

Quantisation is an exact binary long division of (x - lo) by (hi - lo), one bit
per level, fused with the tree walk: the path bits are exactly the bits of
floor((x - lo) * 2**B_i / (hi - lo)) and every intermediate stays below
2 * (hi - lo). With integer bounds and integer readings (ADC codes) the update
allocates nothing and never leaves 30-bit small ints.
"""
from array import array

from agent.dlap import discrete_laplace
from agent.errors import ConfigError
from agent.hashing import MAX_WIDTH, PARAMS_PER_HASH, P, derive_params
from agent.msgpack_out import key

MAX_DEPTH = 29           # heap ids 2**l + v stay below 2**30
MAX_INT_SPAN = (1 << 29) - 1  # integer bounds: 2 * remainder stays below 2**30
MAX_COUNTERS = 1 << 24   # 64 MiB of int32: far beyond any device, still a sanity cap
NOISE_LIMIT = 1 << 29    # a draw this large has probability below 1e-1000 here
MAX_Q = 1 << 48

KIND = "privhp"
SKETCHES = ("cms", "cs")

_K = {}
for _name in ("budget", "clamp", "clamp_p", "hash", "hash_p", "hi", "j", "k", "kind",
              "lo", "names", "q", "r", "sigma", "sketch", "sketches", "tree", "w"):
    _K[_name] = key(_name)


def _int(spec, name, lo, hi):
    v = spec.get(name)
    if not isinstance(v, int) or isinstance(v, bool) or v < lo or v > hi:
        raise ConfigError("privhp.%s must be an integer in [%d, %d], got %r" % (name, lo, hi, v))
    return v


def _number(v, what):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ConfigError("%s must be a number, got %r" % (what, v))
    if isinstance(v, float) and not (v - v == 0.0):  # rejects nan and +-inf
        raise ConfigError("%s must be finite, got %r" % (what, v))
    return v


def floor_log2(k):
    """floor(log2 k) for an integer k >= 1, without int.bit_length (absent on MicroPython)."""
    n = 0
    while k > 1:
        k >>= 1
        n += 1
    return n


def is_pow2(n):
    return n >= 1 and (n & (n - 1)) == 0


class PrivHP:
    """Noisy PrivHP state for one stream of d-channel readings.

    ``spec`` is the mechanism entry of the device config (docs/config.md).
    ``rng`` provides ``below(m)``; ``factor`` multiplies every noise scale
    (1 for add/remove-one neighbours, 2 for replace-one).
    """

    kind = KIND

    def __init__(self, spec, rng, factor=1):
        self._parse(spec)
        self._alloc()
        self._draw_noise(rng, factor)

    # ----------------------------------------------------------------- config
    def _parse(self, spec):
        lo = spec.get("lo")
        hi = spec.get("hi")
        if not isinstance(lo, list) or not isinstance(hi, list) or not lo or len(lo) != len(hi):
            raise ConfigError("privhp.lo and privhp.hi must be lists of equal length >= 1")
        d = len(lo)
        names = spec.get("names")
        if names is None:
            names = ["x%d" % i for i in range(d)]
        if not isinstance(names, list) or len(names) != d or \
                not all(isinstance(s, str) and 0 < len(s) <= 64 for s in names):
            raise ConfigError("privhp.names must list one short name per channel")
        span = []
        for i in range(d):
            a = _number(lo[i], "privhp.lo[%d]" % i)
            b = _number(hi[i], "privhp.hi[%d]" % i)
            if not a < b:
                raise ConfigError("channel %d: lo (%r) must be below hi (%r)" % (i, a, b))
            s = b - a
            if isinstance(s, int) and s > MAX_INT_SPAN:
                raise ConfigError("channel %d: integer span %d exceeds 2**29 - 1" % (i, s))
            if isinstance(s, float) and not (s - s == 0.0):
                raise ConfigError("channel %d: span overflows" % i)
            span.append(s)
        r = _int(spec, "r", 1, MAX_DEPTH)
        k = _int(spec, "k", 1, 1 << 30)
        w = _int(spec, "w", 1, MAX_WIDTH)
        if not is_pow2(w):
            raise ConfigError("privhp.w must be a power of two, got %d" % w)
        j = _int(spec, "j", 1, 16)
        sk = spec.get("sketch", "cms")
        if sk not in SKETCHES:
            raise ConfigError("privhp.sketch must be 'cms' or 'cs', got %r" % (sk,))
        q = _int(spec, "q", 1, MAX_Q)
        sigma = spec.get("sigma")
        if not isinstance(sigma, list) or len(sigma) != r + 1:
            raise ConfigError("privhp.sigma must list r+1 = %d integer budgets" % (r + 1))
        for i in range(r + 1):
            s = sigma[i]
            if not isinstance(s, int) or isinstance(s, bool) or s < 1 or s > MAX_Q:
                raise ConfigError("privhp.sigma[%d] must be a positive integer, got %r" % (i, s))
        clamp_p = _int(spec, "clamp_p", 0, MAX_Q)
        seed = spec.get("hash_seed")
        if not isinstance(seed, str) or not 0 < len(seed) <= 64:
            raise ConfigError("privhp.hash_seed must be a public string of 1..64 characters")
        L = floor_log2(k)
        if L > r:
            L = r
        n_counters = (1 << (L + 1)) - 1 + (r - L) * j * w
        if n_counters > MAX_COUNTERS:
            raise ConfigError("privhp needs %d counters, more than any device holds" % n_counters)
        self.d, self.r, self.k, self.w, self.j, self.L = d, r, k, w, j, L
        self.sketch, self.q, self.sigma, self.clamp_p = sk, q, sigma, clamp_p
        self.names, self.lo, self.hi, self.span = names, lo, hi, span
        self.hash_seed = seed
        self._name_bytes = [s.encode() for s in names]

    def budget(self):
        """(numerator, denominator) of the epsilon this state spends."""
        total = self.clamp_p
        for s in self.sigma:
            total += s
        return total, self.q

    # ------------------------------------------------------------------ state
    def _alloc(self):
        d, r, L, j, w = self.d, self.r, self.L, self.j, self.w
        # array(range(n)) allocates the table once, without a same-size
        # temporary; the noise draw overwrites every cell
        self.tree = array("i", range((1 << (L + 1)) - 1))
        self.sketches = array("i", range((r - L) * j * w))
        per = PARAMS_PER_HASH * (2 if self.sketch == "cs" else 1)
        self.hash = array("H", derive_params(self.hash_seed.encode(), (r - L) * j * per))
        self.coord = bytearray(r + 1)  # level -> channel it splits
        for lvl in range(1, r + 1):
            self.coord[lvl] = (lvl - 1) % d
        self._rem = [0] * d
        self._wmask = w - 1
        self.clamp = 0
        self._plan_levels()

    def _draw_noise(self, rng, factor):
        q = self.q * factor
        tree, sk = self.tree, self.sketches
        idx = 0
        for lvl in range(self.L + 1):
            p = self.sigma[lvl]
            for _ in range(1 << lvl):
                tree[idx] = _bounded(discrete_laplace(rng, q, p))
                idx += 1
        idx = 0
        cells = self.j * self.w
        for lvl in range(self.L + 1, self.r + 1):
            p = self.sigma[lvl]
            for _ in range(cells):
                sk[idx] = _bounded(discrete_laplace(rng, self.j * q, p))
                idx += 1
        if self.clamp_p:
            self.clamp = _bounded(discrete_laplace(rng, q, self.clamp_p))

    # ----------------------------------------------------------------- update
    def _plan_levels(self):
        """Per-level tuples the update loop unpacks: no index arithmetic there.

        Tree level l: (channel, 2**l - 1). Sketch level l: (channel, 2**l, rows)
        with rows ((b, a1, a2, a3, cell base[, sign b, a1, a2, a3]), ...).
        """
        coord = self.coord
        self._tree_levels = [(coord[l], (1 << l) - 1) for l in range(1, self.L + 1)]
        per = PARAMS_PER_HASH * (2 if self.sketch == "cs" else 1)
        prm = self.hash
        levels = []
        pb = 0
        cell = 0
        for l in range(self.L + 1, self.r + 1):
            rows = []
            for _ in range(self.j):
                rows.append(tuple(prm[pb:pb + 4]) + (cell,) + tuple(prm[pb + 4:pb + per]))
                pb += per
                cell += self.w
            levels.append((coord[l], 1 << l, tuple(rows)))
        self._sketch_levels = levels

    def update(self, x):
        """Count one reading ``x`` (a sequence of d numbers). Allocates nothing
        for integer readings; out-of-box values land in the nearest cell."""
        rem = self._rem
        lo = self.lo
        hi = self.hi
        span = self.span
        clamped = 0
        for i in range(self.d):
            xi = x[i]
            if xi > hi[i]:
                rem[i] = span[i]
                clamped = 1
            elif xi >= lo[i]:
                rem[i] = xi - lo[i]
            else:  # below the box, or NaN
                rem[i] = 0
                clamped = 1
        if clamped and self.clamp_p:
            self.clamp += 1
        tree = self.tree
        tree[0] += 1
        v = 0
        for i, off in self._tree_levels:
            t = rem[i] + rem[i]
            s = span[i]
            if t >= s:
                rem[i] = t - s
                v = v + v + 1
            else:
                rem[i] = t
                v = v + v
            tree[v + off] += 1
        sk = self.sketches
        mask = self._wmask
        if self.sketch == "cms":
            for i, nb, rows in self._sketch_levels:
                t = rem[i] + rem[i]
                s = span[i]
                if t >= s:
                    rem[i] = t - s
                    v = v + v + 1
                else:
                    rem[i] = t
                    v = v + v
                node = v + nb
                x0 = node & 16383
                x1 = (node >> 14) & 16383
                x2 = node >> 28
                for b, a1, a2, a3, base in rows:
                    sk[base + ((b + a1 * x0 + a2 * x1 + a3 * x2) % 32749 & mask)] += 1
        else:
            for i, nb, rows in self._sketch_levels:
                t = rem[i] + rem[i]
                s = span[i]
                if t >= s:
                    rem[i] = t - s
                    v = v + v + 1
                else:
                    rem[i] = t
                    v = v + v
                node = v + nb
                x0 = node & 16383
                x1 = (node >> 14) & 16383
                x2 = node >> 28
                for b, a1, a2, a3, base, gb, g1, g2, g3 in rows:
                    g = (gb + g1 * x0 + g2 * x1 + g3 * x2) % 32749
                    sk[base + ((b + a1 * x0 + a2 * x1 + a3 * x2) % 32749 & mask)] += 1 - ((g & 1) << 1)

    # ---------------------------------------------------------------- release
    def encode(self, enc):
        """Write this state as one msgpack map (keys in sorted order)."""
        K = _K
        enc.map(18)
        enc.raw(K["budget"])
        num, den = self.budget()
        enc.array(2)
        enc.uint(num)
        enc.uint(den)
        enc.raw(K["clamp"])
        if self.clamp_p:
            enc.int(self.clamp)
        else:
            enc.nil()
        enc.raw(K["clamp_p"])
        enc.uint(self.clamp_p)
        enc.raw(K["hash"])
        enc.packed(self.hash, "<H", 2)
        enc.raw(K["hash_p"])
        enc.uint(P)
        enc.raw(K["hi"])
        _numbers(enc, self.hi)
        enc.raw(K["j"])
        enc.uint(self.j)
        enc.raw(K["k"])
        enc.uint(self.k)
        enc.raw(K["kind"])
        enc.str(b"privhp")
        enc.raw(K["lo"])
        _numbers(enc, self.lo)
        enc.raw(K["names"])
        enc.array(self.d)
        for nb in self._name_bytes:
            enc.str(nb)
        enc.raw(K["q"])
        enc.uint(self.q)
        enc.raw(K["r"])
        enc.uint(self.r)
        enc.raw(K["sigma"])
        enc.array(len(self.sigma))
        for s in self.sigma:
            enc.uint(s)
        enc.raw(K["sketch"])
        enc.str(b"cms" if self.sketch == "cms" else b"cs")
        enc.raw(K["sketches"])
        enc.packed(self.sketches, "<i", 4)
        enc.raw(K["tree"])
        enc.packed(self.tree, "<i", 4)
        enc.raw(K["w"])
        enc.uint(self.w)

    def counter_bytes(self):
        return 4 * (len(self.tree) + len(self.sketches)) + 2 * len(self.hash)


def _numbers(enc, values):
    """Bounds always travel as float64 so a frame does not depend on JSON typing."""
    enc.array(len(values))
    for v in values:
        enc.float(float(v))


def _bounded(z):
    if z >= NOISE_LIMIT or z <= -NOISE_LIMIT:
        raise ConfigError("noise draw out of range; the noise scale is absurdly large")
    return z
