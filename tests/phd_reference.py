"""Dense reference PHDStream (the paper's Algorithms 1-3, corrected), CPython only.

Materialises every vertex of the public binary tree of depth D (2**(D+1) - 1
vertices, so D <= 8 or so) and keeps G(v, t) exactly as Fractions: each step
runs PrivTree over the full tree on the path-monotone statistic
c(v) = P(v) + I(v) (I: the step's inserts in v; P(v) = min(max(floor(G(v, t-1)), 0),
P(parent)); docs/mechanisms/phdstream.md, "Privacy argument"),
activates one counter per leaf of T(t) on the signed count ∇F(v, t) and adds
Ext_T of the leaf increments with the corrected weights (1 on v and its
ancestors, 2**-k k levels below v, 0 elsewhere). Cn(v) (the sum of v's
increments) and Cd(v) saturate at ±sat (2**27 on the device); with saturation
the tested mass is floor(Ca) + Cn + Cd recomputed densely from the saturated
Cn, which equals floor(G) while nothing saturates (tests check both). It shares nothing with agent/phdstream but
agent/dlap.py: the same DRBG draws in the same order (split noise for each
visited vertex above depth D in BFS order; a leaf's counter noise at the moment
it is visited) must give the same tree and counts as the efficient version.

Vertices are (depth, path) with path the depth-bit binary number of the
branch choices, most significant first.
"""
import math
from fractions import Fraction

from edgesynth.agent.dlap import discrete_laplace


class DenseCounter:
    """One node's counter (Algorithms 8-10) kept in a dict; returns outputs."""

    def __init__(self, kind, scale, block=0, horizon=0):
        self.kind = kind
        self.scale = scale      # (num, den) of the discrete Laplace scale
        self.block = block
        self.horizon = horizon
        self.n = 0
        self.out = 0            # last output g
        self.a = self.s = self.s_last = 0
        self.alpha = {}
        self.ahat = {}

    def update(self, rng, f):
        """Feed f; return the new output g (the running noisy total)."""
        num, den = self.scale
        if self.kind == "simple":
            self.out += f + discrete_laplace(rng, num, den)
            return self.out
        if self.kind == "block":
            self.n += 1
            self.s += f
            if self.n % self.block == 0:
                self.a = 0
                self.s += discrete_laplace(rng, num, den)
                self.s_last = self.s
            else:
                self.a += f + discrete_laplace(rng, num, den)
            self.out = self.s_last + self.a
            return self.out
        # binary tree with restarts after the horizon: epoch outputs add up
        if self.n == self.horizon:
            self.base = self.out
            self.n = 0
            self.alpha = {}
            self.ahat = {}
        elif self.n == 0:
            self.base = 0
        self.n += 1
        t = self.n
        j = (t & -t).bit_length() - 1
        self.alpha[j] = sum(self.alpha.get(i, 0) for i in range(j)) + f
        self.ahat[j] = self.alpha[j] + discrete_laplace(rng, num, den)
        for i in range(j):
            self.alpha[i] = self.ahat[i] = 0
        self.out = self.base + sum(self.ahat.get(i, 0) for i in range(t.bit_length()) if t >> i & 1)
        return self.out


class DensePHD:
    """Dense PHDStream over the box [lo, hi] (integers), depth D, ε = eps_num/eps_den."""

    def __init__(self, lo, hi, depth, eps_num, eps_den, counter="simple", block=8, horizon=128,
                 max_nodes=None, sat=1 << 27, fold=0):
        self.lo, self.hi, self.depth = list(lo), list(hi), depth
        self.d = len(lo)
        self.lam = (6 * eps_den, eps_num)                        # λ = 6/ε (β = 2, ε_tree = ε/2)
        lam = Fraction(6 * eps_den, eps_num)
        self.delta = math.ceil(lam * Fraction(1143, 1649))        # rational bound >= ln 2
        assert self.delta >= float(lam) * math.log(2)
        levels = horizon.bit_length()                             # log2 T_h + 1
        self.cscale = {"simple": (2 * eps_den, eps_num), "block": (4 * eps_den, eps_num),
                       "tree": (2 * levels * eps_den, eps_num)}[counter]
        self.counter, self.block, self.horizon = counter, block, horizon
        self.G = {(k, p): Fraction(0) for k in range(depth + 1) for p in range(1 << k)}
        self.counters = {}
        self.union = {(0, 0)}                                     # vertices ever in some T(t)
        self.max_nodes = max_nodes
        self.sat = sat
        self.cn = {v: 0 for v in self.G}                          # saturated sum of v's increments
        self.off = {v: 0 for v in self.G}                         # folded mass (fold-pruning)
        self.fold = fold                                          # K: fold after K visits as a leaf (0 off)
        self.idle = {}                                            # leaf streaks of union nodes

    def clamp(self, x):
        return max(-self.sat, min(self.sat, x))

    def own(self, v):
        """A vertex's own mass Cn + Off, saturated."""
        return self.clamp(self.cn[v] + self.off[v])

    def cds(self):
        """Cd per vertex: saturated sums over the two children of Cd + own mass."""
        D = self.depth
        cd = {}
        for k in range(D, -1, -1):
            for p in range(1 << k):
                cd[(k, p)] = 0 if k == D else self.clamp(
                    sum(cd[(k + 1, q)] + self.own((k + 1, q)) for q in (2 * p, 2 * p + 1)))
        return cd

    def masses(self):
        """floor(Ca + Cn + Off + Cd) per vertex from the saturated Cn, densely: Cd
        bottom-up (cds), Ca exact top-down (eq. 10)."""
        D = self.depth
        cd = self.cds()
        ca = {(0, 0): Fraction(0)}
        for k in range(1, D + 1):
            for p in range(1 << k):
                par = (k - 1, p >> 1)
                ca[(k, p)] = (ca[par] + self.own(par)) / 2
        return {v: math.floor(ca[v]) + self.own(v) + cd[v] for v in self.G}

    def code(self, x):
        """Depth-D path code of reading x: level l halves channel (l-1) mod d."""
        bits_per = [0] * self.d
        for level in range(self.depth):
            bits_per[level % self.d] += 1
        cell = []
        for i in range(self.d):
            xi = min(max(x[i], self.lo[i]), self.hi[i])
            n = 1 << bits_per[i]
            c = (xi - self.lo[i]) * n // (self.hi[i] - self.lo[i])
            cell.append(min(c, n - 1))                            # the top face is closed
        code = 0
        used = [0] * self.d
        for level in range(self.depth):
            i = level % self.d
            used[i] += 1
            code = code * 2 + (cell[i] >> (bits_per[i] - used[i]) & 1)
        return code

    def counts(self, events, signed):
        """Per vertex: the signed count ∇F(v, t) (signed) or the number of inserts I(v)."""
        out = {v: 0 for v in self.G}
        for x, s in events:
            c = self.code(x)
            for k in range(self.depth + 1):
                out[(k, c >> (self.depth - k))] += s if signed else s > 0
        return out

    def statistic(self, events):
        """The split test's count c(v) = P(v) + I(v) at every vertex above depth D, before
        the bias and the floor: P(root) = max(g, 0), P(v) = min(max(g(v), 0), P(parent))."""
        g = self.masses()
        ins = self.counts(events, signed=False)
        P = {(0, 0): max(g[(0, 0)], 0)}
        for k in range(1, self.depth + 1):
            for p in range(1 << k):
                P[(k, p)] = min(max(g[(k, p)], 0), P[(k - 1, p >> 1)])
        return {(k, p): P[(k, p)] + ins[(k, p)] for (k, p) in self.G if k < self.depth}

    def step(self, rng, events):
        """One step on ``events`` [(x, sign)]: returns (split bits, leaf increments) in BFS order."""
        D = self.depth
        grad = self.counts(events, signed=True)
        stat = self.statistic(events)
        bits, ys, leaves = [], [], []
        queue = [(0, 0)]
        head = 0
        while head < len(queue):
            v = queue[head]
            head += 1
            k, p = v
            split = False
            if k < D:
                b = max(stat[v] - k * self.delta, -self.delta)
                if b + discrete_laplace(rng, *self.lam) > 0:
                    kids = [(k + 1, 2 * p), (k + 1, 2 * p + 1)]
                    new = [w for w in kids if w not in self.union]
                    if self.max_nodes is None or not new or len(self.union) + 2 <= self.max_nodes:
                        split = True
                        self.union.update(kids)
                        queue.extend(kids)
            bits.append(1 if split else 0)
            if not split:
                c = self.counters.get(v)
                if c is None:
                    c = self.counters[v] = DenseCounter(self.counter, self.cscale, self.block, self.horizon)
                before = c.out
                y = c.update(rng, grad[v]) - before
                ys.append(y)
                leaves.append(v)
        for v, y in zip(leaves, ys):
            self.add_ext(v, y)
            self.cn[v] = self.clamp(self.cn[v] + y)
        if self.fold:
            self.fold_step(queue, bits)
        return bits, ys

    def fold_step(self, visited, bits):
        """Fold-pruning: a node with children in the union that has been
        visited as a leaf of T(t) K times, with no split in between, loses its strict descendants (union, counters,
        Cn, Off) and keeps their mass: Off(v) += Cd(v). G changes only below v:
        Ext_T of the mass moved from the descendants to v."""
        cd = self.cds()
        for v, split in zip(visited, bits):
            k, p = v
            if split:
                self.idle[v] = 0
                continue
            if (k + 1, 2 * p) not in self.union:
                continue
            self.idle[v] = self.idle.get(v, 0) + 1
            if self.idle[v] < self.fold:
                continue
            self.idle[v] = 0
            new = self.clamp(self.off[v] + cd[v])
            self.add_ext(v, new - self.off[v])
            self.off[v] = new
            for w in [w for w in self.union if w[0] > k and w[1] >> (w[0] - k) == p]:
                self.add_ext(w, -(self.cn[w] + self.off[w]))
                self.union.discard(w)
                self.counters.pop(w, None)
                self.idle.pop(w, None)
                self.cn[w] = self.off[w] = 0

    def add_ext(self, v, y):
        """G += Ext_T(y · 1_v) with the corrected weights."""
        k, p = v
        for j in range(k + 1):                                    # v and its ancestors: weight 1
            self.G[(j, p >> (k - j))] += y
        for j in range(k + 1, self.depth + 1):                    # descendants: 2**-(j-k)
            share = Fraction(y, 1 << (j - k))
            for q in range(p << (j - k), (p + 1) << (j - k)):
                self.G[(j, q)] += share
