"""PHDStream heap use on the MicroPython unix port (tests/test_phdstream_memory.py).

    MICROPYPATH=<repo> micropython -X heapsize=256wK tests/mp/phd_memory.py

Prints ``key value`` lines:
* ``update_locked N``: N updates (inserts and deletes, in and out of the box)
  ran under ``micropython.heap_lock()`` (any allocation raises MemoryError);
* ``update_grew B``: gc.mem_alloc() after minus before 2000 more updates (gc off);
* ``step_bytes B``, ``nv N``, ``nl N``, ``drbg_bytes N``: what one step
  allocated (gc off) over a batch of 300 events, its visited nodes (one split
  draw each above depth D), its leaves (one counter draw each) and the DRBG
  bytes behind those draws;
* ``state_bytes B``: counter_bytes() of the state;
* ``step_retained B``: mem_alloc() after a step and a collection minus before;
* ``step_own_bytes B``: one step's allocation with an allocation-free stand-in
  for the DRBG (the step's own code).
* ``freed 0|1``: whether pairs are free after the last step.
The same lines again prefixed ``fold_`` for the state with fold-pruning
(``fold`` 1). Under CPython the lock and mem_alloc lines are skipped
(``update_locked -1``).
"""
import gc

from agent.phdstream import PHDStream
from firmware_shims.drbg import seeded_source

try:
    import micropython
except ImportError:
    micropython = None


def step_alloc(m, measure):
    """What one m.step() allocated (gc off after a collection); -1 unless measure."""
    gc.collect()
    if not measure:
        m.step()
        return -1
    gc.disable()
    a0 = gc.mem_alloc()
    m.step()
    grew = gc.mem_alloc() - a0
    gc.enable()
    return grew


def main(fold, pre):
    s = {"kind": "phdstream", "lo": [0, -50], "hi": [1000, 50], "depth": 12, "eps": [1, 1], "counter": "block",
         "block": 4, "max_nodes": 600, "batch_max": 4000, "snap": 4, "fold": fold}
    m = PHDStream(s)
    rng = seeded_source(b"phd-memory")
    m.draw_noise(rng)
    m.prepare_release()
    rows = []
    x = 7
    for i in range(64):
        x = (1021 * x + 12345) & 0xFFFFF
        rows.append(((x >> 3) % 1100 - 50, (x >> 5) % 120 - 60, 1 if i % 3 else -1))
    up = m.update
    n = 0
    measure = micropython is not None and hasattr(gc, "mem_alloc")
    gc.collect()
    if measure:
        micropython.heap_lock()
    try:
        while n < 1000:
            up(rows[n & 63])
            n += 1
    finally:
        if measure:
            micropython.heap_unlock()
    print(pre + "update_locked %d" % (n if measure else -1))
    m.step()
    grew = -1
    gc.collect()
    if measure:
        gc.disable()
        a0 = gc.mem_alloc()
    n = 0
    while n < 2000:
        up(rows[n & 63])
        n += 1
    if measure:
        grew = gc.mem_alloc() - a0
        gc.enable()
    print(pre + "update_grew %d" % grew)
    m.step()
    for i in range(300):
        up(rows[i & 63])
    consumed = rng.consumed
    print(pre + "step_bytes %d" % step_alloc(m, measure))
    print(pre + "nv %d" % m.nv)
    print(pre + "nl %d" % m.nl)
    print(pre + "drbg_bytes %d" % (rng.consumed - consumed))
    print(pre + "state_bytes %d" % m.counter_bytes())
    # after a collection the step kept nothing: the DRBG's blocks are garbage
    retained = -1
    for i in range(300):
        up(rows[i & 63])
    gc.collect()
    if measure:
        a0 = gc.mem_alloc()
    m.step()
    gc.collect()
    if measure:
        retained = gc.mem_alloc() - a0
    print(pre + "step_retained %d" % retained)
    # the step's own allocation: the same step with an allocation-free stand-in source
    m.draw_noise(Lcg())
    for i in range(300):
        up(rows[i & 63])
    print(pre + "step_own_bytes %d" % step_alloc(m, measure))
    print(pre + "freed %d" % (1 if m.free else 0))  # folding gave pairs back (0 without it)


class Lcg:
    """below(m) from a 20-bit LCG: small ints only, so it allocates nothing
    (not a noise source: it isolates the step's own allocation)."""

    def __init__(self):
        self.x = 1

    def below(self, m):
        self.x = (1021 * self.x + 12345) & 0xFFFFF
        return self.x % m


main(0, "")
main(1, "fold_")  # fold-pruning: every leaf with children folds at once
