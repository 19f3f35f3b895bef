"""MQTT live path throughput: `edgesynth gateway` (a subprocess) into a SQLite
store, fed through a real mosquitto by several concurrent paho publishers
(issue 15 target: >= 2,000 frames/s of ~1 KiB frames through one gateway).

Frames are real tagged frames (``agent.Agent`` with a device key and exact
noise, one per (device, epoch)), built in a process pool before the clock
starts. Each publisher client owns some devices, publishes their frames with
QoS 1 to ``edgesynth/<device>/frames/<epoch>`` keeping at most ``--window``
frames awaiting their receipt, and timestamps every publish and every receipt
(``edgesynth/<device>/receipts``) itself. Reported per frame size: frames/s from
the first publish to the last receipt, p50/p95 publish -> receipt latency, and
the gateway's peak RSS (VmHWM of /proc/PID/status). Every receipt must say
"stored" and the store must hold every frame byte-identical.

    python3 benchmarks/bench_mqtt.py [--small 10000] [--large 600] [--clients 8] [--no-append]
"""
import argparse
import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import paho.mqtt.client as mqtt  # noqa: E402
from common import ROOT, fmt_bytes, make_config, md_table, results_append  # noqa: E402

from edgesynth import agent  # noqa: E402
from edgesynth.fleet.keys import load, new_key  # noqa: E402
from tests.mqtt_broker import Broker  # noqa: E402

# (d, r, k, w): PrivHP configs whose tagged frames are ~1 KiB and ~30 KiB
SIZES = {"1 KiB": (1, 8, 64, 16), "30 KiB": (2, 15, 1024, 1024)}


def _build(args):
    """Tagged frames of ``dev`` for epochs ``epochs`` (runs in a pool worker)."""
    ring, dev, epochs, params = args
    cfg = make_config(*params)
    key = load(ring).require(dev)
    d = params[0]
    out = []
    for e in epochs:
        a = agent.Agent(cfg, seed=b"%s-%d-bench" % (dev.encode(), e), device_id=dev, epoch=e, seq=e, key=key)
        for i in range(10):
            a.update(tuple([i / 10.0] * d))
        out.append((dev, e, bytes(a.release())))
    return out


def build_frames(ring, devices, n, params):
    """n frames spread over ``devices`` (epochs 0, 1, ...), built on every core."""
    per = [list(range(i, n, len(devices))) for i in range(len(devices))]
    per = [[e // len(devices) for e in p] for p in per]
    with ProcessPoolExecutor(max(1, os.cpu_count() or 1)) as pool:
        parts = pool.map(_build, [(ring, dev, p, params) for dev, p in zip(devices, per)])
    return [f for part in parts for f in part]


class Gateway:
    """`edgesynth gateway` in a subprocess; stderr is drained by a thread."""

    def __init__(self, url, db, ring):
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.proc = subprocess.Popen([sys.executable, "-m", "edgesynth.cli", "gateway", "--broker", url,
                                      "--store", db, "--keyring", ring], cwd=ROOT, env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.err = []
        self.thread = threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True)
        self.thread.start()
        end = time.monotonic() + 30
        while not any("subscribed to" in line for line in self.err):
            if self.proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError("gateway did not subscribe: %s" % "".join(self.err))
            time.sleep(0.02)

    def peak_rss(self):
        """VmHWM of the gateway process, bytes."""
        with open("/proc/%d/status" % self.proc.pid) as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        return 0

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Publisher:
    """One paho client (clean session, QoS 1) publishing its devices' frames
    with at most ``window`` frames awaiting a receipt."""

    def __init__(self, port, name, frames, window):
        self.frames = frames
        self.window = threading.Semaphore(window)
        self.sent, self.got, self.results = {}, {}, {}
        self.done = threading.Event()
        self.subscribed = threading.Event()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=name, clean_session=True)
        self.client.max_inflight_messages_set(window)
        self.client.on_message = self._on_message
        self.client.on_subscribe = lambda *a: self.subscribed.set()
        topics = [("edgesynth/%s/receipts" % dev, 1) for dev in sorted({dev for dev, _, _ in frames})]
        self.client.on_connect = lambda c, *a: c.subscribe(topics)
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()

    def _on_message(self, client, userdata, msg):
        t = time.perf_counter()
        r = json.loads(msg.payload)
        if r["sha256"] in self.sent and r["sha256"] not in self.got:
            self.got[r["sha256"]] = t
            self.results[r["sha256"]] = r["result"]
            self.window.release()
            if len(self.got) == len(self.frames):
                self.done.set()

    def run(self):
        for dev, epoch, raw in self.frames:
            self.window.acquire()
            self.sent[hashlib.sha256(raw).hexdigest()] = time.perf_counter()
            self.client.publish("edgesynth/%s/frames/%d" % (dev, epoch), raw, qos=1)

    def close(self):
        self.client.loop_stop()
        self.client.disconnect()


def run_size(broker, tmp, ring, frames, clients, window):
    """Publish ``frames`` through a fresh gateway and store; returns the figures."""
    db = os.path.join(tmp, "gw-%d.db" % len(os.listdir(tmp)))
    gw = Gateway(broker.url, db, ring)
    by_dev = {}
    for f in frames:
        by_dev.setdefault(f[0], []).append(f)
    devs = sorted(by_dev)
    groups = [[f for dev in devs[c::clients] for f in by_dev[dev]] for c in range(min(clients, len(devs)))]
    pubs = [Publisher(broker.port, "bench-%d-%d" % (os.getpid(), c), g, window) for c, g in enumerate(groups)]
    for p in pubs:
        p.subscribed.wait(10)
    threads = [threading.Thread(target=p.run) for p in pubs]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for p in pubs:
        if not p.done.wait(300):
            raise RuntimeError("receipts missing: %d of %d" % (len(p.got), len(p.frames)))
    for t in threads:
        t.join()
    wall = max(max(p.got.values()) for p in pubs) - t0
    rss = gw.peak_rss()
    gw.stop()
    for p in pubs:
        p.close()
    lat = np.array([p.got[s] - p.sent[s] for p in pubs for s in p.got]) * 1e3
    results = [r for p in pubs for r in p.results.values()]
    con = sqlite3.connect(db)
    stored = {(dev, e): bytes(raw) for dev, e, raw in con.execute("SELECT device, epoch, raw FROM frames")}
    con.close()
    lost = sum(stored.get((dev, e)) != raw for dev, e, raw in frames)
    return {"n": len(frames), "fps": len(frames) / wall, "wall": wall, "p50": np.percentile(lat, 50),
            "p95": np.percentile(lat, 95), "rss": rss, "stored": results.count("stored"),
            "rows": len(stored), "lost": lost}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", type=int, default=10000, help="number of ~1 KiB frames")
    ap.add_argument("--large", type=int, default=600, help="number of ~30 KiB frames")
    ap.add_argument("--clients", type=int, default=8, help="concurrent publisher clients")
    ap.add_argument("--devices", type=int, default=32)
    ap.add_argument("--window", type=int, default=32, help="frames awaiting a receipt per client")
    ap.add_argument("--no-append", action="store_true")
    a = ap.parse_args()
    t_start = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory(prefix="edgesynth-bench-mqtt-") as tmp:
        ring = os.path.join(tmp, "ring.json")
        devices = ["dev%03d" % i for i in range(a.devices)]
        for dev in devices:
            new_key(ring, dev)
        os.mkdir(os.path.join(tmp, "broker"))
        os.mkdir(os.path.join(tmp, "stores"))
        broker = Broker(os.path.join(tmp, "broker"))
        try:
            for label, n in (("1 KiB", a.small), ("30 KiB", a.large)):
                t = time.perf_counter()
                frames = build_frames(ring, devices, n, SIZES[label])
                sizes = [len(raw) for _, _, raw in frames]
                print("%s: %d frames of %d-%d bytes built in %.1f s" % (label, n, min(sizes), max(sizes),
                                                                       time.perf_counter() - t), file=sys.stderr)
                s = run_size(broker, os.path.join(tmp, "stores"), ring, frames, a.clients, a.window)
                if s["stored"] != n or s["rows"] != n or s["lost"]:
                    raise RuntimeError("not every frame stored once byte-identical: %s" % s)
                rows.append(["%s (%s)" % (label, fmt_bytes(int(np.mean(sizes)))), n, "%.1f" % s["wall"],
                             "%.0f" % s["fps"], "%.1f / %.1f" % (s["p50"], s["p95"]), fmt_bytes(s["rss"]),
                             "%d / %d" % (s["rows"], n)])
                print(rows[-1], file=sys.stderr)
        finally:
            broker.stop()
    elapsed = time.monotonic() - t_start
    table = md_table(["frames (mean size)", "n", "publish -> last receipt (s)", "frames/s",
                      "latency p50 / p95 (ms)", "gateway peak RSS", "stored byte-identical"], rows)
    text = ("One `edgesynth gateway` (subprocess, fresh SQLite store per size) behind mosquitto on "
            "loopback; %d paho publisher clients over %d devices, QoS 1, at most %d frames per client "
            "awaiting their receipt; latency = publish call -> receipt arrival at the publisher; "
            "frames built beforehand with exact noise. Every receipt said \"stored\" and every frame "
            "is in the store byte-identical.\n\n%s" % (a.clients, a.devices, a.window, table))
    print(text)
    if not a.no_append:
        results_append(text, title="bench_mqtt.py", elapsed=elapsed)


if __name__ == "__main__":
    main()
