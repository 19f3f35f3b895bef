"""PHDStream cross-runtime vector: print one line per window frame.

    PYTHONPATH=<repo> python tests/mp/phd_vector.py
    MICROPYPATH=<repo> micropython tests/mp/phd_vector.py

Runs the device PHDStream (each counter kind, a pool small enough to fill, a
batch that fills, noise scales doubled for replace-one neighbours)
over a fixed pseudo-random insert/delete stream with a seeded DRBG and prints
``name step length sha256-hex`` per window frame. The output must be identical
on CPython and MicroPython (tests/test_phdstream_device.py).
"""
import binascii
import hashlib

from agent.msgpack_out import Encoder
from agent.phdstream import PHDStream
from firmware_shims.drbg import seeded_source


def lcg(x):
    """One step of x -> (1021 x + 12345) mod 2**20; intermediates stay < 2**30."""
    return (1021 * x + 12345) & 0xFFFFF


def spec(counter, max_nodes, **kw):
    s = {"kind": "phdstream", "lo": [0, -50], "hi": [1000, 50], "depth": 12, "eps": [1, 1],
         "counter": counter, "max_nodes": max_nodes, "batch_max": 400, "snap": 4}
    for k in kw:
        s[k] = kw[k]
    return s


def run(name, s, windows, per_window, factor=1):
    m = PHDStream(s, factor)
    m.draw_noise(seeded_source(b"phd-vector-" + name.encode()))
    enc = Encoder()
    x = 7
    live = []  # a few live readings so that deletions remove real points
    for w in range(windows):
        for i in range(per_window):
            x = lcg(x)
            if live and x % 5 == 0:
                a, b = live.pop()
                m.update((a, b, -1))
                continue
            x = lcg(x)
            a = (x >> 3) % 1100 - 50
            x = lcg(x)
            b = (x >> 5) % 80 - 40 if w < windows // 2 else (x >> 5) % 20
            m.update((a, b, 1))
            if len(live) < 64:
                live.append((a, b))
        m.step()
        h = hashlib.sha256()

        def sink(buf, n):
            h.update(bytes(buf[:n]))
        enc.reset(sink)
        m.encode(enc)
        print("%s %d %d %s" % (name, m.t, enc.n, binascii.hexlify(h.digest()).decode()))


run("simple", spec("simple", 2000), 8, 150)
run("block", spec("block", 2000, block=4), 8, 150)
run("tree", spec("tree", 2000, horizon=4), 8, 150)
run("pool", spec("simple", 41), 6, 150)
run("full", spec("tree", 500, horizon=2, batch_max=90), 4, 150)  # a full batch refuses the rest
run("replace", spec("block", 500, block=2), 4, 150, factor=2)
run("fold", spec("block", 121, block=4, fold=1, snap=3), 10, 150)  # folds: freed pairs reused
run("foldtree", spec("tree", 81, horizon=4, fold=2), 8, 150)
