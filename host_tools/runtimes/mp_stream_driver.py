# Runs under MicroPython (never imported by CPython): one continual
# (phdstream) agent over a recorded stream of windows, one step and one frame
# per window, frames streamed to a file. Apart from mp_driver.py because that
# driver's own heap is measured in every other mechanism's planned charge.
#
#   micropython -X heapsize=64wK -c "import mp_stream_driver" CONFIG READINGS OUT SEED DEVICE KEY WINDOWS
#
# WINDOWS: a JSON list [[epoch, seq, rows], ...]. READINGS: per window a block
# b"ESR1", one byte d, d type bytes (b"i" int64 / b"d" float64), then ``rows``
# records of d little-endian 8-byte values (mp_driver.py's format). SEED and KEY
# are hex or "-". Each release prints "FRAME <bytes>"; the end "EDGESYNTH-OK
# <in use> <free>". On MemoryError: "EDGESYNTH-OOM <in use> <free> <message>",
# exit 3.
import gc
import sys


def main(argv):
    import binascii
    import json
    import struct
    cfg_path, rd_path, out_path, seed_hex, device, key_hex, win_path = argv[1:8]
    with open(cfg_path) as fh:
        cfg = json.load(fh)
    with open(win_path) as fh:
        windows = json.load(fh)
    seed = None if seed_hex == "-" else binascii.unhexlify(seed_hex)
    key = None if key_hex == "-" else binascii.unhexlify(key_hex)
    import agent
    gc.collect()
    a = agent.Agent(cfg, seed=seed, device_id=device, epoch=windows[0][0], seq=windows[0][1], key=key)
    cfg = None
    gc.collect()
    fh = open(rd_path, "rb")
    out = open(out_path, "wb")

    def sink(b, m):
        out.write(b if m == len(b) else memoryview(b)[:m])

    rec = None
    for i in range(len(windows)):
        if i:
            a.next_window(windows[i][0])
        head = fh.read(5)
        if head[:4] != b"ESR1":
            raise ValueError("bad readings file")
        d = head[4]
        fmt = "<" + "".join("q" if t == 0x69 else "d" for t in fh.read(d))
        if rec is None:
            rec = bytearray(8 * d)  # one record: the harness's own buffer, reused
        up = a.update
        for _ in range(windows[i][2]):
            fh.readinto(rec)
            up(struct.unpack_from(fmt, rec, 0))
        print("FRAME", a.release(sink))
    fh.close()
    out.close()
    print("EDGESYNTH-OK", gc.mem_alloc(), gc.mem_free())


try:
    main(sys.argv)
except MemoryError as e:
    print("EDGESYNTH-OOM", gc.mem_alloc(), gc.mem_free(), e)
    sys.exit(3)
