"""The MQTT transport's heap on the MicroPython unix port (issue 15): what
`plan --transport mqtt` charges (edgesynth.ram.TRANSPORT_POOL).

Runs benchmarks/mp_transport_heap.py on the unix port with the device bundle
(.mpy, as a board loads it) and umqtt.simple compiled to .mpy (as mip
installs it), against a real mosquitto and a paho responder that answers
every frame with a "stored" receipt. Measured with gc.mem_alloc (64-bit
bytes): the umqtt.simple module, the transport modules, the client + outbox
+ Publisher objects (the resend buffer apart), the connected client, and the
largest heap growth across one send and the polls that take its receipt
(collector off). The 32-bit estimate halves the object rows (pointers,
object headers and GC blocks halve on a 32-bit port; the same rule as
edgesynth.ram.mp_pool_beyond_counters) and keeps the two module rows as
measured (bytecode and strings do not shrink on 32 bits).

    python3 benchmarks/bench_transport_heap.py [--max-frame 4096] [--slots 16] [--frames 20] [--no-append]
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import md_table, results_append  # noqa: E402

from edgesynth import ram  # noqa: E402
from edgesynth.runtimes.micropython import device_bundle, find_micropython  # noqa: E402
from edgesynth.runtimes.umqtt import umqtt_dir  # noqa: E402
from edgesynth.targets.bundle import compile_module  # noqa: E402
from tests.mqtt_broker import Broker  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MODULES = ("umqtt", "transport_modules")  # bytecode and strings: the same bytes on a 32-bit port


def responder(port):
    """A paho client answering every frame with a "stored" receipt."""
    import paho.mqtt.client as mqtt
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="heap-responder")

    def on_message(cl, u, msg):
        dev = msg.topic.split("/")[1]
        cl.publish("edgesynth/%s/receipts" % dev, json.dumps({
            "epoch": 0, "seq": 0, "sha256": hashlib.sha256(msg.payload).hexdigest(), "result": "stored",
            "reason": None}), qos=1)
    c.on_connect = lambda cl, *a: cl.subscribe("edgesynth/+/frames/+", qos=1)
    c.on_message = on_message
    c.connect("127.0.0.1", port)
    c.loop_start()
    time.sleep(0.5)
    return c


def measure(max_frame, slots, frames):
    """The device's figures (dict of 64-bit bytes)."""
    with tempfile.TemporaryDirectory(prefix="edgesynth-transport-heap-") as tmp:
        um = os.path.join(tmp, "umqtt-mpy", "umqtt")
        os.makedirs(um)
        src = umqtt_dir()
        for name in ("__init__.py", "simple.py"):
            compile_module(os.path.join(src, "umqtt", name), os.path.join(um, name[:-3] + ".mpy"))
        os.mkdir(os.path.join(tmp, "broker"))
        broker = Broker(os.path.join(tmp, "broker"))
        c = responder(broker.port)
        try:
            env = dict(os.environ, MICROPYPATH="%s:%s:.frozen" % (device_bundle(), os.path.dirname(um)))
            r = subprocess.run([find_micropython(), "-X", "heapsize=4M", os.path.join(HERE, "mp_transport_heap.py"),
                                str(broker.port), str(max_frame), str(slots), os.path.join(tmp, "outbox"),
                                str(frames)], env=env, cwd=tmp, capture_output=True, text=True, timeout=300)
        finally:
            c.loop_stop()
            c.disconnect()
            broker.stop()
        if r.returncode:
            raise SystemExit(r.stdout + r.stderr)
        return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-frame", type=int, default=4096, help="the Publisher's resend buffer, bytes")
    ap.add_argument("--slots", type=int, default=16, help="outbox slots (max_frames)")
    ap.add_argument("--frames", type=int, default=20, help="frames published (the largest transient is kept)")
    ap.add_argument("--no-append", action="store_true")
    a = ap.parse_args()
    t0 = time.monotonic()
    m = measure(a.max_frame, a.slots, a.frames)
    if m["delivered"] != a.frames:
        raise SystemExit("only %d of %d receipts: %s" % (m["delivered"], a.frames, m))
    parts = [("`umqtt.simple` module (.mpy)", "umqtt"), ("transport modules (.mpy)", "transport_modules"),
             ("client + %d-slot outbox + Publisher (without the buffer)" % a.slots, "objects"),
             ("connected (socket, subscription)", "connected"), ("largest transient of one publish + its receipt",
                                                                "transient")]
    est = {k: m[k] if k in MODULES else (m[k] + 1) // 2 for _, k in parts}
    rows = [[label, m[k], est[k]] for label, k in parts]
    rows.append(["resend buffer (bytearray, max_frame)", m["buffer"], m["buffer"]])
    rows.append(["**pool beyond the buffer** (edgesynth.ram.TRANSPORT_POOL now %d)" % ram.TRANSPORT_POOL["mqtt"],
                 sum(m[k] for _, k in parts), sum(est.values())])
    table = md_table(["what", "64-bit unix port (bytes)", "32-bit estimate (bytes)"], rows)
    text = ("The MQTT transport's heap on the MicroPython unix port (gc.mem_alloc after gc.collect; .mpy bundle and "
            "umqtt.simple 1.3.4 as .mpy), %d frames of %d bytes published to mosquitto and receipted; retained "
            "after them: %d bytes. The 32-bit estimate halves the object rows and keeps the module rows (bytecode "
            "and strings) as measured.\n\n%s"
            % (a.frames, a.max_frame, m["retained_after"], table))
    print(text)
    if not a.no_append:
        results_append(text, title="bench_transport_heap.py", elapsed=time.monotonic() - t0)


if __name__ == "__main__":
    main()
