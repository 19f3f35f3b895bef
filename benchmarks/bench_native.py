"""The native core (agent/c) beside the Python paths, in one run.

    python3 benchmarks/bench_native.py            # full
    python3 benchmarks/bench_native.py --quick    # smaller inputs (smoke run)
    python3 benchmarks/bench_native.py --no-append

Same config and readings for every path: the 16-level config d=2, r=16, k=64,
w=256, count-min, j=2, integer bounds 0..4096, 12-bit ADC-like readings.

* pure Python: ``Agent.update_many`` over tuples (the device code on CPython);
* numpy-batched: ``edgesynth.mechanisms.privhp.vector.ingest`` on a float64 (n, 2) array;
* native batch: ``NativeAgent.update_rows`` on an int32 (n, 2) array (one cffi
  call per 2**16 rows, integer quantiser) and on float64 (float quantiser);
* native per reading: ``NativeAgent.update`` per tuple (cffi call overhead).

Medians over interleaved rounds; items/s and ratios to pure Python. Every
path's frame after the same readings is checked byte-identical. Then the core's
code size per CPU (``edgesynth.targets.firmware.build``) when the ARM toolchain is
installed. Targets (issue 4): >= 10 M items/s through the batch API (>= 50x
pure Python); core text <= 4 KiB on Cortex-M4 at -Os; RAM = counters + <= 256 B.

Then the other mechanisms in C (issue 5: same bytes, counters + small constant):
a CDF over 12-bit readings (K = 4096), a profile over 4096 dense ids, and a
device holding all three (PrivHP 16-level + CDF + profile) on one 3-column
stream: pure Python, numpy (edgesynth.runtimes.vectorized) and the native batch,
frames checked identical, and the flash of each kind's device per CPU.
"""
import argparse
import os
import shutil
import sys
import time
from fractions import Fraction

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import numpy as np  # noqa: E402

from edgesynth import agent  # noqa: E402
from edgesynth.config import (
    combine,  # noqa: E402
    with_names,  # noqa: E402
)
from edgesynth.mechanisms.cdf.plan import plan_cdf  # noqa: E402
from edgesynth.mechanisms.privhp.vector import ingest  # noqa: E402
from edgesynth.mechanisms.profile.plan import plan_profile  # noqa: E402
from edgesynth.runtimes import native  # noqa: E402
from edgesynth.runtimes.vectorized import ingest_agent  # noqa: E402

SEED = b"bench-native-seed"
TARGET_BATCH = 10_000_000
TARGET_RATIO = 50


def readings(n, seed=1):
    rng = np.random.default_rng(seed)
    x = np.clip(np.rint(rng.normal(2048, 700, (n, 2))), -50, 4150).astype(np.int32)  # some clamped
    return x


def sketch_configs():
    """(name, config with inputs, reading generator) for the CDF, profile and
    three-mechanism devices: 12-bit readings, ids skewed towards small values."""
    cdf = with_names(plan_cdf([0], [4095], Fraction(1), 4096, names=["x"]), ["x"])
    prof = with_names(plan_profile(0, 4096, 64, Fraction(1), names=["id"]), ["id"])
    hp = C.make_config(2, 16, 64, 256, j=2, lo=[0, 0], hi=[4096, 4096], eps=Fraction(1, 2))
    hp["mechanisms"][0]["names"] = ["a", "b"]
    both = with_names(combine([hp, plan_cdf([0], [4095], Fraction(1, 4), 4096, names=["a"]),
                               plan_profile(0, 4096, 64, Fraction(1, 4), names=["id"])]), ["a", "b", "id"])

    def ids(rng, n):
        return np.minimum(rng.zipf(1.3, n), 5000) - 1

    return [("cdf K=4096", cdf, lambda rng, n: readings(n, rng.integers(1 << 30))[:, :1]),
            ("profile 4096 ids, cap 64", prof, lambda rng, n: ids(rng, n)[:, None].astype(np.int32)),
            ("privhp + cdf + profile", both,
             lambda rng, n: np.c_[readings(n, rng.integers(1 << 30)), ids(rng, n)].astype(np.int32))]


def sketch_rates(n_py, n_batch, rounds):
    """Markdown rows: items/s of each path per sketch config, and identity."""
    rng = np.random.default_rng(7)
    rows, identical = [], True
    for name, cfg, gen in sketch_configs():
        x = gen(rng, n_batch)
        rows_py = [tuple(r) for r in x[:n_py].tolist()]
        a = agent.Agent(cfg, seed=SEED)
        a.update_many(rows_py)
        want = bytes(a.release())
        b = agent.Agent(cfg, seed=SEED)
        ingest_agent(b, x[:n_py].astype(np.float64))
        c = native.NativeAgent(cfg, seed=SEED)
        c.update_rows(x[:n_py])
        identical &= bytes(b.release()) == want == c.release()
        py, npy, nat = agent.Agent(cfg, seed=SEED), agent.Agent(cfg, seed=SEED), native.NativeAgent(cfg, seed=SEED)
        xf = x.astype(np.float64)
        paths = {"pure Python": (n_py, lambda: py.update_many(rows_py)),
                 "numpy": (n_batch, lambda: ingest_agent(npy, xf)),
                 "native batch": (n_batch, lambda: [nat.update_rows(x[s:s + (1 << 16)])
                                                    for s in range(0, n_batch, 1 << 16)])}
        times = {k: [] for k in paths}
        for _ in range(rounds):
            for k, (n, fn) in paths.items():
                times[k].append(timed(fn, 1))
        rate = {k: paths[k][0] / float(np.median(v)) for k, v in times.items()}
        mem = native.core_params(cfg)["mem_bytes"]
        rows.append((name, mem) + tuple("%.3g M" % (rate[k] / 1e6) for k in paths)
                    + ("%.0fx" % (rate["native batch"] / rate["pure Python"]),
                       "%.1fx" % (rate["native batch"] / rate["numpy"])))
    table = C.md_table(["device", "counters (B)", "pure Python", "numpy", "native batch",
                        "native / Python", "native / numpy"], rows)
    return table, identical


def timed(fn, rounds):
    ts = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-append", action="store_true")
    args = ap.parse_args(argv)
    if not native.available():
        sys.exit("the native core is not built (pip install -e . with a C compiler)")
    t_start = time.time()
    info = C.machine_info()
    n_py = 20_000 if args.quick else 100_000
    n_batch = 500_000 if args.quick else 4_000_000
    rounds = 3 if args.quick else 5
    cfg = C.make_config(2, 16, 64, 256, j=2, lo=[0, 0], hi=[4096, 4096])
    xi = readings(n_batch)
    xf = xi.astype(np.float64)
    rows_py = [tuple(r) for r in xi[:n_py].tolist()]

    # identity first: every path, the same n_py readings
    a = agent.Agent(cfg, seed=SEED)
    a.update_many(rows_py)
    want = bytes(a.release())
    frames = {}
    b = agent.Agent(cfg, seed=SEED)
    ingest(b.mechs[0], xf[:n_py])
    frames["numpy"] = bytes(b.release())
    for kind, arr in (("i32", xi[:n_py]), ("f64", xf[:n_py])):
        c = native.NativeAgent(cfg, seed=SEED)
        c.update_rows(arr)
        frames["native " + kind] = c.release()
    c = native.NativeAgent(cfg, seed=SEED)
    for r in rows_py:
        c.update(r)
    frames["native per reading"] = c.release()
    identical = all(f == want for f in frames.values())

    # throughput: fresh states per path (the states only grow), interleaved rounds
    py_agent = agent.Agent(cfg, seed=SEED)
    np_agent = agent.Agent(cfg, seed=SEED)
    nat = native.NativeAgent(cfg, seed=SEED)
    nat1 = native.NativeAgent(cfg, seed=SEED)
    block = 1 << 16
    paths = {
        "pure Python (Agent.update_many)": (n_py, lambda: py_agent.update_many(rows_py)),
        "numpy-batched (edgesynth.mechanisms.privhp.vector)": (n_batch, lambda: ingest(np_agent.mechs[0], xf)),
        "native batch, int32 rows": (n_batch, lambda: [nat.update_rows(xi[s:s + block])
                                                       for s in range(0, n_batch, block)]),
        "native batch, float64 rows": (n_batch, lambda: [nat.update_rows(xf[s:s + block])
                                                         for s in range(0, n_batch, block)]),
        "native per reading (cffi call each)": (n_py, lambda: [nat1.update(r) for r in rows_py]),
    }
    times = {k: [] for k in paths}
    for _ in range(rounds):
        for k, (n, fn) in paths.items():
            times[k].append(timed(fn, 1))
    rate = {k: paths[k][0] / float(np.median(v)) for k, v in times.items()}
    base = rate["pure Python (Agent.update_many)"]
    rows = [(k, "{:,}".format(paths[k][0]), "%.3g M" % (rate[k] / 1e6), "%.0f ns" % (1e9 / rate[k]),
             "%.1fx" % (rate[k] / base)) for k in paths]
    table = C.md_table(["path", "readings per round", "items/s", "per item", "vs pure Python"], rows)
    best = rate["native batch, int32 rows"]
    notes = ["- frames after the same %d readings byte-identical on every path: **%s**"
             % (n_py, "yes" if identical else "NO"),
             "- target >= 10 M items/s through the batch API: int32 rows %.3g M items/s (%s); "
             "float64 rows %.3g M items/s" % (best / 1e6, "met" if best >= TARGET_BATCH else
                                              "NOT met, %.0f%% of it" % (100 * best / TARGET_BATCH),
                                              rate["native batch, float64 rows"] / 1e6),
             "- target >= 50x pure Python: %.0fx (%s)" % (best / base, "met" if best / base >= TARGET_RATIO
                                                        else "NOT met")]
    sk_table, sk_same = sketch_rates(n_py // 2, n_batch // 4, rounds)
    size_md = ""
    if shutil.which("arm-none-eabi-gcc"):
        from edgesynth.targets.firmware import build
        srows = []
        for cpu in ("cortex-m4", "cortex-m0plus"):
            r = build(cpu, cfg)
            st, dev = r["stack"], r["devices"]
            srows.append((cpu, dev["privhp"]["text"], dev["cdf"]["text"], dev["profile"]["text"],
                          r["common"]["text"], r["float"]["privhp"]["text"], r["float"]["cdf"]["text"],
                          "%d / %d / %d + %d" % (r["state"]["es_privhp_t"], r["state"]["es_cdf_t"],
                                                 r["state"]["es_profile_t"], r["state"]["es_agent_t"]),
                          st["es_agent_init"], st["es_privhp_update_i32"], st["es_cdf_update_i32"],
                          st["es_profile_update_i32"], st["es_agent_release"]))
        size_md = ("\n### Code size per CPU (arm-none-eabi-gcc -Os; %s)\n\n%s\n\n"
                   "- device text: the integer objects a one-mechanism device links (common part: es_sha256, "
                   "es_drbg, es_dlap, es_msgpack, es_agent; privhp adds es_privhp, es_privhp_i32, es_hashing; "
                   "cdf es_cdf; profile es_profile, es_hashing); data = bss = 0 for every object; the float "
                   "paths (es_privhp_f64, es_cdf_f64) apart.\n"
                   "- state: sizeof(es_privhp_t / es_cdf_t / es_profile_t) + sizeof(es_agent_t) as compiled "
                   "for the CPU; the counters are es_<kind>_mem_size of the config.\n"
                   "- stack: worst call chain (gcc -fstack-usage frames on the -fcallgraph-info graph, "
                   "ops-table calls resolved to every kind's draw_noise/encode; library calls such as memcpy "
                   "and __aeabi_uldivmod counted as 0).\n"
                   "- target text <= 4096 B on Cortex-M4 (PrivHP device): %s\n"
                   % (build("cortex-m4")["compiler"],
                      C.md_table(["cpu", "privhp device", "cdf device", "profile device", "common part",
                                  "float privhp", "float cdf", "state (B)", "stack init",
                                  "stack privhp update", "stack cdf update", "stack profile update",
                                  "stack release"], srows),
                      "met" if srows[0][1] <= 4096 else "NOT met: %d B, %d B over"
                      % (srows[0][1], srows[0][1] - 4096)))
    sk_md = ("\n### CDF, profile and a three-mechanism device in C\n\nint32 rows, batches of 2**16; "
             "medians of %d interleaved rounds; %d readings per round for the batch paths, %d for pure "
             "Python.\n\n%s\n\n- frames identical on every path (Python, numpy, native): **%s**\n"
             % (rounds, n_batch // 4, n_py // 2, sk_table, "yes" if sk_same else "NO"))
    md = ("### Native core throughput%s\n\nd=2 r=16 k=64 w=256 cms j=2, integer bounds 0..4096; medians of "
          "%d interleaved rounds.\n\n%s\n\n%s\n%s%s" % (" (quick mode)" if args.quick else "", rounds, table,
                                                         "\n".join(notes), sk_md, size_md))
    print(md)
    if not args.no_append:
        C.results_append(md, title="bench_native.py", elapsed=time.time() - t_start, info=info)


if __name__ == "__main__":
    main()
