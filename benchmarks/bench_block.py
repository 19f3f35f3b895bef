"""Per-reading ``update`` vs ``update_block`` (agent/privhp/block.py), side by side in one run.

    python3 benchmarks/bench_block.py            # about 30 s
    python3 benchmarks/bench_block.py --quick    # smoke run
    python3 benchmarks/bench_block.py --block 64 --n 65536 --rounds 7

The 16-level, j=2 device config (d=2, r=16, k=64, w=256, count-min, integer
bounds 0..4096, planner budget split) fed with ADC-like readings: two
correlated 12-bit channels (slow waves plus noise, codes 0..4095) held as
``array('H')`` blocks, as ``ADC.read_timed`` fills them.

* CPython: per-reading ``Agent.update_many`` over tuples of ints, against
  ``update_block`` with the numeric facade's numpy backend and its array
  backend; rounds interleaved, medians reported.
* MicroPython (the unix port on PATH, no ulab, so the array backend): the
  same config and readings (passed as files) in a child process running
  this very script; skipped with a note if ``micropython`` is missing.

Every configuration is checked to leave the same frame as per-reading updates
(the config's frame digest is printed). Prints a markdown table; appends
nothing (the caller adds it to RESULTS.md).
"""
import sys

MP = sys.implementation.name == "micropython"


def _generic_paths(mask, bm, n, plan):
    """Ablation: agent/privhp/block.py's scalar loop with PrivHP.update's full hash
    (all three limbs at every level, rows not unrolled). Installed as
    ``mech._block_plan = (_generic_paths, mech)`` it shows how much of the
    block speed-up comes from the vectorised division alone."""
    mech = plan[1]
    tl = mech.tree_levels
    sl = mech.sketch_levels
    for j in range(n):
        v = 0
        o = j
        for i, tab in tl:
            v = v + v + bm[o]
            o += n
            tab[v] += 1
        for i, nb, rows in sl:
            v = v + v + bm[o]
            o += n
            node = v + nb
            x0 = node & 16383
            x1 = (node >> 14) & 16383
            x2 = node >> 28
            for b, a1, a2, a3, tab in rows:
                tab[(b + a1 * x0 + a2 * x1 + a3 * x2) % 32749 & mask] += 1


# ------------------------------------------------------------ MicroPython child
def mp_child(argv):
    """micropython bench_block.py --child CFG.json DATA.u16 N BLOCK ROUNDS"""
    import gc
    import hashlib
    import json
    import time
    from array import array

    from edgesynth import agent
    from edgesynth.agent.privhp.block import update_block
    from edgesynth.firmware_shims import numeric

    cfg_path, data_path = argv[2], argv[3]
    n, block, rounds = int(argv[4]), int(argv[5]), int(argv[6])
    with open(cfg_path) as fh:
        cfg = json.loads(fh.read())
    with open(data_path, "rb") as fh:
        raw = fh.read()                  # bytes: array() copies them raw
    both = array("H", raw)               # x0, x1 interleaved, little-endian
    raw = None
    c0 = array("H", [both[2 * i] for i in range(n)])
    c1 = array("H", [both[2 * i + 1] for i in range(n)])
    both = None
    rows = [(c0[i], c1[i]) for i in range(n)]
    blocks = [(c0[i:i + block], c1[i:i + block]) for i in range(0, n, block)]
    gc.collect()

    def digest(a):
        h = hashlib.sha256()

        def sink(buf, k):
            h.update(buf if k == len(buf) else memoryview(buf)[:k])
        a.release(sink)
        return "".join(["%02x" % b for b in h.digest()])

    a_up = agent.Agent(cfg, seed=b"bench-block-seed")
    a_bl = agent.Agent(cfg, seed=b"bench-block-seed")
    a_gen = agent.Agent(cfg, seed=b"bench-block-seed")
    m_bl = a_bl.mechs[0]
    m_gen = a_gen.mechs[0]
    m_gen._block_plan = (_generic_paths, m_gen)
    times_up = []
    times_bl = []
    times_gen = []
    for _ in range(rounds):
        gc.collect()
        t0 = time.ticks_us()
        a_up.update_many(rows)
        times_up.append(time.ticks_diff(time.ticks_us(), t0))
        for m, ts in ((m_bl, times_bl), (m_gen, times_gen)):
            gc.collect()
            t0 = time.ticks_us()
            for cols in blocks:
                update_block(m, cols)
            ts.append(time.ticks_diff(time.ticks_us(), t0))
    for ts in (times_up, times_bl, times_gen):
        ts.sort()
    print("backend", numeric.BACKEND)
    print("update_us", times_up[len(times_up) // 2])
    print("block_us", times_bl[len(times_bl) // 2])
    print("generic_us", times_gen[len(times_gen) // 2])
    print("frames", digest(a_up), digest(a_bl), digest(a_gen))
    print("version", ".".join([str(v) for v in sys.implementation.version[:3]]))


# -------------------------------------------------------------- CPython driver
def _adc_stream(n, seed):
    """Two correlated 12-bit ADC channels: slow waves + noise, codes 0..4095."""
    import numpy as np
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    base = 2048 + 1200 * np.sin(2 * np.pi * t / 5000.0) + 300 * np.sin(2 * np.pi * t / 377.0)
    x0 = base + rng.normal(0, 60, n)
    x1 = 0.6 * base + 700 + 400 * np.cos(2 * np.pi * t / 1300.0) + rng.normal(0, 90, n)
    out = np.stack([x0, x1], axis=1)
    return np.clip(np.rint(out), 0, 4095).astype(np.uint16)


def _frame_digest(a):
    import hashlib
    return hashlib.sha256(bytes(a.release())).hexdigest()


def main(argv=None):
    import argparse
    import json
    import os
    import platform
    import shutil
    import subprocess
    import tempfile
    import time
    from array import array

    import numpy as np

    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    if root not in sys.path:
        sys.path.insert(0, root)
    sys.path.insert(0, here)
    import common as C

    from edgesynth import agent
    from edgesynth.agent.privhp.block import update_block
    from edgesynth.firmware_shims import numeric

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small inputs, few rounds (smoke run)")
    ap.add_argument("--n", type=int, default=None, help="readings per round (default 65536; quick 8192)")
    ap.add_argument("--block", type=int, default=256, help="readings per update_block call (default 256)")
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 5; quick 3)")
    ap.add_argument("--mp-heap", default="8M", help="micropython -X heapsize for the child (default 8M)")
    args = ap.parse_args(argv)
    n = args.n or (8192 if args.quick else 65536)
    rounds = args.rounds or (3 if args.quick else 5)
    block = args.block
    t_start = time.perf_counter()

    cfg = C.make_config(2, 16, 64, 256, 2, lo=[0, 0], hi=[4096, 4096], hash_seed="bench-block")
    data = _adc_stream(n, 2026)
    c0 = array("H", data[:, 0].tolist())
    c1 = array("H", data[:, 1].tolist())
    rows = [tuple(r) for r in data.tolist()]
    blocks = [(c0[i:i + block], c1[i:i + block]) for i in range(0, n, block)]

    # ---- CPython, interleaved ------------------------------------------------
    seed = b"bench-block-seed"
    agents = {"update": agent.Agent(cfg, seed=seed), "numpy": agent.Agent(cfg, seed=seed),
              "array": agent.Agent(cfg, seed=seed), "numpy generic": agent.Agent(cfg, seed=seed)}
    gm = agents["numpy generic"].mechs[0]
    gm._block_plan = (_generic_paths, gm)
    times = {k: [] for k in agents}
    for _ in range(rounds):
        for name, a in agents.items():
            t0 = time.perf_counter()
            if name == "update":
                a.update_many(rows)
            else:
                numeric.select(name.split()[0])
                m = a.mechs[0]
                for cols in blocks:
                    update_block(m, cols)
            times[name].append(time.perf_counter() - t0)
    numeric.select()
    rate = {k: n / float(np.median(v)) for k, v in times.items()}
    digests = {k: _frame_digest(a) for k, a in agents.items()}
    same = len(set(digests.values())) == 1
    print("CPython readings/s:", {k: round(v) for k, v in rate.items()}, "frames identical:", same)

    # ---- MicroPython child -----------------------------------------------------
    mp = None
    mp_note = ""
    exe = shutil.which("micropython")
    if exe is None:
        mp_note = "micropython not on PATH: MicroPython row skipped"
    else:
        with tempfile.TemporaryDirectory() as tmp:
            cfg_path = os.path.join(tmp, "cfg.json")
            data_path = os.path.join(tmp, "data.u16")
            with open(cfg_path, "w") as fh:
                json.dump(cfg, fh)
            data.astype("<u2").tofile(data_path)
            env = dict(os.environ)
            env["MICROPYPATH"] = "%s:.frozen" % root
            r = subprocess.run([exe, "-X", "heapsize=" + args.mp_heap, os.path.abspath(__file__), "--child",
                                cfg_path, data_path, str(n), str(block), str(rounds)],
                               cwd=root, env=env, capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            mp_note = "MicroPython child failed (rc %d): %s" % (r.returncode, (r.stderr or r.stdout)[-300:])
        else:
            out = {}
            for line in r.stdout.splitlines():
                parts = line.split()
                out[parts[0]] = parts[1:]
            mp = {"backend": out["backend"][0], "version": out["version"][0],
                  "update": n / (int(out["update_us"][0]) * 1e-6),
                  "block": n / (int(out["block_us"][0]) * 1e-6),
                  "generic": n / (int(out["generic_us"][0]) * 1e-6),
                  "same": out["frames"][0] == out["frames"][1] == out["frames"][2],
                  "matches_cpython": out["frames"][0] == digests["update"]}
            print("MicroPython readings/s:", {k: (round(v) if isinstance(v, float) else v) for k, v in mp.items()})
    if mp_note:
        print(mp_note)

    # ---- table ---------------------------------------------------------------------
    def fmt(v):
        return "%.0f (%.2f µs)" % (v, 1e6 / v)

    lines = ["### update_block vs per-reading update (agent/privhp/block.py)", "",
             "d=2 r=16 k=64 w=256 cms j=2, integer bounds 0..4096, ADC-like 12-bit `array('H')` readings; "
             "%d readings per round, blocks of %d, median of %d interleaved rounds. "
             "Readings/s (µs per reading)." % (n, block, rounds), "",
             "| runtime | facade backend | per-reading `update` | `update_block` | ratio block / update "
             "| frame identical |",
             "|---|---|---|---|---|---|"]
    py = "CPython %s, numpy %s" % (platform.python_version(), np.__version__)
    for name in ("numpy", "array"):
        lines.append("| %s | %s | %s | %s | **%.2fx** | %s |"
                     % (py, name, fmt(rate["update"]), fmt(rate[name]), rate[name] / rate["update"],
                        "yes" if digests[name] == digests["update"] else "**NO**"))
    if mp is not None:
        mpname = "MicroPython %s unix port (`-X heapsize=%s`)" % (mp["version"], args.mp_heap)
        lines.append("| %s | %s | %s | %s | **%.2fx** | %s |"
                     % (mpname, mp["backend"], fmt(mp["update"]), fmt(mp["block"]),
                        mp["block"] / mp["update"],
                        ("yes" if mp["same"] else "**NO**") + (", = CPython's" if mp["matches_cpython"]
                                                               else ", **differs from CPython's**")))
    else:
        lines.append("| MicroPython | array | - | - | - | %s |" % mp_note)
    lines.append("| ablation: %s | numpy, scalar loop with update's full hash | %s | %s | %.2fx | %s |"
                 % (py, fmt(rate["update"]), fmt(rate["numpy generic"]), rate["numpy generic"] / rate["update"],
                    "yes" if digests["numpy generic"] == digests["update"] else "**NO**"))
    if mp is not None:
        lines.append("| ablation: %s | array, scalar loop with update's full hash | %s | %s | %.2fx | %s |"
                     % (mpname, fmt(mp["update"]), fmt(mp["generic"]), mp["generic"] / mp["update"],
                        "yes" if mp["same"] else "**NO**"))
    lines += ["", "CPython rows share one per-reading figure (measured in the same rounds). The block "
              "path still runs one scalar Python loop per reading for the tree increments and the "
              "sketch hashes (j x (r - L) = 20 hashes per reading here), so the ratio is bounded by "
              "that loop; the vectorised part is the clamp and the 16 long-division steps. The "
              "ablation rows swap in a scalar loop that hashes like `PrivHP.update` (all three "
              "14-bit limbs at every level, rows not unrolled): the gap between them and the "
              "block rows is what leaving out the zero limbs and unrolling j=2 adds, which "
              "`PrivHP.update` could adopt too.",
              "", "- frame sha256 (all runtimes): `%s`" % digests["update"][:16],
              "- wall time of the run: %.0f s" % (time.perf_counter() - t_start)]
    print()
    print("\n".join(lines))
    return 0 if same and (mp is None or (mp["same"] and mp["matches_cpython"])) else 1


if __name__ == "__main__":
    if MP:
        if len(sys.argv) < 7 or sys.argv[1] != "--child":
            print("usage (MicroPython): bench_block.py --child CFG DATA N BLOCK ROUNDS")
            sys.exit(2)
        mp_child(sys.argv)
    else:
        sys.exit(main())
