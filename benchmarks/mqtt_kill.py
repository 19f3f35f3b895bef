"""Fault campaign on the MQTT live path (issue 15 target: 0 frames lost):
20 devices publish their tagged frames one at a time, each waiting for its
receipt, while `edgesynth gateway` is SIGKILLed 10 times and mosquitto
(persistence on) is restarted 3 times at random moments.

Each device is a thread calling ``es.publish`` (the host publisher) for one
frame at a time, as a device's outbox does: a frame without a receipt within
``--timeout`` seconds, or a broker that cannot be reached, is published again
(same bytes; a second copy is answered "duplicate"). A killed gateway is
started again at once on the same store; the broker keeps its frames for the
gateway's persistent session. At the end every frame must be in the store
exactly once (the primary key) and byte-identical, and every device must hold a
"stored" or "duplicate" receipt for each of its frames.

    python3 benchmarks/mqtt_kill.py [--devices 20] [--per-device 40] [--kills 10] [--restarts 3] [--no-append]
"""
import argparse
import os
import random
import signal
import sqlite3
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_mqtt import Gateway, build_frames  # noqa: E402
from common import md_table, results_append  # noqa: E402  (puts the repository root on sys.path)

import edgesynth as es  # noqa: E402
from edgesynth.fleet.keys import new_key  # noqa: E402
from tests.mqtt_broker import Broker  # noqa: E402

CONFIG = (1, 8, 64, 16)  # (d, r, k, w): ~1 KiB tagged frames


def device(url, frames, out, timeout, pause, deadline):
    """Publish ``frames`` one by one, ``pause`` seconds apart (a device's release
    interval), until each has an acked receipt; ``out`` collects (receipt
    result, publish attempts) per frame."""
    for _, _, raw in frames:
        time.sleep(pause)
        tries = 0
        while time.monotonic() < deadline:
            tries += 1
            try:
                p = es.publish(raw, url, timeout=timeout)
            except es.InputError:  # the broker is restarting
                time.sleep(0.2)
                continue
            if p.ok:
                out.append((p.frames[0].receipt["result"], tries))
                break
        else:
            out.append((None, tries))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, default=20)
    ap.add_argument("--per-device", type=int, default=40)
    ap.add_argument("--kills", type=int, default=10, help="gateway SIGKILLs")
    ap.add_argument("--restarts", type=int, default=3, help="broker restarts")
    ap.add_argument("--span", type=float, default=20.0, help="seconds over which the faults are spread")
    ap.add_argument("--pause", type=float, default=0.5, help="seconds between a device's frames")
    ap.add_argument("--timeout", type=float, default=5.0, help="seconds a device waits for a receipt")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-append", action="store_true")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="edgesynth-mqtt-kill-") as tmp:
        ring = os.path.join(tmp, "ring.json")
        devices = ["dev%02d" % i for i in range(a.devices)]
        for dev in devices:
            new_key(ring, dev)
        frames = build_frames(ring, devices, a.devices * a.per_device, CONFIG)
        by_dev = {dev: [f for f in frames if f[0] == dev] for dev in devices}
        os.mkdir(os.path.join(tmp, "broker"))
        broker = Broker(os.path.join(tmp, "broker"))
        db = os.path.join(tmp, "gw.db")
        gw = Gateway(broker.url, db, ring)
        gws = [gw]
        faults = sorted([(rng.uniform(0.3, a.span), "kill") for _ in range(a.kills)]
                        + [(rng.uniform(0.3, a.span), "restart") for _ in range(a.restarts)])
        outs = {dev: [] for dev in devices}
        deadline = time.monotonic() + a.span + 120
        threads = [threading.Thread(target=device, args=(broker.url, by_dev[dev], outs[dev], a.timeout, a.pause,
                                                        deadline),
                                    daemon=True) for dev in devices]
        t0 = time.monotonic()
        try:
            for t in threads:
                t.start()
            stored_at_fault = []
            for at, kind in faults:
                time.sleep(max(0.0, t0 + at - time.monotonic()))
                con = sqlite3.connect(db)
                stored_at_fault.append(con.execute("SELECT count(*) FROM frames").fetchone()[0])
                con.close()
                if kind == "kill":
                    gw.proc.send_signal(signal.SIGKILL)
                    gw.proc.wait()
                    gw = Gateway(broker.url, db, ring)
                    gws.append(gw)
                else:
                    broker.restart()
            for t in threads:
                t.join(max(0.0, deadline - time.monotonic()))
            wall = time.monotonic() - t0
            gw.stop()
        finally:
            for g in gws:
                if g.proc.poll() is None:
                    g.proc.kill()
                    g.proc.wait()
            broker.stop()
        con = sqlite3.connect(db)
        rows = list(con.execute("SELECT device, epoch, raw FROM frames"))
        con.close()
    elapsed = time.monotonic() - t_start
    want = {(dev, e): raw for dev, e, raw in frames}
    got = {}
    for dev, e, raw in rows:
        got.setdefault((dev, e), []).append(bytes(raw))
    lost = sum(k not in got for k in want)
    wrong = sum(k in got and got[k] != [want[k]] for k in want)
    extra = sum(k not in want for k in got)
    results = [r for dev in devices for r in outs[dev]]
    no_receipt = sum(r is None for r, _ in results) + len(frames) - len(results)
    resent = sum(tries > 1 for _, tries in results)
    mid = sum(0 < s < len(frames) for s in stored_at_fault)
    table = md_table(["devices x frames", "gateway SIGKILLs", "broker restarts", "faults while frames in flight",
                      "frames stored / lost / not byte-identical / unexpected", "receipts stored / duplicate / none",
                      "frames published again", "wall (s)"],
                     [["%d x %d" % (a.devices, a.per_device), a.kills, a.restarts, "%d of %d" % (mid, len(faults)),
                       "%d / %d / %d / %d" % (len(rows), lost, wrong, extra),
                       "%d / %d / %d" % (sum(r == "stored" for r, _ in results),
                                         sum(r == "duplicate" for r, _ in results), no_receipt),
                       resent, "%.1f" % wall]])
    text = ("Devices are threads calling `es.publish` for one ~1 KiB tagged frame every %.1f s (a new "
            "clean session per frame), each waiting for its receipt, publishing the same bytes again after "
            "%.0f s without a receipt or when the broker cannot be reached. Faults at uniform random moments "
            "in the first %.0f s (seed %d); a killed gateway is started again at once on the same store "
            "(persistent session, the broker keeps its frames); the broker is restarted with SIGTERM "
            "(persistence on). \"Faults while frames in flight\": the store held some but not all frames "
            "at the fault.\n\n%s"
            % (a.pause, a.timeout, a.span, a.seed, table))
    print(text)
    ok = lost == 0 and wrong == 0 and extra == 0 and no_receipt == 0 and len(rows) == len(frames)
    if not ok:
        print("FAILED: frames lost, altered or without a receipt", file=sys.stderr)
    if not a.no_append:
        results_append(text, title="mqtt_kill.py", elapsed=elapsed)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
