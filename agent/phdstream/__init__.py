"""PHDStream device state: a bounded node pool and one PrivTree step per window.

Kumar, Strohmer, Vershynin, "An Algorithm for Streaming Differentially Private
Data" (arXiv 2401.14577), the compute-efficient form of Appendix C (Algorithms
6 and 7) with per-node counters (Algorithm 3, counters of Appendix D), as
corrected in docs/mechanisms/phdstream.md: λ = (2β−1)/((β−1)·ε/2), leaf noise
of scale 1/ε_c with ε_c = ε/2.

The public tree is binary (β = 2) over an integer box: level l >= 1 halves
channel (l - 1) mod d at the midpoint. A reading is quantised on arrival to its
depth-D path code (exact binary long division, as in agent/privhp), so the
window's batch is D-bit codes plus signs and a node's events are a contiguous
segment that the step partitions in place.

Everything is allocated in the constructor (flat arrays sized from the public
``max_nodes`` and ``batch_max``); ``add`` and ``step`` allocate nothing but the
DRBG's output blocks. All values are integers: counts and discrete Laplace
noise (agent/dlap.py), so Cn and Cd are exact; the ancestor mass Ca is kept as
floor(Ca), which is exact under nested floors (floor((floor(a) + n) / 2) =
floor((a + n) / 2) for integer n) and only feeds the split test.

Not yet differentially private as implemented, and so not offered by plan or
simulate: the split test's statistic G(t-1) + H(t) is not monotone along a
path (docs/mechanisms/phdstream.md, "Known problems before exposure").
"""
from array import array

from ..dlap import discrete_laplace
from ..errors import ConfigError
from ..msgpack_out import key

KIND = "phdstream"
VERSION = 1
BETA = 2
MAX_DEPTH = 28            # path codes stay below 2**28
MAX_SPAN = 1 << 29        # 2 * remainder stays below 2**30
MAX_NODES = 1 << 22
MAX_BATCH = 1 << 22
MAX_EPS_DEN = 10 ** 6
# ln 2 < 1143/1649 (a continued-fraction convergent, 1.8e-7 above): delta =
# ceil(λ·1143/1649) is at least λ ln β, which is what PrivTree's bias needs
LN2_NUM = 1143
LN2_DEN = 1649
COUNTERS = ("simple", "block", "tree")
SPEC_KEYS = ("kind", "lo", "hi", "depth", "eps", "counter", "block", "horizon", "max_nodes",
             "batch_max", "snap")


def _int(spec, name, lo, hi, default=None):
    v = spec.get(name, default)
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise ConfigError("phdstream field %r must be an integer in [%d, %d]" % (name, lo, hi))
    return v


def _ceil_div(a, b):
    return -((-a) // b)


class PHDStream:
    """PHDStream state for one stream of d-channel integer readings.

    ``spec`` (all public): ``lo``/``hi`` integer box bounds per channel (1..8
    channels, hi - lo in 1..2**29), ``depth`` D (1..28), ``eps`` [num, den]
    (per event, den <= 10**6), ``counter`` "simple" | "block" | "tree",
    ``block`` B (>= 2, block counter), ``horizon`` T_h (power of 2, tree
    counter), ``max_nodes`` pool size (>= 3), ``batch_max`` events per window,
    ``snap`` snapshot period in steps (>= 1). ``rng`` has ``below(m)``.
    """

    kind = KIND

    def __init__(self, spec, rng):
        for k in spec:
            if k not in SPEC_KEYS:
                raise ConfigError("phdstream has no field %r" % (k,))
        if spec.get("kind", KIND) != KIND:
            raise ConfigError("phdstream spec has kind %r" % (spec.get("kind"),))
        lo = spec.get("lo")
        hi = spec.get("hi")
        if not isinstance(lo, (list, tuple)) or not isinstance(hi, (list, tuple)) or \
                not 1 <= len(lo) <= 8 or len(lo) != len(hi):
            raise ConfigError("phdstream lo and hi must be lists of 1..8 integers of equal length")
        for i in range(len(lo)):
            if not isinstance(lo[i], int) or not isinstance(hi[i], int) or not 1 <= hi[i] - lo[i] <= MAX_SPAN:
                raise ConfigError("phdstream channel %d: integer bounds with 1 <= hi - lo <= 2**29" % i)
        self.d = len(lo)
        self.lo = list(lo)
        self.hi = list(hi)
        self.span = [hi[i] - lo[i] for i in range(self.d)]
        self.depth = _int(spec, "depth", 1, MAX_DEPTH)
        eps = spec.get("eps")
        if not isinstance(eps, (list, tuple)) or len(eps) != 2:
            raise ConfigError("phdstream eps must be [numerator, denominator]")
        self.eps_num = _int({"eps": eps[0]}, "eps", 1, 100 * MAX_EPS_DEN)
        self.eps_den = _int({"eps": eps[1]}, "eps", 1, MAX_EPS_DEN)
        counter = spec.get("counter", "simple")
        if counter not in COUNTERS:
            raise ConfigError("phdstream counter must be one of simple, block, tree")
        self.counter = counter
        self.block = _int(spec, "block", 2, 1 << 16, 8) if counter == "block" else 0
        self.horizon = _int(spec, "horizon", 1, 1 << 16, 128) if counter == "tree" else 0
        if counter == "tree" and self.horizon & (self.horizon - 1):
            raise ConfigError("phdstream horizon must be a power of 2")
        n = _int(spec, "max_nodes", 3, MAX_NODES)
        self.max_nodes = n
        self.batch_max = _int(spec, "batch_max", 1, MAX_BATCH)
        self.snap_every = _int(spec, "snap", 1, 1 << 30, 16)
        num = self.eps_num
        den = self.eps_den
        # λ = (2β-1)/((β-1)·ε/2) = 6/ε at β = 2, as the rational (6·den)/num
        self.lam_num = 6 * den
        self.lam_den = num
        self.delta = _ceil_div(self.lam_num * LN2_NUM, self.lam_den * LN2_DEN)
        self.theta = 0
        # counter noise scales, rationals over num (ε_c = ε/2)
        if counter == "simple":
            self.c_num = 2 * den            # 1/ε_c
        elif counter == "block":
            self.c_num = 4 * den            # 2/ε_c
        else:
            levels = 1
            h = self.horizon
            while h > 1:
                h >>= 1
                levels += 1
            self.levels = levels            # log2 T_h + 1 p-sums hold each event
            self.c_num = 2 * levels * den   # levels/ε_c
        self.c_den = num
        self.rng = rng
        # node pool: node 0 is the root; children of v are kid[v], kid[v] + 1
        # (kid 0 = none: the root is nobody's child)
        self.cn = array("i", bytes(4 * n))
        self.cd = array("i", bytes(4 * n))
        self.kid = array("i", bytes(4 * n))
        self.used = 1
        if counter == "block":
            self.act = array("i", bytes(4 * n))
            self.ba = array("i", bytes(4 * n))
            self.bs = array("i", bytes(4 * n))
            self.bsl = array("i", bytes(4 * n))
        elif counter == "tree":
            self.act = array("i", bytes(4 * n))
            self.alpha = array("i", bytes(4 * n * self.levels))
            self.ahat = array("i", bytes(4 * n * self.levels))
        # the window's batch: depth-D path codes and signs (1 = insert, 0 = delete)
        self.codes = array("i", bytes(4 * self.batch_max))
        self.signs = bytearray(self.batch_max)
        self.nb = 0
        self.rem = [0] * self.d
        # BFS queue of one step; also the order array of the reverse Cd pass
        self.q_node = array("i", bytes(4 * n))
        self.q_lo = array("i", bytes(4 * n))
        self.q_hi = array("i", bytes(4 * n))
        self.q_ca = array("i", bytes(4 * n))
        self.q_dep = array("i", bytes(4 * n))
        # the step's release: split bits over visited nodes, leaf increments
        self.bits = bytearray((n + 7) >> 3)
        self.kbits = bytearray((n + 7) >> 3)
        self.ys = array("i", bytes(4 * n))
        self.nv = 0
        self.nl = 0
        self.t = 0
        # splits the full pool turned into leaves: a device-side diagnostic for
        # sizing, never released (it depends on noisy test outcomes)
        self.refused_splits = 0
        self._K = None

    # ------------------------------------------------------------ readings
    def add(self, x, sign):
        """Queue one event for this window: reading ``x`` (d integers; outside
        the box it lands in the nearest cell) with ``sign`` +1 (insert) or -1
        (delete). Returns False, storing nothing, when the batch is full."""
        nb = self.nb
        if nb >= self.batch_max:
            return False
        rem = self.rem
        d = self.d
        for i in range(d):
            xi = x[i]
            if xi > self.hi[i]:
                rem[i] = self.span[i]
            elif xi >= self.lo[i]:
                rem[i] = xi - self.lo[i]
            else:
                rem[i] = 0
        code = 0
        span = self.span
        i = 0
        for _ in range(self.depth):
            t = rem[i] + rem[i]
            if t >= span[i]:
                rem[i] = t - span[i]
                code = code + code + 1
            else:
                rem[i] = t
                code = code + code
            i += 1
            if i == d:
                i = 0
        for i in range(d):
            rem[i] = 0  # the remainders encode the reading
        self.codes[nb] = code
        self.signs[nb] = 1 if sign > 0 else 0
        self.nb = nb + 1
        return True

    # ------------------------------------------------------------ counters
    def _count(self, v, h):
        """Activate node v's counter with this step's count ``h``; return the
        increment of its output (which is Cn(v) after minus before)."""
        rng = self.rng
        if self.counter == "simple":
            return h + discrete_laplace(rng, self.c_num, self.c_den)
        if self.counter == "block":
            n = self.act[v] + 1
            self.act[v] = n
            self.bs[v] += h
            if n % self.block == 0:
                self.ba[v] = 0
                self.bs[v] += discrete_laplace(rng, self.c_num, self.c_den)
                self.bsl[v] = self.bs[v]
            else:
                self.ba[v] += h + discrete_laplace(rng, self.c_num, self.c_den)
            return self.bsl[v] + self.ba[v] - self.cn[v]
        # binary tree (Algorithm 10); a counter past its horizon starts a new
        # epoch whose output continues from the last one (Cn keeps it)
        L = self.levels
        base = v * L
        alpha = self.alpha
        ahat = self.ahat
        n = self.act[v] + 1
        if n > self.horizon:
            for i in range(L):
                alpha[base + i] = 0
                ahat[base + i] = 0
            n = 1
        self.act[v] = n
        old = 0
        m = n - 1
        i = 0
        while m:
            if m & 1:
                old += ahat[base + i]
            m >>= 1
            i += 1
        j = 0
        while not (n >> j) & 1:
            j += 1
        s = h
        for i in range(j):
            s += alpha[base + i]
            alpha[base + i] = 0
            ahat[base + i] = 0
        alpha[base + j] = s
        ahat[base + j] = s + discrete_laplace(rng, self.c_num, self.c_den)
        new = 0
        m = n
        i = 0
        while m:
            if m & 1:
                new += ahat[base + i]
            m >>= 1
            i += 1
        return new - old

    # ------------------------------------------------------------ one step
    def step(self):
        """Run one PHDStream step on the window's batch (Algorithms 6/7) and
        empty the batch. The release is then in ``bits``/``nv`` and
        ``ys``/``nl`` until the next step (``encode`` writes it)."""
        rng = self.rng
        codes = self.codes
        signs = self.signs
        cn = self.cn
        cd = self.cd
        kid = self.kid
        qn = self.q_node
        qlo = self.q_lo
        qhi = self.q_hi
        qca = self.q_ca
        qdep = self.q_dep
        bits = self.bits
        ys = self.ys
        D = self.depth
        delta = self.delta
        theta = self.theta
        floor_b = theta - delta
        for i in range((self.nv + 7) >> 3):
            bits[i] = 0
        qn[0] = 0
        qlo[0] = 0
        qhi[0] = self.nb
        qca[0] = 0
        qdep[0] = 0
        tail = 1
        head = 0
        nl = 0
        while head < tail:
            v = qn[head]
            lo = qlo[head]
            hi = qhi[head]
            ca = qca[head]
            dep = qdep[head]
            h = lo - hi
            for i in range(lo, hi):
                h += signs[i] + signs[i]  # +1 per insert, -1 per delete
            split = False
            if dep < D:
                b = ca + cn[v] + cd[v] + h - dep * delta
                if b < floor_b:
                    b = floor_b
                if b + discrete_laplace(rng, self.lam_num, self.lam_den) > theta:
                    split = True
                    if kid[v] == 0:
                        if self.used + 2 <= self.max_nodes:
                            kid[v] = self.used
                            self.used += 2
                        else:
                            split = False  # pool full: cap-and-refuse
                            self.refused_splits += 1
            if split:
                bits[head >> 3] |= 1 << (head & 7)
                # partition the segment by the code bit of level dep + 1:
                # zeros (child 0) first, then ones
                mask = 1 << (D - 1 - dep)
                i = lo
                j = hi - 1
                while True:
                    while i <= j and not codes[i] & mask:
                        i += 1
                    while i <= j and codes[j] & mask:
                        j -= 1
                    if i >= j:
                        break
                    c = codes[i]
                    codes[i] = codes[j]
                    codes[j] = c
                    s = signs[i]
                    signs[i] = signs[j]
                    signs[j] = s
                c = kid[v]
                cca = (ca + cn[v]) >> 1  # floor((Ca + Cn(v)) / β), eq. 10
                qn[tail] = c
                qlo[tail] = lo
                qhi[tail] = i
                qca[tail] = cca
                qdep[tail] = dep + 1
                qn[tail + 1] = c + 1
                qlo[tail + 1] = i
                qhi[tail + 1] = hi
                qca[tail + 1] = cca
                qdep[tail + 1] = dep + 1
                tail += 2
            else:
                y = self._count(v, h)
                cn[v] += y
                ys[nl] = y
                nl += 1
            head += 1
        # children before parents (reverse BFS): Cd(v) = Σ_w Cd(w) + Cn(w), eq. 11
        i = tail - 1
        while i >= 0:
            if bits[i >> 3] >> (i & 7) & 1:
                v = qn[i]
                c = kid[v]
                cd[v] = cd[c] + cn[c] + cd[c + 1] + cn[c + 1]
            i -= 1
        # the batch holds raw events: clear it (state at rest is released values
        # and counter internals only)
        for i in range(self.nb):
            codes[i] = 0
            signs[i] = 0
        self.nb = 0
        self.nv = tail
        self.nl = nl
        self.t += 1

    # ------------------------------------------------------------ release
    def _keys(self):
        if self._K is None:
            K = {}
            for name in ("beta", "bits", "block", "cn", "counter", "d", "delta", "depth", "eps", "hi",
                         "horizon", "kids", "kind", "lam", "lo", "max_nodes", "n", "noise", "nv", "p",
                         "snap", "t", "theta", "v"):
                K[name] = key(name)
            self._K = K
        return self._K

    def snapshot_due(self):
        """Whether the frame of the last step carries a full snapshot."""
        return self.t == 1 or self.t % self.snap_every == 0

    def encode(self, enc):
        """Write the last step's payload (docs/mechanisms/phdstream.md, Wire)."""
        K = self._keys()
        enc.map(8)
        enc.raw(K["bits"])
        nbytes = (self.nv + 7) >> 3
        enc.bin_head(nbytes)
        enc.raw(memoryview(self.bits)[:nbytes])
        enc.raw(K["d"])
        enc.packed((memoryview(self.ys)[:self.nl],), "<i", 4)
        enc.raw(K["kind"])
        enc.str(b"phdstream")
        enc.raw(K["nv"])
        enc.uint(self.nv)
        enc.raw(K["p"])
        self._params(enc, K)
        enc.raw(K["snap"])
        if self.snapshot_due():
            self._snapshot(enc, K)
        else:
            enc.nil()
        enc.raw(K["t"])
        enc.uint(self.t)
        enc.raw(K["v"])
        enc.uint(VERSION)

    def _params(self, enc, K):
        enc.map(14)
        enc.raw(K["beta"])
        enc.uint(BETA)
        enc.raw(K["block"])
        enc.uint(self.block)
        enc.raw(K["counter"])
        enc.str(self.counter.encode())
        enc.raw(K["delta"])
        enc.uint(self.delta)
        enc.raw(K["depth"])
        enc.uint(self.depth)
        enc.raw(K["eps"])
        enc.array(2)
        enc.uint(self.eps_num)
        enc.uint(self.eps_den)
        enc.raw(K["hi"])
        enc.array(self.d)
        for v in self.hi:
            enc.int(v)
        enc.raw(K["horizon"])
        enc.uint(self.horizon)
        enc.raw(K["lam"])
        enc.array(2)
        enc.uint(self.lam_num)
        enc.uint(self.lam_den)
        enc.raw(K["lo"])
        enc.array(self.d)
        for v in self.lo:
            enc.int(v)
        enc.raw(K["max_nodes"])
        enc.uint(self.max_nodes)
        enc.raw(K["noise"])
        enc.str(b"dlap")
        enc.raw(K["snap"])
        enc.uint(self.snap_every)
        enc.raw(K["theta"])
        enc.uint(self.theta)

    def _snapshot(self, enc, K):
        """The union tree in canonical BFS order: kids bitmap and Cn. Reuses
        the step's queue arrays (the step's release is bits and ys)."""
        qn = self.q_node
        order_cn = self.q_lo
        kbits = self.kbits
        kid = self.kid
        for i in range(len(kbits)):
            kbits[i] = 0
        qn[0] = 0
        tail = 1
        head = 0
        while head < tail:
            v = qn[head]
            order_cn[head] = self.cn[v]
            c = kid[v]
            if c:
                kbits[head >> 3] |= 1 << (head & 7)
                qn[tail] = c
                qn[tail + 1] = c + 1
                tail += 2
            head += 1
        enc.map(3)
        enc.raw(K["cn"])
        enc.packed((memoryview(order_cn)[:tail],), "<i", 4)
        enc.raw(K["kids"])
        nbytes = (tail + 7) >> 3
        enc.bin_head(nbytes)
        enc.raw(memoryview(kbits)[:nbytes])
        enc.raw(K["n"])
        enc.uint(tail)

    def state_bytes(self):
        """Bytes of every preallocated array (pool, counters, batch, queue,
        release buffers): the state's RAM apart from interpreter overhead."""
        n = 0
        for name in ("cn", "cd", "kid", "act", "ba", "bs", "bsl", "alpha", "ahat", "codes", "q_node",
                     "q_lo", "q_hi", "q_ca", "q_dep", "ys"):
            a = getattr(self, name, None)
            if a is not None:
                n += 4 * len(a)
        return n + len(self.signs) + len(self.bits) + len(self.kbits)
