"""Test helpers: run the real agent over arrays and decode its frame."""
import numpy as np

from edgesynth import agent
from edgesynth.frames import iter_frames
from edgesynth.runtimes.simulate import as_readings


def release(cfg, data, seed=b"test-seed-000000", **kw):
    """Frame bytes of an agent that saw ``data`` (n, d)."""
    a = agent.Agent(cfg, seed=seed, **kw)
    a.update_many(as_readings(np.asarray(data, dtype=float), cfg))
    return a.release()


def state_of(cfg, data, seed=b"test-seed-000000"):
    """The decoded host-side PrivHP state of one release."""
    rel = next(iter_frames(release(cfg, data, seed)))
    return rel.mechs[0]
