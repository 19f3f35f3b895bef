"""PHDStream's node pool: allocation of child pairs and fold-pruning.

Children come in pairs (kid[v], kid[v] + 1). A pair comes from the free list
(pairs that folding gave back, linked through ``kid`` of the pair's first
node) or else from the never-used tail; when both are empty the split is
refused (cap-and-refuse). So at most ``max_nodes`` nodes are ever live.

Fold rule (spec field ``fold`` = K, 0 = off): a node with children in the
pool that has been visited as a leaf of T(t) K times, with no split in
between (the streak changes only when the node is visited), is folded at the
end of the step, before the step's Cd pass. Its strict descendants go back to the free list, and
their mass stays at v: Off(v) += Cd(v), Cd(v) = 0, so G(v) = floor(Ca) + Cn +
Off + Cd and every ancestor's G are unchanged. ``idle[v]`` counts the streak
(reset when v splits or folds, so it never passes K <= 255). The rule reads
only the split bits, which are released, so the host mirror folds the same
nodes at the same step.
"""
from .counters import sat


def take(m):
    """The first node of a free child pair with fresh state, or 0 when the
    pool is full."""
    c = m.free
    if c:
        m.free = m.kid[c]
        m.kid[c] = 0
        return c
    c = m.used
    if c + 2 <= m.max_nodes:
        m.used = c + 2
        return c
    return 0


def fold_pass(m, tail):
    """Advance the leaf streaks of the step's visited nodes (the BFS queue up
    to ``tail``, split bits in ``bits``) and fold the nodes whose streak
    reaches K."""
    qn = m.q_node
    bits = m.bits
    kid = m.kid
    idle = m.idle
    K = m.fold
    for i in range(tail):
        v = qn[i]
        if bits[i >> 3] >> (i & 7) & 1:
            idle[v] = 0
        elif kid[v]:
            s = idle[v] + 1
            if s >= K:
                fold(m, v)
            else:
                idle[v] = s


def fold(m, v):
    """Free v's strict descendants and keep their mass at v (Off += Cd).
    The pairs still to free are linked through ``cd`` of their first node
    (a freed node's Cd is void); no allocation, O(subtree)."""
    kid = m.kid
    cd = m.cd
    m.off[v] = sat(m.off[v] + cd[v])
    cd[v] = 0
    m.idle[v] = 0
    pending = kid[v]
    kid[v] = 0
    cd[pending] = 0
    while pending:
        c = pending
        pending = _drop(m, c + 1, _drop(m, c, cd[c]))
        kid[c] = m.free
        m.free = c


def _drop(m, x, pending):
    """Queue x's child pair on ``pending``, then reset x to the state of a
    never-used node; returns the new head of the pending list."""
    k = m.kid[x]
    if k:
        m.cd[k] = pending
        pending = k
    m.cn[x] = 0
    m.cd[x] = 0
    m.kid[x] = 0
    m.off[x] = 0
    m.idle[x] = 0
    if m.counter == "block":
        m.act[x] = 0
        m.ba[x] = 0
        m.bs[x] = 0
        m.bsl[x] = 0
    elif m.counter == "tree":
        m.act[x] = 0
        L = m.levels
        for i in range(x * L, x * L + L):
            m.alpha[i] = 0
            m.ahat[i] = 0
    return pending
