"""Long fuzz run of the host's frame reader (issue target: 0 crashes over
>= 100k fuzzed frames).

Engine: atheris (coverage-guided libFuzzer over instrumented host_tools
modules) when it imports, else in-process random mutation. Each input's first
byte picks what the rest is fed to:

* 0: a frame file read without keys (envelope, decoder, schema);
* 1: a payload wrapped in a correctly tagged envelope and read with the key,
     so mutations reach the decoder and schema behind the tag check;
* 2: a frame file read with a keyring (tag verification of mutated frames);
* 3: a frame file read without keys, then every valid release assembled into
     a generator (merge, growth, consistency on hostile counters).

A crash is any exception other than FrameError / MergeError (EdgesynthError),
a hang beyond libFuzzer's -timeout, or memory beyond -rss_limit_mb. The seed
corpus holds valid frames of several configs (count-min and count sketch,
add/remove and replace, tagged and untagged, ~1 KiB to ~20 KiB).

    python3 benchmarks/fuzz_frames.py [--runs 200000] [--engine atheris|mutate] [--no-append]
"""
import argparse
import collections
import hashlib
import hmac
import json
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]
# benchmarks/common (which imports host_tools) is imported in the parent only:
# the atheris child must import edgesynth under instrumentation first.

KEY = b"fuzz-key-0123456789abcdef0123456"
DEVICE = b"fz"


def envelope(payload, key=KEY):
    head = b"\x94\xa4ESF1" + bytes([0xA0 | len(DEVICE)]) + DEVICE + b"\xc6" + struct.pack(">I", len(payload))
    body = head + payload
    return body + b"\xc4\x20" + hmac.new(key, body, hashlib.sha256).digest()


def seed_corpus():
    """Valid frames of several shapes, as (mode byte + body) inputs."""
    import common as C
    import numpy as np

    from edgesynth import agent
    from edgesynth.frames import split_envelope
    rng = np.random.default_rng(0)
    shapes = [dict(d=1, r=6, k=8, w=8, j=1), dict(d=2, r=8, k=8, w=16, j=2),
              dict(d=2, r=10, k=16, w=32, j=3, sketch="cs"), dict(d=2, r=12, k=2048, w=1024, j=1),
              dict(d=3, r=9, k=64, w=16, j=2, relation="replace")]
    out = []
    for i, sh in enumerate(shapes):
        cfg = C.make_config(**sh)
        a = agent.Agent(cfg, seed=b"fuzz-seed-%d" % i, device_id=DEVICE.decode(), epoch=i, seq=i,
                        key=KEY if i % 2 else None)
        for x in rng.random((200, sh["d"])):
            a.update(tuple(float(v) for v in x))
        f = bytes(a.release())
        _, s, e, _, _ = split_envelope(f)
        out += [b"\x00" + f, b"\x01" + f[s:e], b"\x02" + f, b"\x03" + f]
    return out


def make_target(counts):
    from edgesynth.errors import EdgesynthError
    from edgesynth.frames import iter_frames
    from edgesynth.mechanisms.privhp.generator import assemble_privhp

    key_for = {DEVICE.decode(): KEY}.get

    def one_input(data):
        if not data:
            return
        mode, body = data[0] & 3, bytes(data[1:])
        try:
            if mode == 0:
                list(iter_frames(body))
            elif mode == 1:
                list(iter_frames(envelope(body), key_for=key_for, require_tag=True))
            elif mode == 2:
                list(iter_frames(body, key_for=key_for, require_tag=True))
            else:
                rels = list(iter_frames(body))
                if rels:
                    assemble_privhp(rels)
            counts["accepted"] += 1
        except EdgesynthError as e:
            counts[type(e).__name__] += 1
        counts["inputs"] += 1

    return one_input


def child(corpus_dir, runs, stats_path, seed):
    import atheris
    with atheris.instrument_imports():
        import edgesynth.frames  # noqa: F401
        import edgesynth.mechanisms.privhp.growth  # noqa: F401
        import edgesynth.mechanisms.privhp.wire  # noqa: F401
        import edgesynth.merge  # noqa: F401
    counts = collections.Counter()
    target = make_target(counts)

    def one_input(data):
        target(data)
        if counts["inputs"] % 2000 == 0:
            with open(stats_path, "w") as fh:
                json.dump(counts, fh)

    atheris.Setup([sys.argv[0], "-runs=%d" % runs, "-seed=%d" % seed, "-max_len=65536", "-timeout=10",
                   "-rss_limit_mb=2048", "-print_final_stats=1", corpus_dir], one_input)
    atheris.Fuzz()


def run_atheris(runs, seed):
    work = tempfile.mkdtemp(prefix="edgesynth-fuzz-")
    corpus = os.path.join(work, "corpus")
    os.mkdir(corpus)
    for i, s in enumerate(seed_corpus()):
        with open(os.path.join(corpus, "seed%02d" % i), "wb") as fh:
            fh.write(s)
    stats = os.path.join(work, "stats.json")
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", corpus, "--runs", str(runs),
                        "--stats", stats, "--seed", str(seed)], cwd=work, capture_output=True, text=True)
    elapsed = time.monotonic() - t0
    log = p.stderr
    done = re.search(r"Done (\d+) runs in (\d+) second", log)
    execs = int(done.group(1)) if done else None
    counts = json.load(open(stats)) if os.path.exists(stats) else {}
    crashes = [f for f in os.listdir(work) if f.startswith(("crash-", "timeout-", "oom-", "leak-"))]
    cov = re.findall(r"cov: (\d+) ft: (\d+)", log)
    return {"engine": "atheris %s" % _atheris_version(), "runs": execs, "returncode": p.returncode,
            "crashes": len(crashes) + (0 if p.returncode == 0 else int(not crashes)),
            "crash_files": crashes, "work": work, "elapsed": elapsed, "counts": counts,
            "coverage": cov[-1] if cov else None, "log_tail": log.strip().splitlines()[-12:]}


def _atheris_version():
    try:
        from importlib.metadata import version
        return version("atheris")
    except Exception:
        return "?"


def run_mutate(runs, seed):
    """Random mutation without coverage feedback (flip, cut, insert, splice, header smash)."""
    rnd = random.Random(seed)
    corpus = seed_corpus()
    counts = collections.Counter()
    target = make_target(counts)
    crashes = []
    t0 = time.monotonic()
    for _ in range(runs):
        buf = bytearray(rnd.choice(corpus))
        for _ in range(rnd.randint(1, 8)):
            op, pos = rnd.randrange(5), rnd.randrange(1, max(2, len(buf)))
            if op == 0:
                buf[pos % len(buf)] ^= 1 << rnd.randrange(8)
            elif op == 1:
                del buf[pos:pos + rnd.randint(1, 64)]
            elif op == 2:
                buf[pos:pos] = os.urandom(rnd.randint(1, 16))
            elif op == 3:
                other = rnd.choice(corpus)
                a = rnd.randrange(len(other))
                buf[pos:pos] = other[a:a + rnd.randint(1, 256)]
            else:
                buf[pos:pos + 4] = rnd.choice([b"\xff\xff\xff\xff", b"\x00\x00\x00\x00", b"\x7f\xff\xff\xff"])
        try:
            target(bytes(buf))
        except Exception as e:  # anything but EdgesynthError is a crash
            crashes.append((repr(e)[:200], bytes(buf[:64]).hex()))
            counts["inputs"] += 1
    return {"engine": "random mutation", "runs": runs, "returncode": 0, "crashes": len(crashes),
            "crash_files": crashes[:5], "elapsed": time.monotonic() - t0, "counts": counts, "coverage": None}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200000)
    ap.add_argument("--engine", choices=["atheris", "mutate"], default=None)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-append", action="store_true")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--stats", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.runs, a.stats, a.seed)
        return
    import common as C
    engine = a.engine
    if engine is None:
        try:
            import atheris  # noqa: F401
            engine = "atheris"
        except ImportError:
            engine = "mutate"
    r = run_atheris(a.runs, a.seed) if engine == "atheris" else run_mutate(a.runs, a.seed)
    counts = dict(sorted(r["counts"].items(), key=lambda kv: -kv[1]))
    rows = [[r["engine"], r["runs"], "%.0f" % r["elapsed"], "%.0f" % (r["runs"] / r["elapsed"]) if r["runs"] else "-",
             r["crashes"], "cov %s ft %s" % r["coverage"] if r["coverage"] else "-"]]
    text = C.md_table(["engine", "inputs", "time (s)", "inputs/s", "crashes", "libFuzzer coverage"], rows)
    text += ("\n\nOutcomes (sampled every 2000 inputs by the atheris child; exact for random mutation): "
             + ", ".join("%s %d" % kv for kv in counts.items()) + ".")
    if r["crashes"]:
        text += "\n\nCRASHES: %s (inputs kept in %s)" % (r["crash_files"], r.get("work"))
    print(text)
    if r.get("log_tail"):
        print("\n".join(r["log_tail"]), file=sys.stderr)
    if not a.no_append:
        C.results_append(text, title="fuzz_frames.py", elapsed=r["elapsed"])
    sys.exit(1 if r["crashes"] else 0)


if __name__ == "__main__":
    main()
