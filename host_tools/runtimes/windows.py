"""Simulating a device that releases one frame per public time window.

A device's clock, not its data, decides when a frame goes out. Here each
reading carries a timestamp t (Unix seconds); the window of a reading is
``floor(t / window)`` on a grid anchored at the Unix epoch, and the schedule is
every window that meets the public interval [start, end). Each window in the
schedule is a fresh agent with fresh noise and exactly one frame, empty or not;
the frame's epoch is the window index itself, so it names the same stretch of
time in every run. Nothing about the schedule is read off the data: not n, not
the span of the timestamps. A reading outside [start, end) is refused.

Under event-level neighbours one reading lies in exactly one window, so adding,
removing or replacing it changes that window's frame only, and the frames
together are epsilon-DP per reading (parallel composition; docs/privacy.md,
docs/trust.md).

A continual (phdstream) config is the exception: ONE agent runs the whole
schedule, one step and one frame per window (Agent.next_window), seeded with
the seed itself; its frames together are epsilon-DP per event over the whole
stream (docs/mechanisms/phdstream.md).

Seeds. Without a seed every window's agent draws fresh platform entropy. With
one, window e is seeded with ``window_seed(seed, e)`` =
SHA-256("edgesynth-epoch-seed" || seed || uint32be(e)): reproducible per
window, so a window whose readings did not change gives a byte-identical frame,
and no two windows share noise (their frames' difference would otherwise be the
exact difference of their counts). Seeded runs are for tests only: the seed
recovers the noise.
"""
import datetime
import hashlib
import math

import numpy as np

from edgesynth.errors import InputError
from edgesynth.runtimes.simulate import continual, simulate, simulate_stream

MAX_WINDOWS = 100000  # frames one simulation may write
MAX_EPOCH = (1 << 32) - 1  # the frame's epoch field is a uint32


def window_seed(seed, epoch):
    """32-byte seed of window ``epoch`` (0 <= epoch < 2**32) derived from ``seed`` (bytes)."""
    return hashlib.sha256(b"edgesynth-epoch-seed" + bytes(seed) + epoch.to_bytes(4, "big")).digest()


def parse_time(text):
    """Unix seconds (float64: sub-microsecond digits are rounded) of ``text``:
    a decimal number of seconds, or ISO 8601 as datetime.fromisoformat reads it
    (``2010-01-01T05:00``, ``...:00.250``, ``...Z``, ``...+01:00``; without an
    offset, UTC; Python 3.10 wants 3 or 6 fraction digits, 3.11 takes more forms).

    Raises ValueError with a message naming the accepted forms.
    """
    s = text.strip()
    try:
        v = float(s)
    except ValueError:
        try:
            dt = datetime.datetime.fromisoformat(s[:-1] + "+00:00" if s.endswith(("Z", "z")) else s)
        except ValueError:
            raise ValueError("%r is not a time (Unix seconds or ISO 8601 such as 2010-01-01T05:00Z)" % text)
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=datetime.timezone.utc)
        v = dt.timestamp()
    if not math.isfinite(v):
        raise ValueError("%r is not a finite time" % text)
    return v


class Schedule:
    """The public release schedule: windows of ``window`` seconds (a positive
    integer) that meet [start, end) (Unix seconds, start < end)."""

    def __init__(self, window, start, end):
        if not (isinstance(window, int) and window > 0):
            raise InputError("--window must be a positive whole number of seconds, got %r" % (window,))
        if not start < end:
            raise InputError("--start must be before --end")
        self.window, self.start, self.end = window, start, end
        self.first = math.floor(start / window)
        self.last = math.ceil(end / window) - 1
        if self.first < 0 or self.last > MAX_EPOCH:
            raise InputError("windows of %d s between --start and --end number %d..%d; a frame's epoch "
                             "must be in 0..2**32-1 (times before 1970 or too short a window)"
                             % (window, self.first, self.last))
        if self.last - self.first + 1 > MAX_WINDOWS:
            raise InputError("--start..--end spans %d windows of %d s; at most %d per simulation"
                             % (self.last - self.first + 1, window, MAX_WINDOWS))

    def __len__(self):
        return self.last - self.first + 1

    def check(self, t):
        """``t`` unchanged when it lies in [start, end); else ValueError."""
        if not self.start <= t < self.end:
            raise ValueError("time %s is outside the public schedule [--start, --end)" % _fmt_time(t))
        return t

    def windows(self, times):
        """Window index of each timestamp in ``times`` (array of Unix seconds)."""
        return np.floor(np.asarray(times, float) / self.window).astype(np.int64)


def _fmt_time(t):
    """ISO 8601 UTC of Unix seconds ``t``, or the seconds themselves beyond datetime's years."""
    try:
        return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat().replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return "%r s" % t


def window_blocks(data, times, schedule, seed=None, first_seq=0):
    """``[(epoch, seq, seed or None, rows), ...]`` of every window of
    ``schedule`` in time order: window e's readings (rows of ``data``, in
    file order), its sequence number ``first_seq`` + its position, and its
    seed window_seed(seed, e).

    ``data`` (n, d) readings, ``times`` (n,) their Unix seconds, each already in
    [schedule.start, schedule.end) (Schedule.check).
    """
    data = np.asarray(data)
    idx = schedule.windows(times)
    if idx.size and (idx.min() < schedule.first or idx.max() > schedule.last):
        raise InputError("a reading lies outside the schedule's windows")
    if first_seq + len(schedule) - 1 > MAX_EPOCH:
        raise InputError("sequence numbers must stay below 2**32")
    order = np.argsort(idx, kind="stable")  # readings keep their file order inside a window
    idx, data = idx[order], data[order]
    cuts = np.searchsorted(idx, np.arange(schedule.first, schedule.last + 2))
    return [(e, first_seq + i, None if seed is None else window_seed(seed, e), data[cuts[i]:cuts[i + 1]])
            for i, e in enumerate(range(schedule.first, schedule.last + 1))]


def simulate_windows(cfg, data, times, columns, schedule, seed=None, first_seq=0, progress=None, **kw):
    """Frames [(epoch, bytes), ...] of every window of ``schedule``, in time order.

    Window e's frame has epoch e and sequence ``first_seq`` + its position in
    the schedule (window_blocks). ``kw`` goes to
    edgesynth.runtimes.simulate.simulate (runtime, device_id, key, heap, cpu);
    ``progress(k)`` is called with the number of readings each window consumed.
    A continual config runs as one agent (simulate_stream).
    """
    if continual(cfg):
        blocks = [(e, q, rows) for e, q, _, rows in window_blocks(data, times, schedule, None, first_seq)]
        return simulate_stream(cfg, blocks, columns, seed=seed, progress=progress, **kw)
    frames = []
    for e, q, s, rows in window_blocks(data, times, schedule, seed, first_seq):
        frames.append((e, simulate(cfg, rows, columns, seed=s, epoch=e, seq=q, **kw)))
        if progress:
            progress(len(rows))
    return frames
