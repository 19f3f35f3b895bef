"""The numpy ingestion path leaves exactly the state per-item updates leave."""
import numpy as np
import pytest

from edgesynth import agent
from edgesynth.mechanisms.privhp.vector import ingest
from edgesynth.runtimes.simulate import as_readings
from tests.conftest import privhp_config

CONFIGS = {
    "cms float": privhp_config(d=2, r=16, k=64, w=256, j=2),
    "cs float": privhp_config(d=2, r=16, k=64, w=256, j=3, sketch="cs"),
    "cms int bounds": privhp_config(d=2, r=16, k=64, w=256, j=2, lo=[0, -2048], hi=[4096, 2048]),
    "pmm": privhp_config(d=1, r=10, k=4096, w=1),
    "deep 3-d": privhp_config(d=3, r=29, k=8, w=64, j=1, lo=[0.0, -1.0, 10], hi=[1.0, 1.0, 20]),
    "k=1": privhp_config(d=1, r=8, k=1, w=16, j=2),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_batch_equals_per_item(name):
    cfg = CONFIGS[name]
    m = cfg["mechanisms"][0]
    rng = np.random.default_rng(0)
    lo, hi = np.array(m["lo"], float), np.array(m["hi"], float)
    x = lo + (hi - lo) * (rng.random((3000, len(lo))) * 1.2 - 0.1)   # 10% out of range each side
    x[:20] = lo                                                      # edges exactly
    x[20:40] = hi
    if isinstance(m["lo"][0], int):
        x = np.round(x)
        x[40:50, 0] += 0.5                                           # non-integral reading on an int channel
    a = agent.Agent(cfg, seed=b"batch-seed-00000")
    a.update_many(as_readings(x, cfg))
    b = agent.Agent(cfg, seed=b"batch-seed-00000")
    ingest(b.mechs[0], x[:1234])
    ingest(b.mechs[0], x[1234:])                                     # blocks compose
    assert a.release() == b.release()
