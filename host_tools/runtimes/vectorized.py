"""The numpy runtime: the agent built as on the device, its counters filled by
each mechanism's vectorised ingestion (edgesynth.mechanisms.<name>.vector),
about 50 times faster than ``update`` per reading and byte-identical frames
(tests/test_native.py, tests/test_cdf.py, tests/test_profile.py)."""
import numpy as np

from edgesynth import agent
from edgesynth.agent.errors import SEALED, ConfigError, SealedError
from edgesynth.errors import InputError
from edgesynth.mechanisms import REGISTRY

BLOCK = 1 << 14  # rows handed to the mechanisms per call, and between progress reports


def ingest_agent(a, block):
    """Every row of ``block`` (n, inputs) into every mechanism of ``agent.Agent``
    ``a``, each on the columns it reads (its route): the effect of ``a.update``
    per row."""
    for m, (_, cols, _) in zip(a.mechs, a.routes):
        # no route: the mechanism reads the first len(names) columns in order
        ingest_any(m, block[:, :len(m.names)] if cols is None else block[:, list(cols)])


def ingest_any(mech, block):
    """Add every row of ``block`` (n, channels of ``mech``) to ``mech``."""
    if mech.sealed:
        raise SealedError(SEALED)
    REGISTRY[mech.kind].ingest(mech, np.asarray(block, dtype=np.float64))


def run_numpy(cfg, data, seed=None, device_id="device", epoch=0, seq=0, key=None, progress=None):
    """The agent's state filled by vectorised ingestion; same bytes as run_cpython."""
    try:
        a = agent.Agent(cfg, seed=seed, device_id=device_id, epoch=epoch, seq=seq, key=key)
    except ConfigError as e:
        raise InputError("invalid device config: %s" % e)
    for start in range(0, len(data), BLOCK):
        ingest_agent(a, data[start:start + BLOCK])
        if progress:
            progress(min(BLOCK, len(data) - start))
    return a.release()
