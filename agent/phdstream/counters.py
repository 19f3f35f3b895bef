"""PHDStream leaf counters (the paper's Appendix D, Algorithms 8-10) over the node pool.

``count(m, v, h)`` activates node v's counter with the step's signed count h
and returns the increment y of its output; the caller adds it to Cn(v) with
``sat``. Counter time is the node's activation count.

Saturation keeps every intermediate below 2**30 (MicroPython small ints, the C
core's int32): raw sums (Block's in-block sum, the tree's p-sums) and noisy
running values are clamped to [-SAT, SAT] after each addition. Clamping a raw
sum is non-expansive, so one event still moves it by at most 1 (the counter's
sensitivity is unchanged); clamping a noisy value is post-processing. Below
saturation, which real counts never reach, the counters are exactly the paper's.
Bounds with |h| <= 2**22 (batch_max) and |noise| < 2**29 (spec.draw): every sum
below is at most 2**27 + 2**27 + 2**29 + 2**22 < 2**30.
"""
from ..spec import draw

SAT = 1 << 27


def sat(x):
    """x clamped to [-SAT, SAT]."""
    if x > SAT:
        return SAT
    if x < -SAT:
        return -SAT
    return x


def count(m, v, h):
    """Activate node v's counter with count ``h``; return its output increment."""
    if m.counter == "simple":
        return h + draw(m.rng, m.c_num, m.c_den)
    if m.counter == "block":
        return _block(m, v, h)
    return _tree(m, v, h)


def _block(m, v, h):
    """Block-B (Algorithm 9): a noisy in-block running sum ``ba`` (noise per
    step) on top of ``bsl``, the sum of the noisy completed block sums; ``bs``
    is the raw sum of the current block. Output bsl + ba, |.| <= 2**28."""
    n = m.act[v] + 1
    if n == m.block:
        n = 0                       # act counts modulo B: no unbounded counter
    m.act[v] = n
    bs = sat(m.bs[v] + h)
    if n == 0:                      # block boundary: release the block's sum
        m.bsl[v] = sat(m.bsl[v] + bs + draw(m.rng, m.c_num, m.c_den))
        m.bs[v] = 0
        m.ba[v] = 0
    else:
        m.bs[v] = bs
        m.ba[v] = sat(m.ba[v] + h + draw(m.rng, m.c_num, m.c_den))
    return m.bsl[v] + m.ba[v] - m.cn[v]


def _tree(m, v, h):
    """Binary tree (Algorithm 10) over horizon T_h: activation n (1-based) adds
    h to the p-sum of level j = trailing zeros of n, which absorbs levels < j.
    The output is the sum of the noisy p-sums over n's set bits, so its
    increment is ahat[j] minus the old noisy p-sums of levels < j (computed
    that way, with saturation, instead of two full sums). After T_h
    activations the counter restarts (a new epoch continuing from Cn)."""
    L = m.levels
    base = v * L
    alpha = m.alpha
    ahat = m.ahat
    n = m.act[v] + 1
    if n > m.horizon:
        for i in range(L):
            alpha[base + i] = 0
            ahat[base + i] = 0
        n = 1
    m.act[v] = n
    j = 0
    while not (n >> j) & 1:
        j += 1
    s = h
    y = 0
    for i in range(j):
        s = sat(s + alpha[base + i])
        y = sat(y - ahat[base + i])
        alpha[base + i] = 0
        ahat[base + i] = 0
    alpha[base + j] = s
    a = sat(s + draw(m.rng, m.c_num, m.c_den))
    ahat[base + j] = a
    return sat(y + a)
