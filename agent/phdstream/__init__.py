"""PHDStream device state: a bounded node pool and one PrivTree step per window.

Kumar, Strohmer, Vershynin, "An Algorithm for Streaming Differentially Private
Data" (arXiv 2401.14577), the compute-efficient form of Appendix C (Algorithms
6 and 7) with per-node counters (Algorithm 3, counters of Appendix D), as
corrected in docs/mechanisms/phdstream.md: λ = (2β−1)/((β−1)·ε/2), leaf noise
of scale 1/ε_c with ε_c = ε/2, and a split test on a path-monotone statistic
(the section "Privacy argument" there says why).

The public tree is binary (β = 2) over an integer box: level l >= 1 halves
channel (l - 1) mod d at the midpoint. A reading is quantised on arrival to its
depth-D path code (exact binary long division, as in agent/privhp), so the
window's batch is D-bit codes plus insert/delete flags and a node's events are
a contiguous segment that the step partitions in place.

Everything is allocated in the constructor (flat arrays sized from the public
``max_nodes`` and ``batch_max``); ``update`` allocates nothing and ``step``
nothing but the DRBG's output blocks and spec.draw's small per-draw
allocation (its in-function import; docs/mechanisms/phdstream.md, "Memory").
All values are integers: counts and
discrete Laplace noise (agent/dlap.py), so Cn and Cd are exact; the ancestor
mass Ca is kept as floor(Ca), which is exact under nested floors
(floor((floor(a) + n) / 2) = floor((a + n) / 2) for integer n) and only feeds
the split test.

Integer range (MicroPython small ints and the C core's int32 stay exact): Cn,
Cd, the folded mass Off, a node's own mass Cn + Off and every counter value
saturate at ±SAT = ±2**27, so |floor(Ca)| <= 2**27 by induction (the mean of
two values in range), a released mass g = floor(Ca) + (Cn + Off) + Cd is at
most 3·2**27, the insert count I <= batch_max <=
2**22, depth·delta < 28·2**22 < 2**27 (λ <= 2**22 by spec.check_scale) and a
split noise |Z| < 2**29 (spec.draw): |b + Z| < 2**29 + 3·2**27 + 2**22 < 2**30.
"""
from array import array

from ..errors import SEALED, ConfigError, ReadingError, SealedError, StateError
from ..spec import bounds_field, check_scale, draw, int_field, known_fields, names_field
from . import counters, pool, release

KIND = "phdstream"
MAX_CHANNELS = 8
MAX_DEPTH = 28                # path codes stay below 2**28
MAX_INT_SPAN = (1 << 29) - 1  # the top face: 2 * remainder stays below 2**30
MAX_NODES = 1 << 22
MAX_BATCH = 1 << 22
MAX_EPS_DEN = 10 ** 6
NO_PARENT = 1 << 29           # the root's "P(parent)": above any P (<= 3·2**27)
# ln 2 < 1143/1649 (a continued-fraction convergent, 1.8e-7 above): delta =
# ceil(λ·1143/1649) is at least λ ln β, which is what PrivTree's bias needs
LN2_NUM = 1143
LN2_DEN = 1649
BROKEN = "phdstream: a step failed part way; this state must not release again"
COUNTERS = ("simple", "block", "tree")
SPEC_KEYS = ("kind", "names", "op", "lo", "hi", "depth", "eps", "counter", "block", "horizon", "max_nodes",
             "batch_max", "snap", "rate_bound", "fold")
MAX_FOLD = 255                # the leaf streak fits a byte
MAX_SNAP = 0x3FFFFFFF         # 2**30 - 1: a MicroPython small int
MAX_COUNT = 0x3FFFFFFF        # refused_events/refused_splits saturate here (small ints)
INT32_SAFE = 0x7FFFFFFE       # |lo|, |hi| the C core's int32 update takes (agent/c/es_phdstream.c)


def _bias(a, b):
    """delta = ceil((a / b) · LN2_NUM / LN2_DEN) exactly, for a/b = λ <= 2**22
    and a, b < 2**27, in small ints only (MicroPython: the products
    a·1143 and b·1649 reach 1.6e11). Horner over LN2_NUM's bits on the value
    h·LN2_DEN + l + r/b (l < LN2_DEN, r < b), so h ends as the floor of the
    quotient by LN2_DEN; the C core computes the same ceil in 64 bits."""
    q = a // b
    xh = q // LN2_DEN
    xl = q % LN2_DEN
    xr = a % b
    h = 0
    l = 0  # noqa: E741
    r = 0
    k = 1 << 10  # LN2_NUM < 2**11
    while k:
        h += h
        l += l  # noqa: E741
        r += r
        if LN2_NUM & k:
            h += xh
            l += xl  # noqa: E741
            r += xr
        while r >= b:
            r -= b
            l += 1  # noqa: E741
        while l >= LN2_DEN:
            l -= LN2_DEN  # noqa: E741
            h += 1
        k >>= 1
    return h + (1 if l or r else 0)


class PHDStream:
    """PHDStream state for one stream of d-channel integer readings with an
    insert/delete op.

    ``spec`` (all public; docs/mechanisms/phdstream.md, "Parameters (the config entry)"):
    ``lo``/``hi`` integer box bounds per channel (1..8 channels, hi - lo in
    1..2**29 - 1), ``names`` the channel columns (default x0..x{d-1}), ``op``
    the op column (default "op"), ``depth`` D (1..28), ``eps`` [num, den] (the
    per-event ε, den <= 10**6), ``counter`` "simple" | "block" | "tree",
    ``block`` B (2..2**16, block counter), ``horizon`` T_h (power of 2 up to
    2**16, tree counter), ``max_nodes`` pool size (3..2**22), ``batch_max``
    events per window (1..2**22), ``snap`` snapshot period in steps (1..2**30 - 1),
    ``fold`` K (0..255, default 0 = off): a node with children in the pool
    that has been visited as a leaf of T(t) K times, with no split in
    between, gives its subtree back to the pool (pool.py), ``rate_bound``
    (bool, default false: the deployment promises that no window holds more
    than ``batch_max`` events). ``factor`` multiplies every
    noise scale (1 for add/remove-one neighbours, 2 for replace-one).
    """

    kind = KIND
    sealed = False  # set by the agent's release(); updates are refused after it
    broken = False  # set while a step runs: one that raised part way leaves it set

    def __init__(self, spec, factor=1):
        known_fields(spec, KIND, SPEC_KEYS)
        if spec.get("kind", KIND) != KIND:
            raise ConfigError("phdstream spec has kind %r" % (spec.get("kind"),))
        lo, hi, span = bounds_field(spec, KIND, MAX_INT_SPAN)
        d = len(lo)
        if d > MAX_CHANNELS:
            raise ConfigError("phdstream takes 1..%d channels, got %d" % (MAX_CHANNELS, d))
        for i in range(d):
            if not isinstance(span[i], int):
                raise ConfigError("phdstream channel %d: lo and hi must be integers" % i)
            if lo[i] < -INT32_SAFE or hi[i] > INT32_SAFE:
                raise ConfigError("phdstream channel %d: lo and hi must lie in [-(2**31 - 2), 2**31 - 2]" % i)
        names = names_field(spec, KIND, d, ["x%d" % i for i in range(d)])
        for i in range(d):  # the release names the channels; the host refuses repeats
            if names[i] in names[:i]:
                raise ConfigError("phdstream.names must be distinct")
        op = spec.get("op", "op")
        if not isinstance(op, str) or not 0 < len(op) <= 64 or "\x00" in op or op in names:
            raise ConfigError("phdstream.op must be a short column name, not a channel's")
        self.names = list(names) + [op]
        self.d = d
        self.lo = list(lo)
        self.hi = list(hi)
        self.span = list(span)
        self.depth = int_field(spec, KIND, "depth", 1, MAX_DEPTH)
        eps = spec.get("eps")
        if not isinstance(eps, list) or len(eps) != 2:
            raise ConfigError("phdstream.eps must be [numerator, denominator]")
        self.eps_num = int_field({"eps[0]": eps[0]}, KIND, "eps[0]", 1, 100 * MAX_EPS_DEN)
        self.eps_den = int_field({"eps[1]": eps[1]}, KIND, "eps[1]", 1, MAX_EPS_DEN)
        counter = spec.get("counter", "simple")
        if counter not in COUNTERS:
            raise ConfigError("phdstream.counter must be one of simple, block, tree")
        self.counter = counter
        self.block = 0
        self.horizon = 0
        if counter == "block":
            self.block = int_field({"block": spec.get("block", 8)}, KIND, "block", 2, 1 << 16)
        elif counter == "tree":
            self.horizon = int_field({"horizon": spec.get("horizon", 128)}, KIND, "horizon", 1, 1 << 16)
            if self.horizon & (self.horizon - 1):
                raise ConfigError("phdstream.horizon must be a power of 2")
        n = int_field(spec, KIND, "max_nodes", 3, MAX_NODES)
        self.max_nodes = n
        self.batch_max = int_field(spec, KIND, "batch_max", 1, MAX_BATCH)
        self.snap_every = int_field({"snap": spec.get("snap", 16)}, KIND, "snap", 1, MAX_SNAP)
        self.fold = int_field({"fold": spec.get("fold", 0)}, KIND, "fold", 0, MAX_FOLD)
        rate_bound = spec.get("rate_bound", False)
        if rate_bound is not True and rate_bound is not False:
            raise ConfigError("phdstream.rate_bound must be true or false")
        self.rate_bound = rate_bound
        self.factor = factor
        num = self.eps_num
        den = self.eps_den
        # λ = (2β-1)/((β-1)·ε/2) = 6/ε at β = 2, as the rational (6·den)/num
        self.lam_num = 6 * den * factor
        self.lam_den = num
        check_scale(KIND + " split test", self.lam_num, self.lam_den)
        self.delta = _bias(self.lam_num, self.lam_den)
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
        self.c_num *= factor
        self.c_den = num
        check_scale(KIND + " counter", self.c_num, self.c_den)
        self.rng = None
        self._alloc(n)

    def _alloc(self, n):
        # node pool: node 0 is the root; children of v are kid[v], kid[v] + 1
        # (kid 0 = none: the root is nobody's child)
        self.cn = array("i", bytes(4 * n))
        self.cd = array("i", bytes(4 * n))
        self.kid = array("i", bytes(4 * n))
        self.used = 1
        self.free = 0  # first node of the last freed child pair (0: none)
        self.off = None
        self.idle = None
        if self.fold:
            # folded mass Off (counted like Cn) and the leaf streak
            self.off = array("i", bytes(4 * n))
            self.idle = bytearray(n)
        if self.counter == "block":
            self.act = array("i", bytes(4 * n))
            self.ba = array("i", bytes(4 * n))
            self.bs = array("i", bytes(4 * n))
            self.bsl = array("i", bytes(4 * n))
        elif self.counter == "tree":
            self.act = array("i", bytes(4 * n))
            self.alpha = array("i", bytes(4 * n * self.levels))
            self.ahat = array("i", bytes(4 * n * self.levels))
        # the window's batch: depth-D path codes and ops (1 = insert, 0 = delete)
        self.codes = array("i", bytes(4 * self.batch_max))
        self.signs = bytearray(self.batch_max)
        self.nb = 0
        self.rem = [0] * self.d
        # BFS queue of one step (node, segment, floor(Ca), depth, P(parent));
        # also the order array of the reverse Cd pass
        self.q_node = array("i", bytes(4 * n))
        self.q_lo = array("i", bytes(4 * n))
        self.q_hi = array("i", bytes(4 * n))
        self.q_ca = array("i", bytes(4 * n))
        self.q_dep = array("i", bytes(4 * n))
        self.q_p = array("i", bytes(4 * n))
        # the step's release: split bits over visited nodes, leaf increments
        self.bits = bytearray((n + 7) >> 3)
        self.kbits = bytearray((n + 7) >> 3)
        self.ys = array("i", bytes(4 * n))
        self.nv = 0
        self.nl = 0
        self.t = 0
        # device-side diagnostics for sizing runs, never released (they depend
        # on the data and on noisy test outcomes): splits the full pool turned
        # into leaves, events a full batch refused
        self.refused_splits = 0
        self.refused_events = 0

    # ------------------------------------------------------------ agent protocol
    def budget(self):
        """(numerator, denominator) of the ε this state spends per event over
        the whole stream: ε with ``rate_bound``, else 2ε: a refused event can
        swap for a displaced one, and under replace neighbours a reading that
        moves to another window changes two full windows by a swap each."""
        if self.rate_bound:
            return self.eps_num, self.eps_den
        return 2 * self.eps_num, self.eps_den

    def draw_noise(self, rng):
        """Keep the DRBG ``rng``: PHDStream draws its noise at every step."""
        self.rng = rng

    def prepare_release(self):
        """Build the payload's key table now, so that releasing allocates little."""
        release.keys()

    def counter_bytes(self):
        """Bytes of every preallocated array (pool, counters, batch, queue,
        release buffers): the state's RAM apart from interpreter overhead."""
        n = 0
        for name in ("cn", "cd", "kid", "off", "act", "ba", "bs", "bsl", "alpha", "ahat", "codes", "q_node",
                     "q_lo", "q_hi", "q_ca", "q_dep", "q_p", "ys"):
            a = getattr(self, name, None)
            if a is not None:
                n += 4 * len(a)
        n += len(self.signs) + len(self.bits) + len(self.kbits)
        if self.idle is not None:
            n += len(self.idle)
        return n

    # ------------------------------------------------------------ readings
    def update(self, x):
        """Queue one event for this window: ``x`` = d integer readings, then
        the op, exactly 1 (insert) or -1 (delete). A reading outside the box
        lands in the nearest cell. Anything else raises ReadingError and
        stores nothing. When the batch is full the event is refused silently
        (counted in ``refused_events``, never released). Allocates nothing."""
        if self.sealed:
            raise SealedError(SEALED)
        if self.broken:
            raise StateError(BROKEN)
        d = self.d
        if len(x) != d + 1:
            raise ReadingError("phdstream reads %d integer channels and the op" % d)
        op = x[d]
        if isinstance(op, bool) or not isinstance(op, int) or (op != 1 and op != -1):
            raise ReadingError("phdstream op must be 1 (insert) or -1 (delete), got %r" % (op,))
        for i in range(d):
            xi = x[i]
            if isinstance(xi, bool) or not isinstance(xi, int):
                raise ReadingError("phdstream channel %d must be an integer, got %r" % (i, xi))
        nb = self.nb
        if nb >= self.batch_max:
            if self.refused_events < MAX_COUNT:
                self.refused_events += 1
            return
        rem = self.rem
        span = self.span
        for i in range(d):
            xi = x[i]
            if xi > self.hi[i]:
                rem[i] = span[i]
            elif xi >= self.lo[i]:
                rem[i] = xi - self.lo[i]
            else:
                rem[i] = 0
        code = 0
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
        self.signs[nb] = 1 if op > 0 else 0
        self.nb = nb + 1

    # ------------------------------------------------------------ one step
    def step(self):
        """Run one PHDStream step on the window's batch (Algorithms 6/7) and
        empty the batch. The release is then in ``bits``/``nv`` and
        ``ys``/``nl`` until the next step (``encode`` writes it).

        Split test at node v of depth k < D (PrivTree, ε/2): b = max(P(v) +
        I(v) - k·delta, theta - delta), split iff b + Z > theta, Z discrete
        Laplace of scale λ. I(v) counts the window's inserts in v; P(v) =
        min(max(g(v), 0), P(parent)) with g(v) = floor(G(v, t-1)) =
        floor(Ca) + Cn + Cd, a function of released values, so c = P + I
        never grows along a path and one event moves it by at most 1, on its
        own path. A leaf's counter takes the signed count H(v) (inserts minus
        deletes).

        Fails closed: an exception part way (MemoryError, EntropyError at the
        DRBG's reseed limit) leaves the state ``broken``: the batch is wiped
        and every later update, step and encode raises StateError, as the C
        core's sticky error does (a retry would count the step twice)."""
        if self.broken:
            raise StateError(BROKEN)
        if self.rng is None:
            raise ConfigError("phdstream: draw_noise(rng) must come before the first step")
        self.broken = True
        try:
            self._step()
        except BaseException:
            self._wipe(self.max_nodes)
            raise
        self.broken = False

    def _wipe(self, tail):
        """Clear the batch (raw events) and the queue's segments
        ``q_lo``/``q_hi`` up to ``tail`` (each node's true count in the
        window), so that the state at rest holds released values and counter
        internals only."""
        codes = self.codes
        signs = self.signs
        for i in range(self.nb):
            codes[i] = 0
            signs[i] = 0
        self.nb = 0
        qlo = self.q_lo
        qhi = self.q_hi
        for i in range(tail):
            qlo[i] = 0
            qhi[i] = 0

    def _step(self):
        rng = self.rng
        codes = self.codes
        signs = self.signs
        cn = self.cn
        cd = self.cd
        kid = self.kid
        off = self.off
        qn = self.q_node
        qlo = self.q_lo
        qhi = self.q_hi
        qca = self.q_ca
        qdep = self.q_dep
        qp = self.q_p
        bits = self.bits
        ys = self.ys
        D = self.depth
        delta = self.delta
        theta = self.theta
        floor_b = theta - delta
        lam_num = self.lam_num
        lam_den = self.lam_den
        for i in range((self.nv + 7) >> 3):
            bits[i] = 0
        qn[0] = 0
        qlo[0] = 0
        qhi[0] = self.nb
        qca[0] = 0
        qdep[0] = 0
        qp[0] = NO_PARENT
        tail = 1
        head = 0
        nl = 0
        while head < tail:
            v = qn[head]
            lo = qlo[head]
            hi = qhi[head]
            ca = qca[head]
            dep = qdep[head]
            ins = 0
            for i in range(lo, hi):
                ins += signs[i]
            split = False
            own = cn[v]
            if off is not None:
                own = counters.sat(own + off[v])  # Cn + Off: the node's own mass
            p = ca + own + cd[v]          # floor(G(v, t-1))
            if p < 0:
                p = 0
            if p > qp[head]:
                p = qp[head]
            if dep < D:
                b = p + ins - dep * delta
                if b < floor_b:
                    b = floor_b
                if b + draw(rng, lam_num, lam_den) > theta:
                    split = True
                    if kid[v] == 0:
                        kid[v] = pool.take(self)
                        if kid[v] == 0:
                            split = False  # pool full: cap-and-refuse
                            if self.refused_splits < MAX_COUNT:
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
                cca = (ca + own) >> 1  # floor((Ca + Cn(v) + Off(v)) / β), eq. 10
                qn[tail] = c
                qlo[tail] = lo
                qhi[tail] = i
                qca[tail] = cca
                qdep[tail] = dep + 1
                qp[tail] = p
                qn[tail + 1] = c + 1
                qlo[tail + 1] = i
                qhi[tail + 1] = hi
                qca[tail + 1] = cca
                qdep[tail + 1] = dep + 1
                qp[tail + 1] = p
                tail += 2
            else:
                # H(v) = inserts - deletes
                y = counters.count(self, v, ins + ins - (hi - lo))
                cn[v] = counters.sat(cn[v] + y)
                ys[nl] = y
                nl += 1
            head += 1
        if self.fold:
            # before the Cd pass: every ancestor of a folded node split in this
            # step, so its Cd below is recomputed from the folded masses
            pool.fold_pass(self, tail)
        # children before parents (reverse BFS): Cd(v) = Σ_w Cd(w) + Cn(w) + Off(w),
        # eq. 11, saturated like Cn (the host mirror applies the same rule)
        i = tail - 1
        while i >= 0:
            if bits[i >> 3] >> (i & 7) & 1:
                v = qn[i]
                c = kid[v]
                if off is None:
                    cd[v] = counters.sat(cd[c] + cn[c] + cd[c + 1] + cn[c + 1])
                else:
                    cd[v] = counters.sat(cd[c] + counters.sat(cn[c] + off[c])
                                         + cd[c + 1] + counters.sat(cn[c + 1] + off[c + 1]))
            i -= 1
        self._wipe(tail)
        self.nv = tail
        self.nl = nl
        self.t += 1

    # ------------------------------------------------------------ release
    def encode(self, enc):
        """Write the last step's payload (docs/mechanisms/phdstream.md, "Wire map")."""
        if self.broken:
            raise StateError(BROKEN)
        if self.t == 0:
            raise ConfigError("phdstream: nothing to release before the first step")
        release.encode(self, enc)


__all__ = ["PHDStream", "KIND"]
