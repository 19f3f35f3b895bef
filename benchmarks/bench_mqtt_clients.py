"""Gateway memory under many connected devices (issue 15): 1,000 simulated
MQTT clients stay connected to mosquitto while each publishes a few ~1 KiB
frames, spread over the run, through one `edgesynth gateway` into SQLite.

The clients are raw sockets speaking the few packets of MQTT 3.1.1 a device
needs (CONNECT, SUBSCRIBE to its own ``edgesynth/<device>/receipts``, PUBLISH
QoS 1, PUBACK both ways), all driven by one ``selectors`` loop in this process:
an earlier harness with one paho client and one network thread per device
hung at 300 clients, before it measured anything. paho is not used because
its client needs a loop per connection; a device's few packets are simple.

Phases: the gateway alone (0 clients), then 100 clients connected, then
1,000 (the first 100 stay); in each phase the clients first stay idle
for a second (a row of the table), then every connected client publishes
``--frames`` frames at uniformly random moments of a ``--span``-second
stretch. After each phase: the gateway's peak RSS (VmHWM of
/proc/PID/status) and current RSS, the broker's RSS, receipt latency p50/p95
(publish -> receipt at the client). At the end every frame must be in the
store once, byte-identical, and every receipt must say "stored".

    python3 benchmarks/bench_mqtt_clients.py [--clients 1000] [--first 100] [--frames 3] [--span 20]
"""
import argparse
import hashlib
import heapq
import json
import os
import random
import resource
import selectors
import socket
import sqlite3
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from bench_mqtt import SIZES, Gateway, build_frames  # noqa: E402
from common import fmt_bytes, md_table, results_append  # noqa: E402

from edgesynth.fleet.keys import FORMAT, KEY_BYTES  # noqa: E402
from tests.mqtt_broker import Broker  # noqa: E402


def _varlen(n):
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _str(s):
    b = s.encode()
    return struct.pack(">H", len(b)) + b


def _packet(kind, body):
    return bytes([kind]) + _varlen(len(body)) + body


def connect_packet(client_id):
    # protocol "MQTT" level 4 (3.1.1), flags: clean session; keepalive 0 (no pings: the run is short)
    return _packet(0x10, _str("MQTT") + bytes([4, 0x02]) + struct.pack(">H", 0) + _str(client_id))


def subscribe_packet(mid, topic):
    return _packet(0x82, struct.pack(">H", mid) + _str(topic) + bytes([1]))


def publish_packet(mid, topic, payload):
    return _packet(0x32, _str(topic) + struct.pack(">H", mid) + payload)


def puback_packet(mid):
    return _packet(0x40, struct.pack(">H", mid))


class Client:
    """One simulated device: a non-blocking socket, its output buffer and
    the parser of what the broker sends it."""

    def __init__(self, device, port, sel):
        self.device = device
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setblocking(False)
        self.sel = sel
        self.inbuf, self.outbuf = bytearray(), bytearray()
        self.ready = False  # CONNACK and SUBACK seen
        self.mid = 1
        self.sent = {}  # sha256 hex -> publish time
        self.got = {}   # sha256 hex -> (receipt time, result)
        self.pubacks = 0
        sel.register(self.sock, selectors.EVENT_READ, self)
        self.write(connect_packet("sim-" + device) + subscribe_packet(1, "edgesynth/%s/receipts" % device))

    def write(self, data):
        self.outbuf += data
        self._flush()

    def _flush(self):
        if self.outbuf:
            try:
                n = self.sock.send(self.outbuf)
            except BlockingIOError:
                n = 0
            del self.outbuf[:n]
        self.sel.modify(self.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if self.outbuf else 0), self)

    def publish(self, epoch, raw):
        self.mid = self.mid % 65535 + 1
        self.sent[hashlib.sha256(raw).hexdigest()] = time.perf_counter()
        self.write(publish_packet(self.mid, "edgesynth/%s/frames/%d" % (self.device, epoch), raw))

    def on_event(self, mask):
        if mask & selectors.EVENT_WRITE:
            self._flush()
        if mask & selectors.EVENT_READ:
            data = self.sock.recv(65536)
            if not data:
                raise RuntimeError("broker closed the connection of %s" % self.device)
            self.inbuf += data
            self._parse()

    def _parse(self):
        buf = self.inbuf
        while len(buf) >= 2:
            n, mult, i = 0, 1, 1
            while True:
                if i >= len(buf):
                    return
                b = buf[i]
                n += (b & 0x7F) * mult
                mult <<= 7
                i += 1
                if not b & 0x80:
                    break
            if len(buf) < i + n:
                return
            kind, body = buf[0], bytes(buf[i:i + n])
            del buf[:i + n]
            self._packet(kind, body)

    def _packet(self, kind, body):
        t = kind >> 4
        if t == 2:  # CONNACK
            if body[1] != 0:
                raise RuntimeError("broker refused %s: code %d" % (self.device, body[1]))
        elif t == 9:  # SUBACK
            if body[2] == 0x80:
                raise RuntimeError("subscription of %s refused" % self.device)
            self.ready = True
        elif t == 4:  # PUBACK of one of our frames
            self.pubacks += 1
        elif t == 3:  # a receipt (QoS 1): answer its PUBACK
            tl = struct.unpack_from(">H", body)[0]
            pos = 2 + tl
            qos = (kind >> 1) & 3
            if qos:
                self.write(puback_packet(struct.unpack_from(">H", body, pos)[0]))
                pos += 2
            r = json.loads(body[pos:])
            if r["sha256"] in self.sent and r["sha256"] not in self.got:
                self.got[r["sha256"]] = (time.perf_counter(), r["result"])

    def close(self):
        self.sel.unregister(self.sock)
        self.sock.close()


def pump(sel, until, timeout=0.05):
    """Serve every socket until ``until()`` is true."""
    while not until():
        for key, mask in sel.select(timeout):
            key.data.on_event(mask)


def run_phase(sel, clients, frames_of, span, rng):
    """Every client of ``clients`` publishes its frames at random moments of
    ``span`` seconds; returns once every receipt is in (or raises after 300 s)."""
    t0 = time.perf_counter()
    plan = [(t0 + rng.uniform(0, span), i, epoch, raw) for i, c in enumerate(clients)
            for epoch, raw in frames_of[c.device]]
    heapq.heapify(plan)
    want = len(plan) + sum(len(c.got) for c in clients)
    deadline = t0 + span + 300
    while plan or sum(len(c.got) for c in clients) < want:
        now = time.perf_counter()
        while plan and plan[0][0] <= now:
            _, i, epoch, raw = heapq.heappop(plan)
            clients[i].publish(epoch, raw)
        if now > deadline:
            raise RuntimeError("receipts missing after %d s" % (now - t0))
        wait = max(0.0, min(0.05, plan[0][0] - now)) if plan else 0.05
        for key, mask in sel.select(wait):
            key.data.on_event(mask)
    return time.perf_counter() - t0


def rss(pid, field):
    """A VmXXX field of /proc/PID/status, bytes."""
    with open("/proc/%d/status" % pid) as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def raise_fd_limit(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(need, soft)), hard))
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft < need:
        raise SystemExit("need %d open files, the hard limit is %d" % (need, hard))


def write_keyring(path, devices):
    doc = {"format": FORMAT, "keys": {d: os.urandom(KEY_BYTES).hex() for d in devices}}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(doc, fh)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=1000, help="connected devices in the last phase")
    ap.add_argument("--first", type=int, default=100, help="connected devices in the middle phase")
    ap.add_argument("--frames", type=int, default=3, help="frames each connected device publishes per phase")
    ap.add_argument("--span", type=float, default=20.0, help="seconds over which a phase's frames are spread")
    ap.add_argument("--no-append", action="store_true")
    a = ap.parse_args()
    t_start = time.monotonic()
    # mosquitto (a child: it inherits the limit) holds a socket per client, and so does this process
    raise_fd_limit(a.clients + 256)
    rng = random.Random(15)
    devices = ["sim%04d" % i for i in range(a.clients)]
    rows = []
    with tempfile.TemporaryDirectory(prefix="edgesynth-bench-mqtt-clients-") as tmp:
        ring = os.path.join(tmp, "ring.json")
        write_keyring(ring, devices)
        phases = [(0, []), (a.first, devices[:a.first]), (a.clients, devices)]
        # frames: phase p's frames of a device have epochs p*frames .. p*frames + frames - 1
        t = time.perf_counter()
        n_per_dev = {d: a.frames * sum(d in ds for _, ds in phases) for d in devices}
        made = build_frames(ring, devices[:a.first], a.first * max(n_per_dev.values()), SIZES["1 KiB"])
        made += build_frames(ring, devices[a.first:], (a.clients - a.first) * a.frames, SIZES["1 KiB"])
        per_dev = {}
        for dev, epoch, raw in made:
            per_dev.setdefault(dev, []).append((epoch, raw))
        for dev in per_dev:
            per_dev[dev].sort()
        sizes = [len(raw) for _, _, raw in made]
        print("%d frames of %d-%d bytes built in %.1f s" % (len(made), min(sizes), max(sizes),
                                                           time.perf_counter() - t), file=sys.stderr)
        os.mkdir(os.path.join(tmp, "broker"))
        broker = Broker(os.path.join(tmp, "broker"))  # max_connections: mosquitto's default, -1 (unlimited)
        db = os.path.join(tmp, "gw.db")
        gw = Gateway(broker.url, db, ring)
        sel = selectors.DefaultSelector()
        clients = []
        try:
            time.sleep(1)
            rows.append([0, 0, "-", "-", fmt_bytes(rss(gw.proc.pid, "VmHWM")), fmt_bytes(rss(gw.proc.pid, "VmRSS")),
                         fmt_bytes(rss(broker.proc.pid, "VmRSS"))])
            print(rows[-1], file=sys.stderr)
            done = 0
            for n, devs in phases[1:]:
                t = time.perf_counter()
                for dev in devs[len(clients):]:
                    clients.append(Client(dev, broker.port, sel))
                pump(sel, lambda: all(c.ready for c in clients))
                print("%d clients connected and subscribed in %.1f s" % (len(clients), time.perf_counter() - t),
                      file=sys.stderr)
                time.sleep(1)  # connected and idle: what the connections alone cost the gateway
                rows.append([len(clients), "0 (idle)", "-", "-", fmt_bytes(rss(gw.proc.pid, "VmHWM")),
                             fmt_bytes(rss(gw.proc.pid, "VmRSS")), fmt_bytes(rss(broker.proc.pid, "VmRSS"))])
                print(rows[-1], file=sys.stderr)
                frames_of = {}
                for dev in devs:
                    frames_of[dev] = per_dev[dev][:a.frames]
                    per_dev[dev] = per_dev[dev][a.frames:]
                before = {c.device: set(c.got) for c in clients}
                wall = run_phase(sel, clients, frames_of, a.span, rng)
                lat = np.array([(c.got[s][0] - c.sent[s]) * 1e3 for c in clients for s in c.got
                                if s not in before[c.device]])
                done += len(lat)
                rows.append([n, len(lat), "%.1f" % wall, "%.0f / %.0f" % (np.percentile(lat, 50),
                                                                          np.percentile(lat, 95)),
                             fmt_bytes(rss(gw.proc.pid, "VmHWM")), fmt_bytes(rss(gw.proc.pid, "VmRSS")),
                             fmt_bytes(rss(broker.proc.pid, "VmRSS"))])
                print(rows[-1], file=sys.stderr)
            results = [r for c in clients for _, r in c.got.values()]
        finally:
            for c in clients:
                c.close()
            gw.stop()
            broker.stop()
        want = {(dev, e): raw for dev, e, raw in made}
        con = sqlite3.connect(db)
        rows_db = [(dev, e, bytes(raw)) for dev, e, raw in con.execute("SELECT device, epoch, raw FROM frames")]
        con.close()
        identical = sum(want.get((dev, e)) == raw for dev, e, raw in rows_db)
        ok = len(rows_db) == identical == len(made) == done and results.count("stored") == len(made)
        if not ok:
            raise SystemExit("not every frame stored once byte-identical: %d made, %d receipts, %d rows "
                             "(%d identical), %d stored receipts"
                             % (len(made), done, len(rows_db), identical, results.count("stored")))
    elapsed = time.monotonic() - t_start
    table = md_table(["connected clients", "frames this phase", "phase (s)", "receipt latency p50 / p95 (ms)",
                      "gateway peak RSS (VmHWM)", "gateway RSS now", "mosquitto RSS"], rows)
    text = ("One `edgesynth gateway` (subprocess, SQLite store) behind mosquitto on loopback; simulated devices "
            "are raw MQTT 3.1.1 sockets (clean session, subscribed to their own receipts) driven by one "
            "selectors loop. Phases in order: the gateway alone, %d clients connected, %d clients connected "
            "(the first %d stay); in each phase the clients first idle for 1 s (the \"0 (idle)\" rows), then "
            "every connected client publishes %d tagged frames of %d-%d "
            "bytes at random moments of %g s (QoS 1). Latency = publish -> receipt at the client. All %d frames "
            "were stored once, byte-identical, every receipt \"stored\".\n\n%s"
            % (a.first, a.clients, a.first, a.frames, min(sizes), max(sizes), a.span, len(made), table))
    print(text)
    if not a.no_append:
        results_append(text, title="bench_mqtt_clients.py", elapsed=elapsed)


if __name__ == "__main__":
    main()
