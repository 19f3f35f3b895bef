# Runs under MicroPython (benchmarks/bench_transport_heap.py): the heap the
# MQTT transport takes on the device, measured with gc.mem_alloc (bytes of
# this build's heap) after gc.collect() at each step:
#
#   micropython mp_transport_heap.py PORT MAX_FRAME MAX_FRAMES OUTBOX_DIR FRAMES
#
# After `import agent` (the device has it loaded anyway):
# 1. import umqtt.simple; 2. import agent.transport.mqtt (and the outbox);
# 3. an MQTTClient, an Outbox of MAX_FRAMES slots and a Publisher whose
# resend buffer is MAX_FRAME bytes (reported apart: a bytearray does not
# shrink on a 32-bit port, pointers do); 4. connect; 5. the largest growth of
# the heap across one send() and the poll() that takes its receipt, with the
# collector off (what a publish needs at once, freed afterwards).
# Prints one JSON line (bytes of this build's heap).
import gc
import json
import sys

import agent  # noqa: F401  (loaded on every device: charged by the agent's own overhead, not here)

gc.collect()
base = gc.mem_alloc()


def step(prev):
    gc.collect()
    now = gc.mem_alloc()
    return now, now - prev


def main(argv):
    port, max_frame, max_frames, outbox_dir, nframes = int(argv[1]), int(argv[2]), int(argv[3]), argv[4], int(argv[5])
    out = {}
    at = base
    import umqtt.simple
    at, out["umqtt"] = step(at)
    import agent.transport.mqtt as mq
    from agent.transport.outbox import Outbox
    at, out["transport_modules"] = step(at)
    client = umqtt.simple.MQTTClient("heap-probe", "127.0.0.1", port)
    box = Outbox(outbox_dir, max_frames, max_frames * max_frame)
    pub = mq.Publisher(client, "heap-probe", box, max_frame, resend_ms=60000, timeout_ms=10000)
    at, objects = step(at)
    out["objects"] = objects - max_frame
    out["buffer"] = max_frame
    pub.poll()  # connect and subscribe
    at, out["connected"] = step(at)
    frame = bytearray(max_frame)
    for i in range(max_frame):
        frame[i] = i & 0xFF
    at = step(at)[0]
    peak = 0
    for i in range(nframes):
        frame[0] = i
        gc.collect()
        gc.disable()
        before = gc.mem_alloc()
        pub.send(i, i, frame)
        k = 0
        while pub.poll() and k < 500:  # until the receipt frees it
            k += 1
            after = gc.mem_alloc()
            if after - before > peak:
                peak = after - before
            gc.collect()  # polls while waiting allocate too; each poll is measured on its own
            before = gc.mem_alloc()
            gc.disable()
        after = gc.mem_alloc()
        if after - before > peak:
            peak = after - before
        gc.enable()
    out["transient"] = peak
    out["delivered"] = pub.delivered
    gc.collect()
    out["retained_after"] = gc.mem_alloc() - at
    pub.close()
    print(json.dumps(out))


main(sys.argv)
