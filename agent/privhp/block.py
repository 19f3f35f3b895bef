"""Block update of a PrivHP state: many readings per call, bulk work vectorised.

    from agent.privhp.block import update_block
    update_block(mech, (adc0, adc1))   # d equal-length channel buffers

``columns`` holds one buffer per channel, all of the same length n: e.g. the
``array('H')`` buffers ``ADC.read_timed`` fills, lists, ``array``s, numpy or
ulab arrays. The effect on the counters, on ``mech.clamp`` and on
``mech.rem`` (left zeroed) is exactly that of ``mech.update((c0[t], c1[t],
...))`` for t = 0..n-1; frames are byte-identical.

How. Through the numeric facade (firmware_shims/numeric.py): per channel one
vectorised clamp-and-remainder step, then one vectorised long-division step
per level (r in all), whose bits go into a bit matrix (level-major bytearray,
row l-1 holds level l's bit of every reading). Then ONE scalar loop over the
readings builds each path from its bits (v = 2v + bit) and does the tree
increments and sketch hashing exactly as PrivHP.update does. On ulab/numpy
the division is bulk C work; with the "array" backend it is the same Python
arithmetic as the scalar path, moved out of the per-reading loop.

The scalar loop is the same arithmetic as PrivHP.update minus the division,
with the hash terms of limbs that are zero at a level left out (same
integers, see ``_plan``); it is most of the remaining time (the j * (r - L)
hashes per reading), which bounds the speed-up: benchmarks/bench_block.py.

Scratch. The bit matrix (r x n bytes) is kept per mech (``mech._block_bits``),
grown to the largest block seen, and zeroed after every call (it encodes the
readings: the state at rest holds noisy counters only, privacy rule 2). Per
mech, not per call, because a device feeds blocks of one fixed size: after
the first block no r*n-byte buffer is allocated again, so a long-running
device does not fragment its heap with one per call. Blocks longer than
``CHUNK`` readings are processed in chunks, bounding it at r * CHUNK bytes.
The loop plan (``mech._block_plan``: level tuples, built once) is kept too.
Otherwise a chunk allocates a bounded number of objects, O(d + r) and
independent of n (the facade's per-channel remainders and flags, the
ulab/numpy temporaries of each level), none per reading for integer data
(float readings box floats on MicroPython, as in update). Every integer
stays below 2**30, as in update.

If a buffer cannot be read (a non-number), the error is raised before any
reading of that chunk is counted; chunks before it stay counted.

Runs on CPython and MicroPython.
"""
from ..errors import SEALED, SealedError
from ..shims import shim

num = shim("numeric")

CHUNK = 1024  # readings per vectorised pass: bit matrix <= 29 * 1024 bytes


def update_block(mech, columns):
    """Count the n readings held column-wise in ``columns`` (one equal-length
    buffer per channel) into PrivHP state ``mech``; return n."""
    if mech.sealed:
        raise SealedError(SEALED)
    d = mech.d
    if len(columns) != d:
        raise ValueError("expected %d channel buffers, got %d" % (d, len(columns)))
    n = len(columns[0])
    for c in columns:
        if len(c) != n:
            raise ValueError("channel buffers must all have the same length")
    if n <= CHUNK:
        if n:
            _chunk(mech, columns, n)
        return n
    start = 0
    while start < n:
        stop = start + CHUNK
        if stop > n:
            stop = n
        _chunk(mech, [c[start:stop] for c in columns], stop - start)
        start = stop
    return n


def _scratch(mech, size):
    bm = getattr(mech, "_block_bits", None)
    if bm is None or len(bm) < size:
        bm = None                 # drop the old matrix before allocating the new
        mech._block_bits = None
        bm = bytearray(size)
        mech._block_bits = bm
    return bm


def _chunk(mech, columns, n):
    d = mech.d
    r = mech.r
    bm = _scratch(mech, r * n)
    plan = getattr(mech, "_block_plan", None)
    if plan is None:
        plan = _plan(mech)
        mech._block_plan = plan
    lo = mech.lo
    hi = mech.hi
    span = mech.span
    rems = [None] * d
    flags = None
    try:
        # vectorised: remainders and clamp flags per channel, then the bits
        # of every level (level l splits channel coord[l]); nothing counted yet
        clamped = 0
        for i in range(d):
            rem, flags, clamped = num.clamp_rem(columns[i], lo[i], hi[i], flags)
            rems[i] = rem
        coord = mech.coord
        off = 0
        for lvl in range(1, r + 1):
            i = coord[lvl]
            rems[i] = num.div_step(rems[i], span[i], bm, off)[1]
            off += n
        # the counters: clamp count and root in one step each, then one
        # scalar loop over the readings for the paths
        if clamped and mech.clamp_p:
            mech.clamp += clamped
        mech.tree_rows[0][0] += n
        plan[0](mech.wmask, bm, n, plan)
    finally:
        # hygiene, also on error: nothing derived from the readings stays behind
        _zero(bm, r * n)
        for i in range(d):
            if rems[i] is not None:
                num.clear(rems[i])
            mech.rem[i] = 0
        if flags is not None:
            num.clear(flags)


def _zero(buf, m):
    """Zero buf[0:m] at C speed without an m-byte temporary: copy the zeroed
    prefix onto the next stretch, doubling (O(log m) small view objects)."""
    if m <= 0:
        return
    buf[0] = 0
    mv = memoryview(buf)
    k = 1
    while k < m:
        c = k if k + k <= m else m - k
        mv[k:k + c] = mv[0:c]
        k += c


# ----------------------------------------------------------------- paths
# The hash of agent/hashing.py, h = (b + a1*x0 + a2*x1 + a3*x2) mod 32749 on
# the 14-bit limbs of node = 2**l + v, with the limbs that are zero at a level
# left out: levels l <= 13 have node < 2**14 (x1 = x2 = 0), levels l <= 27
# have node < 2**28 (x2 = 0). For l <= 13, b + a1*node = (b + a1*2**l) + a1*v
# with b + a1*2**l < 2**29 precomputed. Same integers, same cells as
# PrivHP.update; every intermediate below 2**30.
def _plan(mech):
    """(loop function, tree tables, class-1, class-2, class-3 sketch levels)."""
    cs = mech.sketch != "cms"
    c1 = []
    c2 = []
    c3 = []
    for i, nb, rows in mech.sketch_levels:
        if nb <= 8192:
            out = []
            for row in rows:
                b, a1, tab = row[0], row[1], row[4]
                item = (b + a1 * nb, a1, tab)
                if cs:
                    item = item + (row[5] + row[6] * nb, row[6])
                out.append(item)
            c1.append(tuple(out))
        elif nb <= (1 << 27):
            out = []
            for row in rows:
                item = (row[0], row[1], row[2], row[4])
                if cs:
                    item = item + (row[5], row[6], row[7])
                out.append(item)
            c2.append((nb, tuple(out)))
        else:
            c3.append((nb, rows))
    tabs = [tab for i, tab in mech.tree_levels]
    if cs:
        fn = _paths_cs
    elif mech.j == 2:
        fn = _paths_cms2
        c1 = [rows[0] + rows[1] for rows in c1]
        c2 = [(nb,) + rows[0] + rows[1] for nb, rows in c2]
    else:
        fn = _paths_cms
    return (fn, tabs, c1, c2, c3)


def _paths_cms(mask, bm, n, plan):
    tabs = plan[1]
    c1 = plan[2]
    c2 = plan[3]
    c3 = plan[4]
    for j in range(n):
        v = 0
        o = j
        for tab in tabs:
            v = v + v + bm[o]
            o += n
            tab[v] += 1
        for rows in c1:
            v = v + v + bm[o]
            o += n
            for b, a1, tab in rows:
                tab[(b + a1 * v) % 32749 & mask] += 1
        for nb, rows in c2:
            v = v + v + bm[o]
            o += n
            node = v + nb
            x0 = node & 16383
            x1 = node >> 14
            for b, a1, a2, tab in rows:
                tab[(b + a1 * x0 + a2 * x1) % 32749 & mask] += 1
        for nb, rows in c3:
            v = v + v + bm[o]
            o += n
            node = v + nb
            x0 = node & 16383
            x1 = (node >> 14) & 16383
            x2 = node >> 28
            for b, a1, a2, a3, tab in rows:
                tab[(b + a1 * x0 + a2 * x1 + a3 * x2) % 32749 & mask] += 1


def _paths_cms2(mask, bm, n, plan):
    """_paths_cms for j = 2 (the usual device config), rows unrolled."""
    tabs = plan[1]
    c1 = plan[2]
    c2 = plan[3]
    c3 = plan[4]
    for j in range(n):
        v = 0
        o = j
        for tab in tabs:
            v = v + v + bm[o]
            o += n
            tab[v] += 1
        for b, a1, t, bb, aa1, tt in c1:
            v = v + v + bm[o]
            o += n
            t[(b + a1 * v) % 32749 & mask] += 1
            tt[(bb + aa1 * v) % 32749 & mask] += 1
        for nb, b, a1, a2, t, bb, aa1, aa2, tt in c2:
            v = v + v + bm[o]
            o += n
            node = v + nb
            x0 = node & 16383
            x1 = node >> 14
            t[(b + a1 * x0 + a2 * x1) % 32749 & mask] += 1
            tt[(bb + aa1 * x0 + aa2 * x1) % 32749 & mask] += 1
        for nb, rows in c3:
            v = v + v + bm[o]
            o += n
            node = v + nb
            x0 = node & 16383
            x1 = (node >> 14) & 16383
            x2 = node >> 28
            for b, a1, a2, a3, tab in rows:
                tab[(b + a1 * x0 + a2 * x1 + a3 * x2) % 32749 & mask] += 1


def _paths_cs(mask, bm, n, plan):
    tabs = plan[1]
    c1 = plan[2]
    c2 = plan[3]
    c3 = plan[4]
    for j in range(n):
        v = 0
        o = j
        for tab in tabs:
            v = v + v + bm[o]
            o += n
            tab[v] += 1
        for rows in c1:
            v = v + v + bm[o]
            o += n
            for b, a1, tab, gb, g1 in rows:
                g = (gb + g1 * v) % 32749
                tab[(b + a1 * v) % 32749 & mask] += 1 - ((g & 1) << 1)
        for nb, rows in c2:
            v = v + v + bm[o]
            o += n
            node = v + nb
            x0 = node & 16383
            x1 = node >> 14
            for b, a1, a2, tab, gb, g1, g2 in rows:
                g = (gb + g1 * x0 + g2 * x1) % 32749
                tab[(b + a1 * x0 + a2 * x1) % 32749 & mask] += 1 - ((g & 1) << 1)
        for nb, rows in c3:
            v = v + v + bm[o]
            o += n
            node = v + nb
            x0 = node & 16383
            x1 = (node >> 14) & 16383
            x2 = node >> 28
            for b, a1, a2, a3, tab, gb, g1, g2, g3 in rows:
                g = (gb + g1 * x0 + g2 * x1 + g3 * x2) % 32749
                tab[(b + a1 * x0 + a2 * x1 + a3 * x2) % 32749 & mask] += 1 - ((g & 1) << 1)
