"""The host's mirror of a PHDStream device's union tree, rebuilt bit for bit
from its per-window payloads (docs/mechanisms/phdstream.md, "Host algorithms").

Each step's split bitmap names T(t) inside the union tree: a split node
whose children the mirror lacks gets them (the device created them in that
step), and every leaf of T(t) adds its released increment to its Cn. So
after each window the mirror holds the device's tree shape and Cn exactly
(integers); Cd is their sum over strict descendants, as on the device.
After a gap (a missing step) the mirror waits for the next payload with a
snapshot and restarts from it; a snapshot that arrives in sync must equal
the mirror, which checks the stream end to end.

Fold-pruning (p.fold = K > 0, agent/phdstream/pool.py): at the end of each
step a node with children that has been a leaf of T(t) for K visits, with no
split in between, gives its subtree back to the pool and keeps its mass,
Off(v) += Cd(v) (before the step's Cd pass, as on the device).
The rule reads only the split bits, so the mirror folds the same nodes at
the same step; its own node ids are reused through a free list of pairs.

Saturation (as on the device, docs/mechanisms/phdstream.md, "Privacy argument", 6):
Cn = clamp(Cn + y), Off = clamp(Off + Cd) and Cd = clamp(sum over the two
children of Cd + clamp(Cn + Off)), clamp to [-2**27, 2**27], so the mirror
stays bit-exact with a device whose counts saturate. An ``apply`` that
raises leaves the mirror as it was.
"""
import copy

import numpy as np

from edgesynth.agent.phdstream.counters import SAT as SATURATE  # the device's bound on |Cn|, |Cd|, |Off|
from edgesynth.errors import SchemaError
from edgesynth.mechanisms.phdstream import tree


def clamp(v):
    """``v`` saturated to [-2**27, 2**27], the device's rule for Cn and Cd."""
    return -SATURATE if v < -SATURATE else SATURATE if v > SATURATE else v


class Mirror:
    """Union tree of one device's stream. Attributes: ``params`` (wire.Params
    of the stream, None before the first applied window), ``t`` (the last
    step applied, None before), ``leaves`` (node ids of the leaves of T(t),
    in canonical BFS order), ``skipped`` (windows that could not be applied:
    after a gap, before a snapshot). Node ids are the mirror's own (0 the
    root, children allocated in pairs); canonical() gives the id-free form.
    """

    def __init__(self):
        self.params = None
        self.t = None
        self.leaves = []
        self.skipped = 0
        self._kid0 = [-1]  # first child's id (the second is kid0 + 1), -1: none
        self._depth = [0]
        self._path = [0]   # the node's child bits from the root, most significant first
        self._parent = [-1]
        self._cn = [0]
        self._off = [0]    # folded mass (p.fold > 0)
        self._idle = [0]   # leaf streak of the fold rule
        self._cdx = [0]    # exact (unsaturated) sum of Cn + Off over strict descendants: G's Cd
        self._ca = []      # Ca of each leaf of T(t) (float, eq. 10), in the order of ``leaves``
        self._free = []    # first ids of the pairs folding freed (reused last in, first out)
        self._live = 1     # nodes in the tree: at most p.max_nodes, as in the device's pool

    @property
    def nodes(self):
        """Nodes of the union tree (the device's pool in use)."""
        return self._live

    def apply(self, window):
        """Fold in one decoded window (wire.Window). Returns True if the
        mirror now holds the state after step ``window.t``, False if the
        window was skipped (a gap or a new configuration, and no snapshot).
        Raises SchemaError if the window contradicts the tree (a split below
        the maximum depth, a pool overflow, a snapshot unequal to the
        mirror): the stream is not one device's."""
        in_sync = self.t is not None and window.t == self.t + 1 and window.params == self.params
        if in_sync:
            grown, leaves, splits = self._plan(window, self._kid0, self._depth, self._live, self._free,
                                               len(self._cn), grow=True)
            saved = None if window.snap is None else {k: copy.copy(v) for k, v in self.__dict__.items()}
            self._grow(grown, leaves, window.y.tolist())
            self._ca = self._leaf_ca(splits, leaves)  # before folding: a leaf's parent is never folded
            if window.params.fold:
                self._fold_pass(splits, leaves, window.params.fold)
            if window.snap is not None:
                kids, cn, _, off, idle = self._canonical()
                snap = window.snap
                if not (np.array_equal(kids, snap.kids) and np.array_equal(cn, snap.cn)
                        and np.array_equal(off, snap.off) and np.array_equal(idle, snap.idle)):
                    self.__dict__ = saved
                    raise SchemaError("phdstream step %d: the snapshot differs from the tree rebuilt from the steps"
                                      % window.t)
            self.t, self.leaves = window.t, leaves
            return True
        if window.snap is None:
            self.skipped += 1
            return False
        self._restore(window)
        return True

    def _restore(self, window):
        """Rebuild from the snapshot of ``window`` (the union tree after its
        step), then find T(t)'s leaves in it; nothing changes if it raises."""
        snap = window.snap
        if np.any(np.abs(snap.cn) > SATURATE) or np.any(np.abs(snap.off) > SATURATE):
            raise SchemaError("phdstream snapshot at step %d holds a count beyond the device's 2**27" % window.t)
        rank = np.cumsum(snap.kids) - 1
        # in canonical BFS order, the k-th node with children has its pair at 1 + 2k
        kid0 = np.where(snap.kids, 1 + 2 * rank, -1)
        depth = np.zeros(snap.n, dtype=np.int64)
        path = np.zeros(snap.n, dtype=np.int64)
        parent = np.full(snap.n, -1, dtype=np.int64)
        for v in np.flatnonzero(snap.kids):  # parents precede children in BFS order
            depth[kid0[v]] = depth[kid0[v] + 1] = depth[v] + 1
            path[kid0[v]], path[kid0[v] + 1] = 2 * path[v], 2 * path[v] + 1
            parent[kid0[v]] = parent[kid0[v] + 1] = v
        if depth.max() > window.params.depth:
            raise SchemaError("phdstream snapshot at step %d is deeper than p.depth" % window.t)
        kid0, depth, parent, cn = kid0.tolist(), depth.tolist(), parent.tolist(), snap.cn.tolist()
        off = snap.off.tolist()
        cdx = [0] * snap.n
        for v in range(snap.n - 1, 0, -1):  # children after parents in BFS order: read backwards
            cdx[parent[v]] += cdx[v] + cn[v] + off[v]
        _, leaves, splits = self._plan(window, kid0, depth, snap.n, [], snap.n, grow=False)
        self.params, self.t, self.leaves = window.params, window.t, leaves
        self._kid0, self._depth, self._path, self._parent = kid0, depth, path.tolist(), parent
        self._cn, self._off, self._idle, self._cdx = cn, off, snap.idle.tolist(), cdx
        self._free, self._live = [], snap.n
        self._ca = self._leaf_ca(splits, leaves)

    @staticmethod
    def _plan(window, kid0, depth, live, free, n, grow):
        """Read T(t) off the split bits (a BFS queue over node ids) without
        changing anything: returns (grown, leaves, splits), the nodes a 1
        reaches without children (in order: each gets the next pair of ids,
        from the end of ``free`` first, then from ``n`` on; only if
        ``grow``, else a SchemaError), the leaves of T(t) and its split
        nodes with their first child's id, both in BFS order. ``live``: the
        nodes in the tree. SchemaError for a split at the maximum depth or
        past the pool."""
        p = window.params
        queue = [0]
        leaves, grown, splits = [], [], []
        born = {}  # depth of the ids of the pairs created for grown
        for i, split in enumerate(window.split.tolist()):
            v = queue[i]
            if not split:
                leaves.append(v)
                continue
            dv = born[v] if v in born else depth[v]
            if dv >= p.depth:
                raise SchemaError("phdstream step %d splits a node at the maximum depth %d" % (window.t, p.depth))
            first = -1 if v in born else kid0[v]
            if first < 0:
                if not grow:
                    raise SchemaError("phdstream step %d splits a node without children in its snapshot" % window.t)
                if live + 2 * (len(grown) + 1) > p.max_nodes:
                    raise SchemaError("phdstream step %d splits past the pool of %d nodes" % (window.t, p.max_nodes))
                k = len(grown)
                first = free[-1 - k] if k < len(free) else n + 2 * (k - len(free))
                grown.append(v)
                born[first] = born[first + 1] = dv + 1
            splits.append((v, first))
            queue.append(first)
            queue.append(first + 1)
        return grown, leaves, splits

    def _grow(self, grown, leaves, ys):
        """Apply a checked plan: create the children of ``grown`` (ids as
        _plan gave them), add each leaf's increment (saturating)."""
        kid0, depth, path, cn = self._kid0, self._depth, self._path, self._cn
        for v in grown:
            if self._free:
                first = self._free.pop()
                for c in (first, first + 1):
                    kid0[c], cn[c], self._off[c], self._idle[c], self._cdx[c] = -1, 0, 0, 0, 0
                    depth[c], self._parent[c] = depth[v] + 1, v
                path[first], path[first + 1] = 2 * path[v], 2 * path[v] + 1
            else:
                first = len(cn)
                kid0.extend((-1, -1))
                depth.extend((depth[v] + 1, depth[v] + 1))
                path.extend((2 * path[v], 2 * path[v] + 1))
                self._parent.extend((v, v))
                self._cdx.extend((0, 0))
                self._off.extend((0, 0))
                self._idle.extend((0, 0))
                cn.extend((0, 0))
            kid0[v] = first
            self._live += 2
        for v, y in zip(leaves, ys):
            c = clamp(cn[v] + y)
            self._add_up(v, c - cn[v])
            cn[v] = c

    def _fold_pass(self, splits, leaves, K):
        """The fold rule after a step: split nodes' streaks restart, a leaf
        with children extends its streak and folds when it reaches K."""
        for v, _ in splits:
            self._idle[v] = 0
        for v in leaves:
            if self._kid0[v] >= 0:
                self._idle[v] += 1
                if self._idle[v] >= K:
                    self._fold(v)

    def _fold(self, v):
        """Free v's strict descendants and move their mass to Off(v) as the
        device does: Off = clamp(Off + Cd), Cd(v) the level-saturated sum
        the device keeps (the exact one below saturation)."""
        kid0, cn, off = self._kid0, self._cn, self._off
        order = [v]
        for u in order:  # the subtree in BFS order
            if kid0[u] >= 0:
                order += (kid0[u], kid0[u] + 1)
        cd = {}
        for u in reversed(order):
            a = kid0[u]
            cd[u] = 0 if a < 0 else clamp(cd[a] + clamp(cn[a] + off[a]) + cd[a + 1] + clamp(cn[a + 1] + off[a + 1]))
        new = clamp(off[v] + cd[v])
        self._add_up(v, new - off[v] - self._cdx[v])
        off[v], self._cdx[v], self._idle[v] = new, 0, 0
        for u in order[1:]:
            if kid0[u] >= 0:
                self._free.append(kid0[u])
            kid0[u] = -1
        self._free.append(kid0[v])
        kid0[v] = -1
        self._live -= len(order) - 1

    def _add_up(self, v, delta):
        """Add ``delta`` to the exact Cd of every strict ancestor of v: O(depth)."""
        parent, cdx = self._parent, self._cdx
        v = parent[v]
        while v >= 0 and delta:
            cdx[v] += delta
            v = parent[v]

    def _leaf_ca(self, splits, leaves):
        """Ca (eq. 10, exact float: Ca(child) = (Ca(v) + Cn(v)) / beta) of the
        leaves of T(t), top-down along T(t)'s split nodes only: every
        ancestor of a node of T(t) is in T(t)."""
        cn, off = self._cn, self._off
        ca = {0: 0.0}
        for v, first in splits:  # BFS order: a node's Ca is known before its children's
            ca[first] = ca[first + 1] = (ca[v] + float(cn[v] + off[v])) / 2
        return [ca[v] for v in leaves]

    def _order(self):
        """The union tree's node ids in canonical BFS order."""
        kid0 = self._kid0
        order = [0]
        for v in order:  # the list grows while it is read: a BFS
            if kid0[v] >= 0:
                order.append(kid0[v])
                order.append(kid0[v] + 1)
        return order

    def counts(self):
        """int64 (N,): each node's own mass Cn + Off, by the mirror's node id
        (the rows of children())."""
        return np.array(self._cn, dtype=np.int64) + np.array(self._off, dtype=np.int64)

    def children(self):
        """int64 (N, 2): the union tree as edgesynth.mechanisms.phdstream.tree
        takes it, by node id (after a fold, ids the pool holds free are
        childless rows no node reaches: generator() leaves them out)."""
        kid0 = np.array(self._kid0, dtype=np.int64)
        return np.where(kid0[:, None] >= 0, kid0[:, None] + np.arange(2), -1)

    def canonical(self, fold=False):
        """(kids bool, cn int64, cd int64), each over the union tree in
        canonical BFS order: whether a node has children, its Cn, and its Cd
        (the sum of Cn + Off over its strict descendants, saturated level by
        level as the device keeps it); with ``fold`` also Off and the leaf
        streaks. Equal for two trees iff they are the same tree with the
        same counts, whatever the node ids."""
        return self._canonical()[:5 if fold else 3]

    def _canonical(self):
        kid0, cn, off = self._kid0, self._cn, self._off
        order = self._order()
        cd = {}
        for v in reversed(order):  # children before parents
            a = kid0[v]
            cd[v] = 0 if a < 0 else clamp(cd[a] + clamp(cn[a] + off[a]) + cd[a + 1] + clamp(cn[a + 1] + off[a + 1]))
        kids = np.array([kid0[v] >= 0 for v in order], dtype=bool)
        return (kids,) + tuple(np.array([x[v] for v in order], dtype=np.int64) for x in (cn, cd, off, self._idle))

    def generator(self):
        """The per-step generator of step ``t``: (box_lo, box_hi, mass) of
        the leaves of T(t), G = Ext_T(Cn + Off) (tree.step_leaves) over the
        public box of the parameters. Post-processing of the released windows."""
        if self.t is None:
            raise SchemaError("phdstream mirror has applied no window yet")
        order = self._order()
        index = np.full(len(self._cn), -1, dtype=np.int64)
        index[order] = np.arange(len(order))
        children = self.children()[order]
        children = np.where(children >= 0, index[np.maximum(children, 0)], -1)
        return tree.step_leaves(children, index[self.leaves].tolist(), self.counts()[order].astype(np.float64),
                                self.params.lo, self.params.hi)

    def cells(self):
        """The per-step generator of step ``t`` as cells: (level, path, mass)
        of the leaves of T(t) in canonical BFS order, ``level`` the depth
        and ``path`` the child bits from the root (most significant first,
        as edgesynth.mechanisms.privhp.growth.Leaves), ``mass`` G = Ext_T(Cn + Off)
        there, as tree.ext computes it (Ca + (Cn + Off) + Cd, the same float
        operations) but from the leaves' Ca and the exact Cd kept up to
        date: O(|T(t)|), not O(union tree), per step. Level l >= 1 halves
        channel (l - 1) mod d, as on the device."""
        if self.t is None:
            raise SchemaError("phdstream mirror has applied no window yet")
        leaves = self.leaves
        g = (np.array(self._ca, dtype=np.float64)
             + np.array([self._cn[v] + self._off[v] for v in leaves], dtype=np.float64)
             + np.array([self._cdx[v] for v in leaves], dtype=np.float64))
        return (np.array([self._depth[v] for v in leaves], dtype=np.int64),
                np.array([self._path[v] for v in leaves], dtype=np.int64), g)
