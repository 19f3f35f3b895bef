"""`edgesynth demo`: the whole path on real sensor data, through the library."""
import json
import os

import numpy as np

from edgesynth.config import write_config
from edgesynth.data import datasets
from edgesynth.data.writers import write
from edgesynth.errors import InputError
from edgesynth.evaluation.plots import plot_comparison
from edgesynth.evaluation.scoring import evaluate
from edgesynth.outputs import write_bytes, write_text
from edgesynth.planning import plan
from edgesynth.simulation import simulate
from edgesynth.synthesis import assemble


class DemoResult:
    """What run_demo did: ``names`` and ``n`` (the real readings), ``config``
    (the device config), ``frame_bytes`` (the release's size), ``leaves`` (of
    the generator), ``n_synthetic`` (rows sampled), ``report`` (es.evaluate's
    figures), ``seed``, ``ram`` (the device budget, bytes), ``out_dir`` and
    ``files`` (name -> path of what was written; ``plot`` is the PNG)."""

    def __init__(self, names, n, config, frame_bytes, leaves, n_synthetic, report, seed, ram, out_dir, files):
        self.names, self.n, self.config, self.frame_bytes = names, n, config, frame_bytes
        self.leaves, self.n_synthetic, self.report, self.seed = leaves, n_synthetic, report, seed
        self.ram, self.out_dir, self.files = ram, out_dir, files


def run_demo(out_dir, epsilon=1, ram="64K", seed=None):
    """Plan, simulate, assemble, sample, evaluate and plot real hourly
    temperatures of two weather stations; returns a DemoResult.

    Writes real.csv, device.json, release.msgpack, generator.msgpack,
    synthetic.csv, report.json and comparison.png into ``out_dir``. The plan
    uses public parameters only (the bounds, the budget, ``ram`` bytes and the
    schedule's reading count ``datasets.N_MAX``), never the data. ``seed``
    (int or None): None draws the device's noise from fresh entropy; an int
    makes the whole run reproducible and the release NOT private.
    """
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise InputError("%s: cannot create (%s)" % (out_dir, e.strerror or e))
    data, names = datasets.station_temperatures()
    path = {k: os.path.join(out_dir, f) for k, f in (
        ("real", "real.csv"), ("config", "device.json"), ("frame", "release.msgpack"),
        ("generator", "generator.msgpack"), ("synthetic", "synthetic.csv"), ("report", "report.json"))}
    write(data, path["real"], names)

    cfg = plan(datasets.BOUNDS, epsilon=epsilon, ram=ram, names=names, n_max=datasets.N_MAX,
               hash_seed="edgesynth-demo")
    write_config(path["config"], cfg)
    frame = simulate(cfg, data, seed, device_id="weather-gw")
    write_bytes(path["frame"], frame)

    gen = assemble([frame])
    gen.save(path["generator"])
    rng = np.random.default_rng(seed)  # one stream for sampling and evaluation: reproducible with a seed
    synth = gen.sample_array(len(data), rng)
    write(synth, path["synthetic"], names)

    m = cfg["mechanisms"][0]
    report = evaluate(data, synth, names, bounds=list(zip(m["lo"], m["hi"])), seed=rng)
    eps = cfg["plan"]["epsilon"]
    path["plot"] = plot_comparison(data, synth, names, np.array(m["lo"], float), np.array(m["hi"], float),
                                   os.path.join(out_dir, "comparison.png"),
                                   title="edgesynth demo: real vs synthetic (epsilon %s, %d-byte device)"
                                   % (eps, cfg["plan"]["ram_bytes"]))
    write_text(path["report"], json.dumps(report, indent=1, sort_keys=True) + "\n")
    return DemoResult(names=names, n=len(data), config=cfg, frame_bytes=len(frame),
                      leaves=int(gen.model.leaves.level.size), n_synthetic=len(synth), report=report, seed=seed,
                      ram=cfg["plan"]["ram_bytes"], out_dir=out_dir, files=path)
