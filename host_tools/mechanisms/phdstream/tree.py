"""PHDStream's post-processing over an explicit tree: the consistent
extension Ext_T, the per-step generator G and the synthetic sample
(docs/mechanisms/phdstream.md, "Host algorithms"; Kumar, Strohmer, Vershynin,
arXiv 2401.14577, §2.3, eq. 5, eqs. 10-11 and Algorithm 6).

A tree is ``children``: int64 array (N, beta), row v the children of node v
in the device's canonical child order, all -1 for a node without children;
node 0 is the root. A node has either all beta children or none (PrivTree
splits into all of them). Node values are float64 arrays of length N
indexed like the rows. Everything here reads only released values (noisy
counts and the split decisions), so it is post-processing: any number of
calls costs no privacy.
"""
import math

import numpy as np

from edgesynth.errors import EvaluationInputError

MAX_MASS = float(1 << 62)  # a leaf's point count ceil(G) must fit int64


def privtree_params(epsilon, beta):
    """PHDStream's split of the per-event budget ``epsilon`` (> 0) and the
    PrivTree noise it implies, for fanout ``beta`` (>= 2).

    Returns a dict: ``eps_tree`` = ``eps_counts`` = epsilon/2; ``lam``, the
    split test's Laplace scale (2 beta - 1) / ((beta - 1) eps_tree), which is
    what the PrivTree privacy proof (the paper's Theorem 3.1, Appendix A)
    needs for a budget eps_tree (the paper's Algorithm 5 prints an extra
    factor 2); ``delta`` = lam ln(beta), the per-depth bias (counts);
    ``leaf_scale`` = 1/eps_counts = 2/epsilon, the leaf counters' Laplace
    scale (Algorithm 1; Algorithm 7 prints 4/epsilon).
    """
    if not epsilon > 0 or not isinstance(beta, int) or beta < 2:
        raise EvaluationInputError("epsilon must be > 0 and beta an integer >= 2")
    eps_tree = epsilon / 2.0
    lam = (2 * beta - 1) / ((beta - 1) * eps_tree)
    return {"eps_tree": eps_tree, "eps_counts": epsilon / 2.0, "lam": lam, "delta": lam * math.log(beta),
            "leaf_scale": 2.0 / epsilon}


def structure(children):
    """(parent, depth, order) of the tree ``children`` (see module doc):
    ``parent`` int64 (N,), -1 at the root; ``depth`` int64 (N,), 0 at the
    root; ``order`` the nodes in BFS order (root first, children in
    canonical order). Raises EvaluationInputError unless every node is
    reached exactly once from the root and has 0 or beta children."""
    children = np.asarray(children, dtype=np.int64)
    if children.ndim != 2 or children.shape[0] < 1 or children.shape[1] < 2:
        raise EvaluationInputError("children must be an (N, beta) array with N >= 1, beta >= 2")
    n = children.shape[0]
    has = children >= 0
    if np.any(has.any(axis=1) != has.all(axis=1)) or np.any(children >= n):
        raise EvaluationInputError("every node must have all beta children or none, each an index < N")
    parent = np.full(n, -1, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int64)
    seen = np.zeros(n, dtype=bool)
    seen[0] = True
    order = [np.zeros(1, dtype=np.int64)]
    level = order[0]
    while level.size:
        kids = children[level]
        kids = kids[kids[:, 0] >= 0]
        nxt = kids.reshape(-1)
        if nxt.size and (seen[nxt].any() or np.unique(nxt).size != nxt.size):
            raise EvaluationInputError("the tree reaches a node twice (a cycle or a shared child)")
        if nxt.size:
            seen[nxt] = True
            parent[nxt] = np.repeat(level[children[level][:, 0] >= 0], children.shape[1])
            depth[nxt] = depth[parent[nxt]] + 1
            order.append(nxt)
        level = nxt
    if not seen.all():
        raise EvaluationInputError("%d node(s) are not reachable from the root" % int((~seen).sum()))
    return parent, depth, np.concatenate(order)


def ext(children, values):
    """Ext_T(values): the consistent extension (eqs. 10-11 of the paper,
    its Ext_T with the weights of its verbal definition).

    A node u gets ``values[v]`` times w(v, u) from every node v, where
    w = 1 if u is v or a strict ancestor of v, beta**-k if u lies k >= 1
    levels below v, and 0 for every other pair (the closed form the paper
    prints gives 1 to unrelated nodes). Computed as G = Ca + values + Cd:
    Cd(u) the sum over u's strict descendants, Ca(u) = (Ca(p) + values(p))
    / beta for u's parent p. Returns float64 (N,); for every node with
    children, G equals the sum of its children's G, and G at the root is
    values.sum(). ``values``: float (N,), any sign.
    """
    children = np.asarray(children, dtype=np.int64)
    parent, depth, order = structure(children)
    values = np.asarray(values, dtype=np.float64)
    if values.shape != (children.shape[0],) or not np.all(np.isfinite(values)):
        raise EvaluationInputError("values must be %d finite numbers" % children.shape[0])
    beta = children.shape[1]
    ca = np.zeros_like(values)
    cd = np.zeros_like(values)
    top = int(depth.max())
    levels = [order[depth[order] == k] for k in range(top + 1)]
    for k in range(1, top + 1):  # top-down: parents' Ca is final first
        nodes = levels[k]
        ca[nodes] = (ca[parent[nodes]] + values[parent[nodes]]) / beta
    for k in range(top, 0, -1):  # bottom-up: children's Cd is final first
        nodes = levels[k]
        np.add.at(cd, parent[nodes], cd[nodes] + values[nodes])
    return ca + values + cd


def node_boxes(children, lo, hi):
    """Half-open boxes [box_lo, box_hi) of every node of the tree, each
    float64 (N, d): the root is the public box [lo, hi); a node at depth k
    is cut along axis k mod d into beta equal slabs, child j taking the j-th
    from the low end (the device's dyadic midpoint rule for beta = 2)."""
    children = np.asarray(children, dtype=np.int64)
    parent, depth, order = structure(children)
    lo = np.asarray(lo, dtype=np.float64).reshape(-1)
    hi = np.asarray(hi, dtype=np.float64).reshape(-1)
    if lo.shape != hi.shape or not np.all(lo < hi) or not np.all(np.isfinite(hi - lo)):
        raise EvaluationInputError("lo and hi must be finite with lo < hi on every axis")
    beta, d = children.shape[1], lo.size
    box_lo = np.empty((children.shape[0], d))
    box_hi = np.empty((children.shape[0], d))
    box_lo[0], box_hi[0] = lo, hi
    for k in range(1, int(depth.max()) + 1):
        nodes = order[depth[order] == k]
        p = parent[nodes]
        slot = np.argmax(children[p] == nodes[:, None], axis=1)
        axis = (k - 1) % d
        box_lo[nodes], box_hi[nodes] = box_lo[p], box_hi[p]
        width = box_hi[p, axis] - box_lo[p, axis]
        box_lo[nodes, axis] = box_lo[p, axis] + width * slot / beta
        # the last slab ends exactly at the parent's end, whatever the rounding
        box_hi[nodes, axis] = np.where(slot == beta - 1, box_hi[p, axis], box_lo[p, axis] + width * (slot + 1) / beta)
    return box_lo, box_hi


def point_counts(mass):
    """Synthetic points per leaf (eq. 5): ceil(G) where G > 0, 0 where
    G <= 0 (a negative or zero noisy mass gets no point; nothing is carried
    over to other leaves). ``mass`` float (M,), finite and below 2**62 (its
    count must fit int64); returns int64 (M,)."""
    mass = np.asarray(mass, dtype=np.float64)
    if not np.all(np.isfinite(mass)):
        raise EvaluationInputError("leaf masses must be finite")
    if np.any(mass >= MAX_MASS):
        raise EvaluationInputError("leaf masses must be below 2**62, got %r" % float(mass.max()))
    return np.where(mass > 0, np.ceil(np.maximum(mass, 0.0)), 0.0).astype(np.int64)


def sample(box_lo, box_hi, mass, rng):
    """The synthetic snapshot of one step: point_counts(mass)[i] i.i.d.
    uniform points in the half-open box [box_lo[i], box_hi[i]) of each leaf
    i of T(t). ``box_lo``/``box_hi`` float (M, d); ``mass`` float (M,);
    ``rng`` a numpy Generator (sampling noise is not part of the privacy
    guarantee: any seed). Returns (points float64 (n, d), leaf int64 (n,)),
    the points grouped by leaf in leaf order."""
    box_lo = np.asarray(box_lo, dtype=np.float64)
    box_hi = np.asarray(box_hi, dtype=np.float64)
    counts = point_counts(mass)
    if box_lo.ndim != 2 or box_lo.shape != box_hi.shape or box_lo.shape[0] != counts.size:
        raise EvaluationInputError("box_lo, box_hi must be (M, d) and mass (M,)")
    leaf = np.repeat(np.arange(counts.size), counts)
    lo, hi = box_lo[leaf], box_hi[leaf]
    pts = lo + rng.random(lo.shape) * (hi - lo)
    # keep cells half-open despite rounding in lo + u * width
    np.minimum(pts, np.nextafter(hi, -np.inf), out=pts)
    return pts, leaf


def step_leaves(children, leaves, cn, lo, hi):
    """The per-step generator of PHDStream (Algorithm 6, lines 7-8): the
    boxes of the leaves of T(t) and their masses G = Ext_T(Cn) there.

    ``children`` the union tree (all nodes the device ever created, as the
    mirror holds them); ``leaves`` int (M,) the nodes that were leaves of
    T(t) in step t; ``cn`` float (N,) the cumulative noisy own counts
    after step t. Returns (box_lo, box_hi, mass). The leaves of T(t) are a
    disjoint cover of the box, so mass sums to Ext_T(Cn) at the root, the
    released population size.
    """
    leaves = np.asarray(leaves, dtype=np.int64)
    if leaves.ndim != 1 or np.any(leaves < 0) or np.any(leaves >= len(children)):
        raise EvaluationInputError("leaves must be node ids of the tree")
    g = ext(children, cn)
    box_lo, box_hi = node_boxes(children, lo, hi)
    return box_lo[leaves], box_hi[leaves], g[leaves]
