"""edgesynth: differentially private synthetic data from sensor streams.

A device agent keeps noisy-from-birth summaries of its readings and releases
them as frames; raw readings never leave it. The host merges frames into a
generator that samples any number of synthetic rows at no further privacy
cost. The library, with the same results as the `edgesynth` command::

    import edgesynth as es
    cfg = es.plan({"temp": (0, 110), "humid": (0, 100)}, epsilon=1, ram="32K")
    frame = es.simulate(cfg, data)        # DataFrame, dict of arrays or 2-D array
    gen = es.assemble([frame])            # gen.save(path); es.load(path)
    synth = gen.sample(10_000, seed=1)    # DataFrame with the config's columns
    report = es.evaluate(data, synth)     # dict of utility figures

Every error is an es.EdgesynthError (edgesynth.errors); library functions
never print. `edgesynth docs api` shows the whole API, `edgesynth docs` lists
the other pages (privacy, config, trust, the mechanisms).

The public names load on first use (PEP 562 ``__getattr__``): `import
edgesynth` and `edgesynth --help` stay fast (about 0.1 s), while scipy,
matplotlib and pandas load only with the functions that need them.
"""
import importlib
from typing import TYPE_CHECKING

from edgesynth.errors import (
    EdgesynthError,
    EvaluationInputError,
    FrameError,
    IngestStopped,
    InputError,
    InversionError,
    MergeError,
    StoreError,
)

# public name -> (module, attribute)
_LAZY = {
    "plan": ("edgesynth.planning", "plan"),
    "combine": ("edgesynth.planning", "combine"),
    "load_config": ("edgesynth.config", "load_config"),
    "write_config": ("edgesynth.config", "write_config"),
    "read": ("edgesynth.data.files", "read"),
    "simulate": ("edgesynth.simulation", "simulate"),
    "simulate_windows": ("edgesynth.simulation", "simulate_windows"),
    "simulate_publish": ("edgesynth.simulation", "simulate_publish"),
    "window_schedule": ("edgesynth.simulation", "window_schedule"),
    "outside_fraction": ("edgesynth.simulation", "outside_fraction"),
    "parse_time": ("edgesynth.simulation", "parse_time"),
    "read_frames": ("edgesynth.synthesis", "read_frames"),
    "assemble": ("edgesynth.synthesis", "assemble"),
    "load": ("edgesynth.synthesis", "load"),
    "Generator": ("edgesynth.synthesis", "Generator"),
    "inspect": ("edgesynth.synthesis", "inspect"),
    "write": ("edgesynth.data.writers", "write"),
    "evaluate": ("edgesynth.evaluation.scoring", "evaluate"),
    "sliced_w1": ("edgesynth.evaluation.metrics", "sliced_w1"),
    "load_schema": ("edgesynth.mechanisms.marginals.table", "load_schema"),
    "synthesize": ("edgesynth.pipeline", "synthesize"),
    "report": ("edgesynth.evaluation.report", "report"),
    "Keyring": ("edgesynth.fleet.keys", "Keyring"),
    "load_keyring": ("edgesynth.fleet.keys", "load"),
    "new_key": ("edgesynth.fleet.keys", "new_key"),
    "write_credentials": ("edgesynth.fleet.keys", "write_credentials"),
    "new_fleet_key": ("edgesynth.fleet.keys", "new_fleet_key"),
    "export_keys": ("edgesynth.fleet.keys", "export_keys"),
    "revoke_keys": ("edgesynth.fleet.keys", "revoke_keys"),
    "unrevoke_keys": ("edgesynth.fleet.keys", "unrevoke_keys"),
    "Store": ("edgesynth.fleet.store", "Store"),
    "connect_store": ("edgesynth.fleet.backends", "connect"),
    "ingest": ("edgesynth.fleet.storage", "ingest"),
    "migrate": ("edgesynth.fleet.storage", "migrate"),
    "gateway": ("edgesynth.fleet.gateway", "gateway"),
    "publish": ("edgesynth.fleet.publish", "publish"),
    "docs_path": ("edgesynth.manual", "docs_path"),
    "docs_topics": ("edgesynth.manual", "docs_topics"),
    "run_demo": ("edgesynth.demo", "run_demo"),
}

if TYPE_CHECKING:  # the same names, visible to type checkers and to tests/test_imports.py
    from edgesynth.config import load_config, write_config
    from edgesynth.data.files import read
    from edgesynth.data.writers import write
    from edgesynth.demo import run_demo
    from edgesynth.evaluation.metrics import sliced_w1
    from edgesynth.evaluation.report import report
    from edgesynth.evaluation.scoring import evaluate
    from edgesynth.fleet.backends import connect as connect_store
    from edgesynth.fleet.gateway import gateway
    from edgesynth.fleet.keys import (
        Keyring,
        export_keys,
        new_fleet_key,
        new_key,
        revoke_keys,
        unrevoke_keys,
        write_credentials,
    )
    from edgesynth.fleet.keys import load as load_keyring
    from edgesynth.fleet.publish import publish
    from edgesynth.fleet.storage import ingest, migrate
    from edgesynth.fleet.store import Store
    from edgesynth.manual import docs_path, docs_topics
    from edgesynth.mechanisms.marginals.table import load_schema
    from edgesynth.pipeline import synthesize
    from edgesynth.planning import combine, plan
    from edgesynth.simulation import (
        outside_fraction,
        parse_time,
        simulate,
        simulate_publish,
        simulate_windows,
        window_schedule,
    )
    from edgesynth.synthesis import Generator, assemble, inspect, load, read_frames

__all__ = [
    "plan", "combine", "load_config", "write_config",
    "read", "simulate", "simulate_windows", "simulate_publish", "window_schedule", "outside_fraction", "parse_time",
    "read_frames", "assemble", "load", "Generator", "inspect", "write", "evaluate", "sliced_w1", "synthesize", "report",
    "load_schema",
    "Keyring", "load_keyring", "new_key", "write_credentials", "new_fleet_key", "export_keys", "revoke_keys",
    "unrevoke_keys", "Store", "connect_store", "ingest", "migrate",
    "gateway", "publish",
    "docs_path", "docs_topics", "run_demo",
    "EdgesynthError", "InputError", "FrameError", "MergeError", "StoreError", "IngestStopped",
    "InversionError", "EvaluationInputError",
]


def __getattr__(name):
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError("module 'edgesynth' has no attribute %r" % name) from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
