"""PHDStream update + step throughput, the same script under MicroPython and
CPython (benchmarks/bench_phdstream.py --mp runs both side by side):

    micropython phd_mp_rate.py EVENTS COUNTER MAX_NODES BATCH DEPTH   (MICROPYPATH=<repo>)
    python3     phd_mp_rate.py EVENTS COUNTER MAX_NODES BATCH DEPTH   (PYTHONPATH=<repo>)

EVENTS is a text file of "x y op" lines (readings in [0, 2**16)). Prints
"windows events_per_second sha256-of-all-payloads": the digest must be the
same on both interpreters (the frames are byte-identical).
"""
import hashlib
import sys
from array import array

try:
    from time import ticks_diff, ticks_us  # MicroPython

    def now():
        return ticks_us()

    def seconds(a, b):
        return ticks_diff(b, a) / 1e6
except ImportError:
    from time import perf_counter

    def now():
        return perf_counter()

    def seconds(a, b):
        return b - a

from agent.msgpack_out import Encoder
from agent.phdstream import PHDStream
from firmware_shims.drbg import seeded_source


def main(path, counter, max_nodes, batch, depth):
    xs = array("i")
    ys = array("i")
    ops = array("i")
    with open(path) as fh:
        for line in fh:
            a, b, c = line.split()
            xs.append(int(a))
            ys.append(int(b))
            ops.append(int(c))
    spec = {"kind": "phdstream", "lo": [0, 0], "hi": [1 << 16, 1 << 16], "depth": depth, "eps": [1, 1],
            "counter": counter, "max_nodes": max_nodes, "batch_max": batch, "snap": 16, "rate_bound": True}
    if counter == "block":
        spec["block"] = 8
    m = PHDStream(spec)
    m.draw_noise(seeded_source(b"phd-mp-rate"))
    h = hashlib.sha256()
    enc = Encoder()

    def sink(buf, n):
        h.update(bytes(buf[:n]))
    row = [0, 0, 0]
    n = len(xs)
    spent = 0.0
    windows = 0
    for start in range(0, n, batch):
        t = now()
        for i in range(start, min(n, start + batch)):
            row[0] = xs[i]
            row[1] = ys[i]
            row[2] = ops[i]
            m.update(row)
        m.step()
        spent += seconds(t, now())
        windows += 1
        enc.reset(sink)
        m.encode(enc)
    print(windows, n / spent, "".join("%02x" % b for b in h.digest()))


main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
