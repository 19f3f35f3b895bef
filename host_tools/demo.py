"""`edgesynth demo`: the whole path on real sensor data, in one command."""
import json
import os

import numpy as np

from edgesynth.data import datasets
from edgesynth.mechanisms.privhp.generator import assemble_privhp
from edgesynth.budget import parse_epsilon
from edgesynth.data.csvio import write_columns
from edgesynth.errors import InputError
from edgesynth.frames import iter_frames
from edgesynth.outputs import write_bytes, write_text
from edgesynth.config import parse_bounds
from edgesynth.mechanisms.privhp.plan import plan_privhp
from edgesynth.runtimes.simulate import simulate


def run_demo(out_dir, epsilon, ram, seed=None, echo=print, table=None):
    """Plan, simulate, assemble, sample, evaluate and plot; returns the report.

    The plan uses public parameters only (the bounds, the budget and the
    schedule's reading count ``datasets.N_MAX``), never the data. ``seed``
    (int or None): None draws the device's noise from fresh entropy; an int
    makes the whole run reproducible and the release NOT private.
    """
    from edgesynth.evaluation.metrics import utility_report
    from edgesynth.evaluation.plots import plot_comparison
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise InputError("%s: cannot create (%s)" % (out_dir, e.strerror or e))
    data, names = datasets.station_temperatures()
    eps = parse_epsilon(epsilon)
    lo, hi = parse_bounds(datasets.BOUNDS)
    echo("data: %d hourly readings of %s (NOAA, via vega_datasets)" % (len(data), ", ".join(names)))
    real_csv = os.path.join(out_dir, "real.csv")
    write_columns(real_csv, names, data)

    cfg = plan_privhp(lo, hi, eps, ram, names=names, n_max=datasets.N_MAX, hash_seed="edgesynth-demo")
    write_text(os.path.join(out_dir, "device.json"), json.dumps(cfg, indent=1, sort_keys=True) + "\n")
    m, p = cfg["mechanisms"][0], cfg["plan"]
    echo("plan: privhp r=%d k=%d w=%d j=%d, %d counter bytes in a %d-byte budget "
         "(MicroPython needs %d bytes beyond them), epsilon %s"
         % (m["r"], m["k"], m["w"], m["j"], p["counter_bytes"], ram, p["runtime_overhead_bytes"], eps))

    frame = simulate(cfg, data, names, seed=None if seed is None else seed.to_bytes(8, "big"),
                     device_id="weather-gw")
    write_bytes(os.path.join(out_dir, "release.msgpack"), frame)
    echo("device: released one %d-byte frame (raw readings never leave it)%s"
         % (len(frame), "" if seed is None else "; --seed %d: reproducible noise, NOT private" % seed))

    gen = assemble_privhp(list(iter_frames(frame)))
    write_bytes(os.path.join(out_dir, "generator.msgpack"), gen.to_bytes())
    rng = np.random.default_rng(seed)
    synth = gen.sample(len(data), rng)
    write_columns(os.path.join(out_dir, "synthetic.csv"), names, synth)
    echo("host: generator with %d leaves; sampled %d synthetic rows" % (gen.leaves.level.size, len(synth)))

    lo_a, hi_a = np.array(lo, float), np.array(hi, float)
    report = utility_report(data, synth, lo_a, hi_a, names, rng)
    if table:
        table(report)
    png = plot_comparison(data, synth, names, lo_a, hi_a, os.path.join(out_dir, "comparison.png"),
                          title="edgesynth demo: real vs synthetic (epsilon %s, %d-byte device)" % (eps, ram))
    write_text(os.path.join(out_dir, "report.json"), json.dumps(report, indent=1, sort_keys=True) + "\n")
    echo("wrote %s (plot), report.json, real.csv, synthetic.csv, device.json, release.msgpack, "
         "generator.msgpack in %s" % (png, out_dir))
    return report
