"""Speed of the agent and the host tools, side by side in one run.

    python3 benchmarks/bench_speed.py            # full (about 1-2 minutes)
    python3 benchmarks/bench_speed.py --quick    # smaller inputs, fewer repeats
    python3 benchmarks/bench_speed.py --no-append

Measures (each a median over repeats, interleaving the configurations that are
compared so that load from other users hits them alike):

* pure-Python per-item update throughput (``Agent.update_many`` over tuples) of
  the 16-level config d=2, r=16, k=64, w=256, count-min, with j=2 and j=1
  (the j=1 figure is compared with the 140k items/s anchor); also integer
  readings (ADC codes, the allocation-free path) for j=2;
* numpy-batched throughput (``edgesynth.mechanisms.privhp.vector.ingest``) on the same configs,
  n = 2e6, and the ratio batched / per-item;
* agent construction time (every counter's exact discrete-Laplace draw);
* release time and frame size, and frame parse time on the host;
* assemble time (``assemble_privhp``: merge + growth + generator) for k=1024,
  r=24, d=2, w=256, j=2 after 1e5 readings, median of 5;
* sampling throughput of ``Generator.sample`` for 10M points.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import numpy as np  # noqa: E402

from edgesynth.frames import iter_frames  # noqa: E402
from edgesynth.mechanisms.privhp.generator import assemble_privhp  # noqa: E402
from edgesynth.mechanisms.privhp.vector import ingest  # noqa: E402

ANCHOR_J1 = 140_000  # items/s, pure-Python per-item update, 16 levels, j=1 (earlier measurement)
TARGETS = {
    "per_item": 150_000,      # items/s, 16 levels, j=2
    "batched": 10_000_000,    # items/s
    "assemble": 0.2,          # s, k=1024, r=24
    "sampling": 10_000_000,   # points/s
}


def throughput_per_item(agents, rows, rounds):
    """Median items/s of update_many(rows) for each agent, interleaved."""
    times = {name: [] for name in agents}
    for _ in range(rounds):
        for name, a in agents.items():
            t0 = time.perf_counter()
            a.update_many(rows[name] if isinstance(rows, dict) else rows)
            times[name].append(time.perf_counter() - t0)
    n = {name: len(rows[name] if isinstance(rows, dict) else rows) for name in agents}
    return ({name: n[name] / float(np.median(ts)) for name, ts in times.items()},
            {name: n[name] / float(np.min(ts)) for name, ts in times.items()})


def throughput_batched(mechs, data, rounds):
    times = {name: [] for name in mechs}
    for _ in range(rounds):
        for name, m in mechs.items():
            t0 = time.perf_counter()
            ingest(m, data)
            times[name].append(time.perf_counter() - t0)
    return ({name: data.shape[0] / float(np.median(ts)) for name, ts in times.items()},
            {name: data.shape[0] / float(np.min(ts)) for name, ts in times.items()})


def status(ok):
    return "met" if ok else "**not met**"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small inputs and few repeats (smoke run)")
    ap.add_argument("--no-append", action="store_true", help="print only; do not append to RESULTS.md")
    args = ap.parse_args(argv)
    info = C.machine_info()
    t_start = time.perf_counter()

    quick = args.quick
    n_item = 20_000 if quick else 100_000
    rounds = 3 if quick else 5
    n_batch = 200_000 if quick else 2_000_000
    n_sample = 1_000_000 if quick else 10_000_000
    rng = np.random.default_rng(2024)

    cfg = {"j=2": C.make_config(2, 16, 64, 256, 2, hash_seed="speed"),
           "j=1": C.make_config(2, 16, 64, 256, 1, hash_seed="speed")}
    cfg_int = C.make_config(2, 16, 64, 256, 2, lo=[0, 0], hi=[65535, 65535], hash_seed="speed")

    # ---- per-item updates (pure Python) --------------------------------------
    x = rng.random((n_item, 2))
    rows_float = [tuple(r) for r in x.tolist()]
    rows_int = [tuple(r) for r in np.floor(x * 65536).astype(int).tolist()]
    agents = {"j=2": C.build_agent(cfg["j=2"], b"speed-j2-seed-00"),
              "j=1": C.build_agent(cfg["j=1"], b"speed-j1-seed-00"),
              "j=2 int": C.build_agent(cfg_int, b"speed-j2i-seed-0")}
    rows = {"j=2": rows_float, "j=1": rows_float, "j=2 int": rows_int}
    per_item, per_item_best = throughput_per_item(agents, rows, rounds)
    print("per-item items/s:", {k: round(v) for k, v in per_item.items()})

    # ---- numpy-batched ingestion ----------------------------------------------
    xb = rng.random((n_batch, 2))
    mechs = {name: C.build_agent(c, b"speed-batch-seed").mechs[0] for name, c in cfg.items()}
    batched, batched_best = throughput_batched(mechs, xb, rounds)
    print("batched items/s:", {k: round(v) for k, v in batched.items()})

    # ---- construction (noise draws), release, parse ----------------------------
    construct, release, parse, frame_size, counters = {}, {}, {}, {}, {}
    for name, c in cfg.items():
        ts, tr, tp = [], [], []
        for i in range(rounds):
            seed = b"speed-construct-%02d" % i
            t0 = time.perf_counter()
            a = C.build_agent(c, seed)
            ts.append(time.perf_counter() - t0)
            m = a.mechs[0]
            counters[name] = C.n_noise_draws(c)  # every counter plus the clamp count
            ingest(m, xb[:10_000])
            t0 = time.perf_counter()
            frame = a.release()
            tr.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            list(iter_frames(frame))
            tp.append(time.perf_counter() - t0)
            frame_size[name] = len(frame)
        construct[name], release[name], parse[name] = (float(np.median(v)) for v in (ts, tr, tp))
    print("construct s:", construct, "release s:", release, "frame bytes:", frame_size)

    # ---- assemble k=1024, r=24 -------------------------------------------------
    cfg_big = C.make_config(2, 24, 1024, 256, 2, hash_seed="speed-assemble")
    a = C.build_agent(cfg_big, b"speed-assemble-0")
    ingest(a.mechs[0], rng.random((100_000, 2)))
    frame_big = a.release()
    t_parse_big, _ = C.median_time(lambda: list(iter_frames(frame_big)), 5)
    rels = list(iter_frames(frame_big))
    gens = []
    t_assemble, t_assemble_all = C.median_time(lambda: gens.append(assemble_privhp(rels)), 5)
    gen = gens[-1]
    n_leaves = gen.prob.size
    print("assemble k=1024 r=24: %.3f s (all %s), %d leaves" % (t_assemble, t_assemble_all, n_leaves))

    # ---- sampling ----------------------------------------------------------------
    srng = np.random.default_rng(7)
    t_sample, t_sample_all = C.median_time(lambda: gen.sample(n_sample, srng), 3)
    sampling = n_sample / t_sample
    print("sampling %d points: %.3f s -> %.3g points/s" % (n_sample, t_sample, sampling))

    # ---- report -------------------------------------------------------------------
    rows_md = [
        ["per-item update, pure Python (`update_many`, float readings)", "d=2 r=16 k=64 w=256 cms **j=2**",
         "%.0f items/s (%.2f µs/item); best round %.0f/s" % (per_item["j=2"], 1e6 / per_item["j=2"],
                                                             per_item_best["j=2"]),
         ">= 150k/s", status(per_item["j=2"] >= TARGETS["per_item"])],
        ["per-item update, pure Python (float readings)", "same, **j=1**",
         "%.0f items/s (%.2f µs/item); best round %.0f/s" % (per_item["j=1"], 1e6 / per_item["j=1"],
                                                             per_item_best["j=1"]),
         "anchor 140k/s", "%.2fx the anchor" % (per_item["j=1"] / ANCHOR_J1)],
        ["per-item update, pure Python (integer ADC codes)", "same, j=2, bounds 0..65535",
         "%.0f items/s" % per_item["j=2 int"], "-", "-"],
        ["numpy-batched (`edgesynth.mechanisms.privhp.vector.ingest`), n=%.0e" % n_batch, "same, j=2",
         "%.3g items/s; best round %.3g/s" % (batched["j=2"], batched_best["j=2"]), ">= 10M/s",
         status(batched["j=2"] >= TARGETS["batched"])],
        ["numpy-batched, n=%.0e" % n_batch, "same, j=1",
         "%.3g items/s; best round %.3g/s" % (batched["j=1"], batched_best["j=1"]), "-", "-"],
        ["ratio j=2 / j=1", "per-item (batched)", "%.2f (%.2f)" % (per_item["j=2"] / per_item["j=1"],
                                                                batched["j=2"] / batched["j=1"]), "-", "-"],
        ["ratio batched / per-item", "j=2 (j=1)",
         "%.0fx (%.0fx)" % (batched["j=2"] / per_item["j=2"], batched["j=1"] / per_item["j=1"]), "-", "-"],
        ["agent construction (exact noise draws)", "j=2: %d noise draws" % counters["j=2"],
         "%.3f s (%.1f µs/draw)" % (construct["j=2"], 1e6 * construct["j=2"] / counters["j=2"]), "-", "-"],
        ["agent construction (exact noise draws)", "j=1: %d noise draws" % counters["j=1"],
         "%.3f s (%.1f µs/draw)" % (construct["j=1"], 1e6 * construct["j=1"] / counters["j=1"]), "-", "-"],
        ["release (encode one frame)", "j=2 (j=1)",
         "%.1f ms (%.1f ms); frame %d B (%d B)" % (1e3 * release["j=2"], 1e3 * release["j=1"],
                                                   frame_size["j=2"], frame_size["j=1"]), "-", "-"],
        ["host frame parse + validation (`iter_frames`)", "j=2 (j=1)",
         "%.2f ms (%.2f ms)" % (1e3 * parse["j=2"], 1e3 * parse["j=1"]), "-", "-"],
        ["host frame parse (`iter_frames`)", "d=2 r=24 k=1024 w=256 j=2, %d B frame" % len(frame_big),
         "%.2f ms" % (1e3 * t_parse_big), "-", "-"],
        ["assemble (`assemble_privhp`: merge, growth, generator), median of 5",
         "d=2 r=24 k=1024 w=256 j=2, 1e5 readings; %d leaves" % n_leaves,
         "%.3f s (min %.3f, max %.3f)" % (t_assemble, min(t_assemble_all), max(t_assemble_all)),
         "< 0.2 s", status(t_assemble < TARGETS["assemble"])],
        ["sampling (`Generator.sample`), %.0e points, median of 3" % n_sample, "the generator above",
         "%.3g points/s (%.2f s)" % (sampling, t_sample), ">= 10M/s", status(sampling >= TARGETS["sampling"])],
    ]
    table = C.md_table(["what", "config", "measured", "target", "status"], rows_md)
    notes = ("Per-item and batched figures interleave the configurations round by round (%d rounds of "
             "%d items per-item; %d rounds of %d rows batched) and report medians (and the best round: "
             "the machine is shared, so a busy neighbour lowers medians). Readings are uniform "
             "on [0,1)^2 as Python float tuples unless stated. Construction draws every counter's exact "
             "discrete-Laplace noise from the HMAC-DRBG (the agent's own sampler)."
             % (rounds, n_item, rounds, n_batch))
    md = ("### Speed%s\n\n%s\n\n%s\n" % (" (quick mode: smaller inputs, not comparable with full runs)"
                                         if quick else "", table, notes))
    print()
    print(md)
    if not args.no_append:
        C.results_append(md, title="bench_speed" + (" --quick" if quick else ""),
                         elapsed=time.perf_counter() - t_start, info=info)


if __name__ == "__main__":
    main()
