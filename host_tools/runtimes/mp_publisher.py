# Runs under MicroPython (never imported by CPython): the device of
# `simulate --runtime micropython --publish`. It feeds recorded readings to one
# fresh agent per window and hands each release to the device's own MQTT
# publisher (agent/transport/mqtt.py, built by from_config as the main loop
# builds it), which keeps the frame in its flash outbox until the gateway's
# receipt; the frame is also appended to OUT for the host.
#
#   micropython -X heapsize=N mp_publisher.py ARGS.json
#
# ARGS.json: {"config", "readings", "out", "device", "key" (hex or null),
# "mqtt" (the device.mqtt block), "flush_ms", "windows": [[epoch, seq, seed hex
# or null, rows], ...]}. READINGS: per window, a header b"ESR1", one byte d, d
# type bytes (b"i" int64 / b"d" float64), then ``rows`` records of d
# little-endian 8-byte values (mp_driver.py's format, one block per window).
# Output lines: "SENT epoch seq nbytes" after each release, "RECEIPT epoch seq
# result reason-as-JSON" for each receipt naming a held frame, and last
# "EDGESYNTH-PUBLISHED {json of the publisher's counters, and "held": the
# [epoch, seq] left in the outbox, which the host checks}". On MemoryError:
# "EDGESYNTH-OOM <in use> <free> <message>", exit 3.
import binascii
import gc
import json
import struct
import sys
import time

from agent import Agent
from agent.transport.mqtt import from_config

POLL_EVERY = 16  # readings between two polls (receipts are taken between readings, as the main loop does)


class Tee:
    """The source Publisher.release takes (an Agent's ``release(sink)``): the
    frame also goes to the host's file, chunk by chunk, as it is streamed."""

    def __init__(self, agent, out):
        self.agent = agent
        self.out = out
        self.n = 0  # bytes of the frame
        self._sink = None

    def _tee(self, buf, n):
        self.out.write(buf if n == len(buf) else memoryview(buf)[:n])
        self.n += n
        self._sink(buf, n)

    def release(self, sink):
        self._sink = sink
        self.agent.release(self._tee)


def main(argv):
    with open(argv[1]) as fh:
        args = json.load(fh)
    with open(args["config"]) as fh:
        cfg = json.load(fh)
    key = binascii.unhexlify(args["key"]) if args["key"] else None
    dev = args["device"]
    pub = from_config(args["mqtt"], dev)

    def report(epoch, seq, result, reason):
        print("RECEIPT", epoch, seq, result, json.dumps(reason))
    pub.on_receipt = report
    box = pub.outbox
    flush_ms = args["flush_ms"]
    out = open(args["out"], "wb")
    fh = open(args["readings"], "rb")
    try:
        for epoch, seq, seed_hex, rows in args["windows"]:
            head = fh.read(5)
            if head[:4] != b"ESR1":
                raise ValueError("bad readings file")
            d = head[4]
            fmt = "<" + "".join("q" if t == 0x69 else "d" for t in fh.read(d))
            rec = bytearray(8 * d)
            a = Agent(cfg, seed=binascii.unhexlify(seed_hex) if seed_hex else None, device_id=dev, epoch=epoch,
                      seq=seq, key=key)
            for i in range(rows):
                fh.readinto(rec)
                a.update(struct.unpack_from(fmt, rec, 0))
                if i % POLL_EVERY == 0:
                    pub.poll()
            # a full outbox waits for receipts (up to flush_ms) rather than lose the window
            start = time.ticks_ms()
            while box.count >= box.max_frames and time.ticks_diff(time.ticks_ms(), start) < flush_ms:
                pub.poll()
                time.sleep_ms(20)
            src = Tee(a, out)
            pub.release(src)
            print("SENT", epoch, seq, src.n)
            a = None
            gc.collect()
        pub.flush(flush_ms)
    finally:
        out.close()
        fh.close()
        pub.close()
    print("EDGESYNTH-PUBLISHED", json.dumps({
        "published": pub.published, "delivered": pub.delivered, "rejected": pub.rejected, "errors": pub.errors,
        "reconnects": pub.reconnects, "held": [[box.epoch(s), box.seq(s)] for s in box.slots()]}))


try:
    main(sys.argv)
except MemoryError as e:
    print("EDGESYNTH-OOM", gc.mem_alloc(), gc.mem_free(), e)
    sys.exit(3)
