"""Host verify + decode throughput for ~20 KiB tagged frames (issue target:
>= 10,000 frames/s).

Stages, each timed over the same frame: the HMAC-SHA256 check alone
(``hmac.new`` + ``compare_digest`` over the exact bytes), the hand-parsed
envelope plus the HMAC check plus the bounded msgpack decode (what "verify +
decode" means: every byte authenticated and parsed into Python objects), and
the whole ``parse_frame`` (adds the schema check and the numpy views of the
counter blocks). Also a file of 1000 frames back to back through
``iter_frames`` with a keyring lookup per frame. Single-threaded; frames/s =
1 / median time per frame over rounds.

    python3 benchmarks/bench_verify.py [--rounds 7] [--n 3000] [--no-append]
"""
import argparse
import hashlib
import hmac
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import numpy as np  # noqa: E402

from edgesynth import agent  # noqa: E402
from edgesynth.frames import decode_payload, iter_frames, parse_frame, split_envelope  # noqa: E402

KEY = bytes(range(32))


def twenty_kib_frame():
    """A tagged PrivHP frame of about 20 KiB (2-D, r=12, k=2048, w=1024, j=1)."""
    cfg = C.make_config(2, 12, 2048, 1024, 1)
    a = agent.Agent(cfg, seed=b"bench-verify-000", device_id="gw-bench", key=KEY)
    for x in np.random.default_rng(0).random((2000, 2)):
        a.update((float(x[0]), float(x[1])))
    return bytes(a.release())


def per_frame(fn, n, rounds):
    ts = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        ts.append((time.perf_counter() - t0) / n)
    return float(np.median(ts))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--no-append", action="store_true")
    a = ap.parse_args()
    t_start = time.monotonic()
    f = twenty_kib_frame()
    dev, s, e, tag, end = split_envelope(f)
    key_for = {"gw-bench": KEY}.get

    def mac_only():
        hmac.compare_digest(hmac.new(KEY, f[:e], hashlib.sha256).digest(), tag)

    def verify_decode():
        d, s2, e2, t2, _ = split_envelope(f)
        if not hmac.compare_digest(hmac.new(key_for(d), f[:e2], hashlib.sha256).digest(), t2):
            raise AssertionError
        decode_payload(f[s2:e2])

    def full():
        parse_frame(f, key_for=key_for, require_tag=True)

    many = f * 1000

    def file_of_1000():
        for _ in iter_frames(many, key_for=key_for, require_tag=True):
            pass

    rows = []
    for name, fn, n in (("HMAC-SHA256 check only", mac_only, a.n),
                        ("verify + decode (envelope, HMAC, bounded msgpack)", verify_decode, a.n),
                        ("parse_frame (verify + decode + schema + numpy views)", full, a.n)):
        t = per_frame(fn, n, a.rounds)
        rows.append([name, "%.1f" % (t * 1e6), "%.0f" % (1 / t), "%.0f" % (len(f) / t / 2 ** 20)])
    t = per_frame(file_of_1000, 1, max(3, a.rounds // 2)) / 1000
    rows.append(["iter_frames over a 1000-frame file, keyring lookup", "%.1f" % (t * 1e6), "%.0f" % (1 / t),
                 "%.0f" % (len(f) / t / 2 ** 20)])
    text = ("Frame: %d bytes (tagged; payload %d bytes; 2-D PrivHP r=12 k=2048 w=1024 j=1). Median of %d "
            "rounds of %d calls; one core.\n\n" % (len(f), e - s, a.rounds, a.n))
    text += C.md_table(["stage", "µs / frame", "frames / s", "MiB / s"], rows)
    print(text)
    if not a.no_append:
        C.results_append(text, title="bench_verify.py", elapsed=time.monotonic() - t_start)


if __name__ == "__main__":
    main()
