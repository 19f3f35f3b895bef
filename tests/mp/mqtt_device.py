"""A device that releases frames and publishes them over MQTT (tests/test_mqtt_device.py).

    MICROPYPATH=<repo>:<umqtt dir> micropython tests/mp/mqtt_device.py ARGS.json

ARGS.json: {"port", "device", "key" (hex or null), "outbox", "max_frames",
"max_bytes", "resend_ms", "frames" (directory: each released frame is also written to
<epoch>.bin there, for the host to compare), "steps"}. Steps run in order:
["send", [epochs]] releases one window per epoch (seq = epoch) and sends it;
["flush", ms]; ["wait", path] waits until the file ``path`` exists;
["poll"]; ["idle", ms] polls every 50 ms for ms; ["main", n, first epoch] runs agent/main_loop.py for n windows of
10 readings with the config's "mqtt" block (its own Publisher, from_config;
the script's Publisher is made at the first other step). Prints one line per event and, last, a JSON line of the
Publisher's counters and the outbox's state, plus heap measurements.
"""
import binascii
import gc
import json
import os
import sys
import time

from umqtt.simple import MQTTClient

from agent import Agent
from agent.transport.mqtt import OutboxFull, Publisher
from agent.transport.outbox import Outbox

# budgets as in tests/mp/release_vector.py: epsilon 1/2 in units of 1/q, clamp 1/32 of it
_Q = 1 << 20
_CLAMP = _Q // 64
_BASE = (_Q // 2 - _CLAMP) // 7
CFG = {
    "format": 1, "epsilon": [1, 2], "relation": "add-remove",
    "mechanisms": [{"kind": "privhp", "lo": [0], "hi": [1000], "r": 6, "k": 8, "w": 32, "j": 2,
                    "sketch": "cms", "hash_seed": "mqtt-test", "q": _Q,
                    "sigma": [_BASE] * 6 + [_Q // 2 - _CLAMP - 6 * _BASE], "clamp_p": _CLAMP}],
}


def frame_of(dev, key, epoch):
    a = Agent(CFG, seed=b"mqtt-seed-%d" % epoch, device_id=dev, epoch=epoch, seq=epoch, key=key)
    x = epoch + 1
    for _ in range(50):
        x = (1021 * x + 12345) & 0xFFFFF
        a.update((x % 1000,))
    return a.release()


class Readings:
    def __init__(self, n):
        self.i, self.n = 0, n

    def read(self):
        self.i += 1
        return (self.i * 37 % 1000,) if self.i <= self.n else None


def run_main_loop(args, n, first):
    from agent import main_loop
    from firmware_shims.sensors import StepClock
    cred = args["outbox"] + "-cred.json"
    with open(cred, "w") as fh:
        json.dump({"id": args["device"], "key": args["key"]}, fh)
    cfg = dict(CFG)
    cfg["device"] = {"credentials": cred, "sample_ms": 1, "release_ms": 10, "first_epoch": first,
                     "mqtt": {"host": "127.0.0.1", "port": args["port"], "outbox": args["outbox"],
                              "max_frames": args.get("max_frames", 16), "max_frame": 2048, "backoff_ms": 50}}
    path = args["outbox"] + "-device.json"
    with open(path, "w") as fh:
        json.dump(cfg, fh)
    print("MAIN", main_loop.run(path, sensor=Readings(10 * n), clock=StepClock(), max_epochs=n))


def main(path):
    with open(path) as fh:
        args = json.load(fh)
    dev = args["device"]
    key = binascii.unhexlify(args["key"]) if args.get("key") else None
    box = pub = None
    heap = {}
    full = []
    for step in args["steps"]:
        if step[0] == "main":
            run_main_loop(args, step[1], step[2])
            continue
        if pub is None:
            gc.collect()
            before = gc.mem_alloc()
            box = Outbox(args["outbox"], args.get("max_frames", 16), args.get("max_bytes", 65536))
            client = MQTTClient(b"edgesynth-dev-" + dev.encode(), "127.0.0.1", args["port"],
                                keepalive=args.get("keepalive", 0))
            pub = Publisher(client, dev, box, max_frame=2048, backoff_ms=50, max_backoff_ms=400,
                            resend_ms=args.get("resend_ms", 30000), timeout_ms=5000)
            pub.poll()  # connect, subscribe, publish what a previous run left
            gc.collect()
            heap["transport"] = gc.mem_alloc() - before
        if step[0] == "send":
            for epoch in step[1]:
                frame = frame_of(dev, key, epoch)
                with open("%s/%d.bin" % (args["frames"], epoch), "wb") as fh:
                    fh.write(frame)
                gc.collect()
                m0 = gc.mem_alloc()
                try:
                    ok = pub.send(epoch, epoch, frame)
                except OutboxFull as e:
                    full.append(epoch)
                    print("FULL", epoch, e)
                    continue
                heap["send"] = max(heap.get("send", 0), gc.mem_alloc() - m0)
                print("SENT", epoch, ok)
        elif step[0] == "flush":
            print("FLUSH", pub.flush(step[1]))
        elif step[0] == "poll":
            pub.poll()
        elif step[0] == "idle":
            t0 = time.ticks_ms()
            while time.ticks_diff(time.ticks_ms(), t0) < step[1]:
                pub.poll()
                time.sleep_ms(50)
        elif step[0] == "wait":
            while True:
                try:
                    os.stat(step[1])
                    break
                except OSError:
                    pub.poll()
                    time.sleep_ms(20)
    if pub is None:
        return
    print(json.dumps({"count": box.count, "held": [[box.epoch(s), box.seq(s)] for s in box.slots()],
                      "published": pub.published, "delivered": pub.delivered, "rejected": pub.rejected,
                      "retried": pub.retried,
                      "last_rejection": pub.last_rejection, "unmatched": pub.unmatched,
                      "reconnects": pub.reconnects, "errors": pub.errors, "full": full, "heap": heap}))
    pub.close()


main(sys.argv[1])
