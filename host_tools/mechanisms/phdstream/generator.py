"""PHDStream's stream generator: per step, the leaves of T(t) of every
device's stream with their masses G, saved as msgpack, and the sampler
(docs/mechanisms/phdstream.md, "Host algorithms").

A stream is the frames of one (device, configuration) in epoch order; each
is applied to a Mirror (resync at the next snapshot after a gap) and every
step the mirror holds gives its cells (level, path, mass). Step K of the
generator is the union of the streams' step K, when they reached it in one
window (epoch); a step the streams reached in different windows is refused
(uniting it would mix times). Sampling step K draws n
points apportioned over its leaves in proportion to ceil(G) of the positive
leaves (the paper's eq. 5: exactly ceil(G) points per positive leaf when n
is the released population, the default), each a uniform integer of its
leaf's cell (the box is integer). All of it reads released values only:
post-processing, free of further privacy cost.
"""
from fractions import Fraction

import msgpack
import numpy as np

from edgesynth.errors import InputError, MergeError, SchemaError
from edgesynth.genfile import MAX_FILE, read_file_map
from edgesynth.mechanisms.integers import INT32_SAFE, cell_integers, draw
from edgesynth.mechanisms.phdstream.mirror import Mirror
from edgesynth.mechanisms.phdstream.tree import MAX_MASS, point_counts
from edgesynth.mechanisms.phdstream.wire import MAX_CHANNELS, MAX_DEPTH
from edgesynth.mechanisms.privhp.growth import Leaves, leaf_boxes, leaf_cells
from edgesynth.merge import merge_releases, refuse_force_sum

FORMAT = 1
FILE_KIND = "edgesynth-phdstream-generator"
SAMPLE_BLOCK = 1 << 20  # rows per block: bounds memory for any n
MAX_STEP_ROWS = 10 ** 9 - 1
FILE_BYTES_PER_CELL = 13  # a leaf of a step in the file: level u8, path u32, mass f64
MAX_LISTED = 32         # absent step ranges listed per stream in the summary
MAX_FILE_MASS = float(1 << 53)  # |G| of a leaf in a generator file (integers exact as doubles)


class Stream:
    """The released steps of one device's stream: ``device``, ``steps``
    int64 (S,) increasing step numbers, ``offsets`` int64 (S + 1,) into the
    cell arrays ``level``/``path`` (int64) and ``mass`` (float64),
    ``skipped`` windows that could not be applied (after a gap, before a
    snapshot), and ``epochs`` int64 (S,) each step's window (the frame's
    epoch; increasing)."""

    def __init__(self, device, steps, offsets, level, path, mass, skipped, epochs):
        self.device = device
        self.steps = np.asarray(steps, dtype=np.int64)
        self.epochs = np.asarray(epochs, dtype=np.int64)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.level = np.asarray(level, dtype=np.int64)
        self.path = np.asarray(path, dtype=np.int64)
        self.mass = np.asarray(mass, dtype=np.float64)
        self.skipped = int(skipped)

    def at(self, step):
        """(level, path, mass) of the leaves of T(step), or None if this
        stream has no step ``step``."""
        i = int(np.searchsorted(self.steps, step))
        if i == self.steps.size or self.steps[i] != step:
            return None
        a, b = self.offsets[i], self.offsets[i + 1]
        return self.level[a:b], self.path[a:b], self.mass[a:b]

    def populations(self):
        """int64 (S,): the released population of each step, the sum of
        ceil(G) over its positive leaves."""
        per = point_counts(self.mass)
        return np.add.reduceat(per, self.offsets[:-1]) if per.size else np.zeros(self.steps.size, np.int64)

    def absent(self):
        """[first, last] ranges of the steps between 1 and the last one that
        this stream lacks (frames lost, or waiting for a snapshot)."""
        out, want = [], 1
        for s in self.steps.tolist():
            if s > want:
                out.append([want, s - 1])
            want = s + 1
        return out

    def summary(self):
        absent = self.absent()
        return {"device": self.device, "steps": int(self.steps.size),
                "first_step": int(self.steps[0]) if self.steps.size else None,
                "last_step": int(self.steps[-1]) if self.steps.size else None,
                "absent_steps": int(sum(b - a + 1 for a, b in absent)), "absent_ranges": absent[:MAX_LISTED],
                "skipped_windows": self.skipped}


def replay(device, windows):
    """The Stream of ``device`` from its (epoch, State) pairs: applied to a
    Mirror in epoch order. A step that does not follow the last one
    recorded (the device restarted its stream) is a MergeError; a window
    that contradicts the tree a SchemaError naming the device and epoch."""
    m = Mirror()
    steps, epochs, level, path, mass = [], [], [], [], []
    for epoch, state in sorted(windows, key=lambda w: w[0]):
        try:
            applied = m.apply(state.window)
        except SchemaError as e:  # say which frame
            raise SchemaError("phdstream stream of device %r, epoch %d: %s" % (device, epoch, e)) from e
        if not applied:
            continue
        if steps and m.t <= steps[-1]:
            raise MergeError("device %r: step %d at epoch %d follows step %d: its stream restarted; assemble "
                             "each run of the device apart" % (device, m.t, epoch, steps[-1]))
        lv, pa, g = m.cells()
        steps.append(m.t)
        epochs.append(epoch)
        level.append(lv)
        path.append(pa)
        mass.append(g)
    offsets = np.concatenate([[0], np.cumsum([x.size for x in level], dtype=np.int64)])
    return Stream(device, steps, offsets, _cat(level, np.int64), _cat(path, np.int64), _cat(mass, np.float64),
                  m.skipped, epochs)


def _cat(parts, dtype):
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)


class Generator:
    """Synthetic snapshots of a PHDStream deployment, one per step.

    ``names`` channel names, ``lo``/``hi`` the public integer box, ``streams``
    (Stream, one per device), ``meta`` JSON-ready provenance. ``steps`` the
    sorted step numbers any stream holds; ``integer`` all True (the box is
    integer and so are the samples).
    """

    def __init__(self, names, lo, hi, streams, meta):
        self.names = list(names)
        self.lo = [int(x) for x in lo]
        self.hi = [int(x) for x in hi]
        self.streams = list(streams)
        self.meta = dict(meta)
        self.integer = [True] * len(self.names)
        held = [s.steps for s in self.streams if s.steps.size]
        self.steps = np.unique(np.concatenate(held)).tolist() if held else []
        self.misaligned = _misaligned(self.streams)

    @property
    def d(self):
        return len(self.names)

    def cells(self, step):
        """(level, path, mass) of the leaves of step ``step`` over every
        stream that holds it (concatenated); InputError if none does, or if
        the streams reached it in different windows (epochs): their step K
        are then different times, and uniting them would mix them."""
        parts = [c for c in (s.at(step) for s in self.streams) if c is not None]
        if not parts:
            raise InputError("the generator has no step %r (it holds %s)" % (step, _ranges(self.steps)))
        if step in self.misaligned:
            raise InputError("step %d: the devices' streams reached it in different windows (%s), so their step "
                             "%d is not one time; assemble those devices apart, or sample a step they share "
                             "(steps that line up: %s)" % (step, self._epochs(step), step,
                                                           _ranges(sorted(set(self.steps) - self.misaligned))))
        return tuple(np.concatenate(x) for x in zip(*parts))

    def _epochs(self, step):
        """"device at epoch E, ..." of the streams holding ``step`` (at most MAX_LISTED)."""
        held = [(s.device, int(s.epochs[np.searchsorted(s.steps, step)])) for s in self.streams
                if s.at(step) is not None]
        return ", ".join("%r at epoch %d" % h for h in held[:MAX_LISTED]) + (", ..." if len(held) > MAX_LISTED
                                                                             else "")

    def population(self, step):
        """The released population at ``step``: the sum over its positive
        leaves (every stream) of ceil(G), the default number of rows."""
        return int(point_counts(self.cells(step)[2]).sum())

    def populations(self):
        """{step: population} for every step the streams reached in one
        window (a misaligned step has none: it cannot be sampled)."""
        out = {}
        for s in self.streams:
            for step, n in zip(s.steps.tolist(), s.populations().tolist()):
                if step not in self.misaligned:
                    out[step] = out.get(step, 0) + n
        return dict(sorted(out.items()))

    def blocks(self, n, rng, step):
        """``n`` rows of step ``step`` (None: its population) as an iterator
        of float64 arrays of at most SAMPLE_BLOCK rows, from numpy Generator
        ``rng``; a missing step or an impossible n is refused at the call,
        before anything is drawn.

        Leaf counts: n apportioned over the leaves in proportion to w =
        ceil(G) of the positive leaves (largest remainders, ties to the
        earlier leaf), so at n = sum(w) each leaf gets exactly w points
        (eq. 5). Rows come in a uniformly random order: each block takes a
        multivariate hypergeometric share of the remaining counts and is
        shuffled. A point is a uniform integer of its leaf's cell."""
        level, path, mass = self.cells(step)
        w = point_counts(mass)
        total = int(w.sum())
        n = total if n is None else int(n)
        if n and not total:
            raise InputError("step %d released no positive mass: nothing to sample (its population is 0)" % step)
        if n > MAX_STEP_ROWS:  # numpy's multivariate hypergeometric draw needs fewer than 10**9 in all
            raise InputError("one step samples at most %d rows, got %d" % (MAX_STEP_ROWS, n))
        left = _apportion(n, w)
        q, bits = leaf_cells(Leaves(level, path, mass), self.d)
        cells = [cell_integers(q[:, c], 1 << bits[:, c], self.lo[c], self.hi[c]) for c in range(self.d)]
        first = np.stack([f for f, _ in cells], axis=1)
        count = np.stack([k for _, k in cells], axis=1)
        return self._rows(n, left, first, count, rng)

    def _rows(self, n, left, first, count, rng):
        while n:
            m = min(SAMPLE_BLOCK, n)
            take = left if m == n else rng.multivariate_hypergeometric(left, m, method="marginals")
            left = left - take
            n -= m
            idx = np.repeat(np.arange(take.size), take)
            rng.shuffle(idx)
            yield draw(first[idx], count[idx], rng.random((m, self.d)))

    def boxes(self, step):
        """(box_lo, box_hi, mass) of the leaves of ``step`` in data units
        (float64; the cells' real extent, for evaluation)."""
        level, path, mass = self.cells(step)
        q, bits = leaf_cells(Leaves(level, path, mass), self.d)
        lo, hi = leaf_boxes(q, bits, np.array(self.lo, float), np.array(self.hi, float))
        return lo, hi, mass

    def sample(self, n, rng):
        raise InputError("a phdstream generator samples one step at a time: pass step=K (or --step K), or use "
                         "sample_steps (--all-steps)")

    def to_bytes(self):
        return msgpack.packb({
            "fmt": FORMAT, "kind": FILE_KIND, "names": self.names, "lo": self.lo, "hi": self.hi,
            "streams": [{"device": s.device, "steps": s.steps.astype("<u8").tobytes(),
                         "epochs": s.epochs.astype("<u4").tobytes(),
                         "offsets": s.offsets.astype("<u8").tobytes(), "level": s.level.astype("<u1").tobytes(),
                         "path": s.path.astype("<u4").tobytes(), "mass": s.mass.astype("<f8").tobytes(),
                         "skipped": s.skipped} for s in self.streams],
            "meta": self.meta,
        })

    @classmethod
    def from_bytes(cls, data, source="generator"):
        m = read_file_map(data, source, FILE_KIND, FORMAT, "phdstream generator (assemble writes one)")
        try:
            names, lo, hi = list(m["names"]), [int(x) for x in m["lo"]], [int(x) for x in m["hi"]]
            streams = [Stream(s["device"], np.frombuffer(s["steps"], "<u8").astype(np.int64),
                              np.frombuffer(s["offsets"], "<u8").astype(np.int64),
                              np.frombuffer(s["level"], "<u1").astype(np.int64),
                              np.frombuffer(s["path"], "<u4").astype(np.int64),
                              np.frombuffer(s["mass"], "<f8").copy(), int(s["skipped"]),
                              np.frombuffer(s["epochs"], "<u4").astype(np.int64)) for s in m["streams"]]
            meta = dict(m.get("meta", {}))
        except (KeyError, TypeError, ValueError, OverflowError) as e:
            raise InputError("%s: malformed phdstream generator (%s)" % (source, e))
        d = len(names)
        if not 1 <= d <= MAX_CHANNELS or len(lo) != d or len(hi) != d or not all(a < b for a, b in zip(lo, hi)) \
                or not all(INT32_SAFE[0] <= v <= INT32_SAFE[1] for v in lo + hi) \
                or not all(isinstance(x, str) for x in names) or len(set(names)) != d \
                or not all(_consistent(s) for s in streams):
            raise InputError("%s: phdstream generator arrays are inconsistent" % source)
        return cls(names, lo, hi, streams, meta)

    def summary(self):
        """JSON-ready description for `inspect` and `assemble --json`:
        streams, steps, per-step population, skipped windows."""
        pops = self.populations()
        return {"kind": FILE_KIND, "channels": self.names, "lo": self.lo, "hi": self.hi, "integer": self.names,
                "steps": len(self.steps), "first_step": self.steps[0] if self.steps else None,
                "last_step": self.steps[-1] if self.steps else None,
                "population": [[k, v] for k, v in pops.items()],
                "misaligned_steps": _spans(sorted(self.misaligned))[:MAX_LISTED],
                "streams": [s.summary() for s in self.streams],
                "skipped_windows": sum(s.skipped for s in self.streams), **self.meta}


def _consistent(s):
    """Whether a loaded Stream's arrays agree: increasing positive steps,
    offsets from 0 to the cell count, levels and paths of a depth-28 tree,
    finite masses of at most 2**53 in magnitude (a device's are far
    smaller) whose positive part sums to less than 2**62 per step (a
    population fits int64)."""
    ok = (s.offsets.size == s.steps.size + 1 and s.epochs.size == s.steps.size and np.all(np.diff(s.epochs) > 0)
          and np.all(s.steps < 1 << 32) and s.offsets[0] == 0 and s.offsets[-1] == s.level.size
            and np.all(np.diff(s.offsets) > 0) and np.all(s.steps > 0) and np.all(np.diff(s.steps) > 0)
            and s.level.size == s.path.size == s.mass.size and np.all(s.level <= MAX_DEPTH)
            and np.all(s.path >> s.level == 0) and np.all(np.isfinite(s.mass))
            and np.all(np.abs(s.mass) <= MAX_FILE_MASS) and isinstance(s.device, str))
    return bool(ok) and (not s.mass.size or
                         np.add.reduceat(np.maximum(s.mass, 0.0), s.offsets[:-1]).max() < MAX_MASS)


def _misaligned(streams):
    """The set of steps that two streams reached in different windows (epochs)."""
    pairs = [np.stack([s.steps, s.epochs], axis=1) for s in streams if s.steps.size]
    if len(pairs) < 2:
        return set()
    steps = np.unique(np.concatenate(pairs), axis=0)[:, 0]  # one row per distinct (step, epoch)
    return set(steps[1:][steps[1:] == steps[:-1]].tolist())


def _spans(steps):
    """[first, last] ranges of consecutive numbers in sorted ``steps``."""
    out = []
    for s in steps:
        if out and s == out[-1][1] + 1:
            out[-1][1] = s
        else:
            out.append([s, s])
    return out


def _apportion(n, w):
    """int64 counts summing to ``n`` over weights ``w`` (int64 >= 0, sum >
    0 unless n is 0): floor(n w / W) each, the remaining units to the
    largest remainders (the earlier leaf on a tie). Exact integers: at
    n = W every leaf gets w."""
    total = int(w.sum())
    if not n:
        return np.zeros(w.size, np.int64)
    prod = w.astype(object) * n if n * int(w.max()) >= 1 << 62 else w * n  # int64 while it cannot overflow
    base = np.array(prod // total, dtype=np.int64)
    rem = np.array(prod % total, dtype=np.int64)
    extra = n - int(base.sum())
    if extra:
        base[np.argsort(-rem, kind="stable")[:extra]] += 1
    return base


def _ranges(steps):
    if not steps:
        return "no step"
    return "steps %d..%d" % (steps[0], steps[-1]) if steps[-1] - steps[0] + 1 == len(steps) else \
        "%d steps in %d..%d" % (len(steps), steps[0], steps[-1])


def assemble_phdstream(releases, force_sum=False):
    """Stream generator of the phdstream frames ``releases``."""
    return build(*merge_releases(releases, "phdstream"), force_sum=force_sum)


def build(merges, windows, force_sum=False):
    """Stream generator from the running merge ``merges`` and its phdstream
    ``windows``: (device, epoch, State) triples of one configuration."""
    refuse_force_sum(force_sum, "phdstream")
    by_device = {}
    for device, epoch, state in windows:
        by_device.setdefault(device, []).append((epoch, state))
    streams = [replay(dev, by_device[dev]) for dev in sorted(by_device)]
    cells = sum(s.level.size for s in streams)
    if FILE_BYTES_PER_CELL * cells > MAX_FILE:  # a larger file would not load again
        raise InputError("the streams hold %d leaves over their steps, about %d MiB of generator file: above "
                         "its %d MiB; assemble fewer windows or devices at a time"
                         % (cells, FILE_BYTES_PER_CELL * cells >> 20, MAX_FILE >> 20))
    first = windows[0][2]
    p = first.params  # one configuration (merge refuses others), so one list of channel names
    meta = {
        "mechanism": "phdstream",
        "epsilon": str(Fraction(merges.eps[0], merges.eps[1])),
        "mechanism_epsilon": str(Fraction(*first.budget)),
        "noise_epsilon": str(Fraction(*p.eps)),
        "rate_bound": first.rate_bound,
        "relation": merges.relation,
        "privacy_unit": "one event (an insertion or a deletion), over the whole stream",
        "devices": merges.sorted_devices(),
        "frames": merges.frames,
        "config_id": first.config_id(),
        "params": {"depth": p.depth, "counter": p.counter, "block": p.block, "horizon": p.horizon,
                   "max_nodes": p.max_nodes, "snap": p.snap},
    }
    return Generator(p.names, p.lo, p.hi, streams, meta)
