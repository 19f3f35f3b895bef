# Runs under MicroPython (never imported by CPython): feeds recorded readings to
# the agent inside a heap-capped interpreter and streams the frame to a file.
#
#   micropython -X heapsize=32wK mp_driver.py CONFIG READINGS OUT SEED DEVICE EPOCH KEY [SEQ]
#
# READINGS: b"ESR1", one byte d, d type bytes (b"i" int64 / b"d" float64), then
# records of d little-endian 8-byte values. SEED and KEY are hex or "-"; SEED "-"
# draws fresh entropy (agent.Agent(seed=None): the platform's os.urandom, health-tested).
# On MemoryError it prints one line "EDGESYNTH-OOM <in use> <free> <message>"
# and exits 3, so the host can say how much was needed and how much there was.
import gc
import sys


def main(argv):
    import binascii
    import json
    import struct
    cfg_path, rd_path, out_path, seed_hex, device, epoch, key_hex = argv[1:8]
    seq = int(argv[8]) if len(argv) > 8 else 0
    with open(cfg_path) as fh:
        cfg = json.load(fh)
    seed = None if seed_hex == "-" else binascii.unhexlify(seed_hex)
    key = None if key_hex == "-" else binascii.unhexlify(key_hex)
    import agent
    gc.collect()
    a = agent.Agent(cfg, seed=seed, device_id=device, epoch=int(epoch), seq=seq, key=key)
    cfg = None
    gc.collect()
    fh = open(rd_path, "rb")
    head = fh.read(5)
    if head[:4] != b"ESR1":
        raise ValueError("bad readings file")
    d = head[4]
    fmts = fh.read(d)
    fmt = "<" + "".join("q" if t == 0x69 else "d" for t in fmts)
    rec = 8 * d
    buf = bytearray(rec * 16)  # the harness's own buffer: keep it small
    up = a.update
    while True:
        n = fh.readinto(buf)
        if not n:
            break
        for off in range(0, n - n % rec, rec):
            up(struct.unpack_from(fmt, buf, off))
    fh.close()
    out = open(out_path, "wb")

    def sink(b, m):
        out.write(b if m == len(b) else memoryview(b)[:m])

    a.release(sink)
    out.close()
    print("EDGESYNTH-OK", gc.mem_alloc(), gc.mem_free())


try:
    main(sys.argv)
except MemoryError as e:
    print("EDGESYNTH-OOM", gc.mem_alloc(), gc.mem_free(), e)
    sys.exit(3)
