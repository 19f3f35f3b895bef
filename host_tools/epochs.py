"""Simulating a device that releases one frame per time window (epoch).

A recording of n rows is treated as a device sampling at a fixed rate: row i
is the reading of time slot i, and window e of K covers the slots
[floor(e*n/K), floor((e+1)*n/K)). Window membership is a function of the slot
(public time), never of the values, as on a device whose main loop releases on
a clock (agent/main_loop.py). Each window is a fresh agent with fresh noise
and one frame, with epoch ``first_epoch + e`` and sequence ``first_seq + e``.

Seeds. A seeded run must never give two windows the same noise: the frames'
difference would then be the exact difference of the windows' counts. With
K > 1 window e is seeded with ``epoch_seed(seed, epoch)`` =
SHA-256("edgesynth-epoch-seed" || seed || uint32be(epoch)), keyed by the
absolute epoch number, so separate runs over different epoch ranges never
collide. A single-window run (K = 1) uses the seed as given, as before.
Seeded runs are for tests and simulation only: the seed recovers the noise.

Privacy (docs/privacy.md, docs/trust.md): the windows are disjoint, so under
event-level add/remove (or replace) neighbours one reading changes one frame
only and the K frames together are still epsilon-DP (parallel composition).
"""
import hashlib

import numpy as np

from host_tools.errors import InputError
from host_tools.simulate import simulate

MAX_EPOCHS = 100000


def epoch_seed(seed, epoch):
    """32-byte seed of window ``epoch`` derived from the run's ``seed`` (bytes)."""
    return hashlib.sha256(b"edgesynth-epoch-seed" + bytes(seed) + epoch.to_bytes(4, "big")).digest()


def window_bounds(n, k):
    """Row ranges [(start, stop), ...] of k consecutive windows over n time slots."""
    return [(e * n // k, (e + 1) * n // k) for e in range(k)]


def simulate_epochs(cfg, data, columns, epochs, seed=None, first_epoch=0, first_seq=0, **kw):
    """Frames (list of bytes) of ``epochs`` consecutive windows of ``data`` (n, d).

    ``kw`` goes to host_tools.simulate.simulate (runtime, device_id, key,
    progress, heap). Empty windows still release: the clock, not the data,
    decides when a frame goes out.
    """
    if not 1 <= epochs <= MAX_EPOCHS:
        raise InputError("--epochs must be in 1..%d" % MAX_EPOCHS)
    if first_epoch + epochs > 1 << 32 or first_seq + epochs > 1 << 32:
        raise InputError("epoch and sequence numbers must stay below 2**32")
    data = np.asarray(data)
    frames = []
    for e, (a, b) in enumerate(window_bounds(len(data), epochs)):
        epoch = first_epoch + e
        s = seed if seed is None or epochs == 1 else epoch_seed(seed, epoch)
        frames.append(simulate(cfg, data[a:b], columns, seed=s, epoch=epoch, seq=first_seq + e, **kw))
    return frames
