"""Fleet keys at scale (issue 16 target: 10^6 device keys derived and exported
in <= 60 s; the keyring's size independent of the fleet's).

Side by side in one run:

- ``edgesynth keys export --from IDS --keyring K -o DIR`` (a fresh CLI
  process: start-up, reading the ids, HKDF per device, one 32-byte file per
  device created O_EXCL in the directory's fd, one directory fsync) for 10^3
  and 10^6 devices of a keyring holding a fleet master, on the repository's
  disk and (10^6 again) into /dev/shm: wall and CPU time of
  the process (getrusage of children), files checked (count, 32 bytes each, a sample of
  keys against Keyring.key_for);
- the HKDF derivation alone for 10^6 ids (no files), in this process;
- ``keys new`` per device (explicit keys, the pre-fleet way: the whole file
  rewritten and fsynced per device) for 10^3 devices through the library (no
  process start-up counted), the per-call time fitted as a + b * (devices
  already in the file) and extrapolated; plus the start-up of one CLI call;
- the keyring file size: with a master after 10^2 and 10^6 exports (the
  same file), and with explicit keys for 10^2 and 10^3 devices.

The exported directories are deleted afterwards (their deletion is timed too).

    python3 benchmarks/bench_keys.py [--devices 1000000] [--explicit 1000] [--no-append]
"""
import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import numpy as np  # noqa: E402

from edgesynth.fleet.keys import _derive, hkdf_extract, load, new_fleet_key, new_key  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHM = "/dev/shm"  # a RAM file system: what file creation costs without ext4's allocator and journal


def cli_export(ring, ids_file, out):
    """Wall seconds of one `edgesynth keys export` process (its CPU: child_cpu before and after)."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "edgesynth.cli", "keys", "export", "--from", ids_file,
                          "--keyring", ring, "-o", out], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    _, err_text = p.communicate()
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit("keys export failed: %s" % err_text.decode())
    return wall


def child_cpu():
    """User + system CPU seconds of this process's waited-for children."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def check_export(ring, out, ids):
    names = os.listdir(out)
    assert len(names) == len(ids), (len(names), len(ids))
    keyring = load(ring)
    for dev in random.Random(0).sample(ids, min(1000, len(ids))):
        with open(os.path.join(out, dev + ".key"), "rb") as fh:
            assert fh.read() == keyring.key_for(dev)
        assert os.stat(os.path.join(out, dev + ".key")).st_mode & 0o777 == 0o600


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, default=10 ** 6)
    ap.add_argument("--explicit", type=int, default=1000)
    ap.add_argument("--no-append", action="store_true")
    a = ap.parse_args()
    t_start = time.monotonic()
    work = tempfile.mkdtemp(prefix="bench_keys.", dir=ROOT)  # the repository's disk, not a tmpfs
    try:
        ring = os.path.join(work, "fleet.keys")
        new_fleet_key(ring)
        rows, sizes = [], []
        runs = [(n, work, "") for n in (100, 1000, a.devices)]
        if os.path.isdir(SHM):
            runs.append((a.devices, SHM, " into tmpfs (%s)" % SHM))
        for n, parent, where in runs:
            ids = ["gw-%07d" % i for i in range(n)]
            ids_file = os.path.join(work, "ids-%d.txt" % n)
            with open(ids_file, "w") as fh:
                fh.write("\n".join(ids) + "\n")
            out = os.path.join(parent, "%s-keys-%d" % (os.path.basename(work), n))
            cpu0 = child_cpu()
            wall = cli_export(ring, ids_file, out)
            cpu = child_cpu() - cpu0
            check_export(ring, out, ids)
            t0 = time.perf_counter()
            shutil.rmtree(out)
            rm = time.perf_counter() - t0
            if not where:
                sizes.append((n, os.path.getsize(ring)))
            rows.append(["`keys export` (derived), %d devices%s" % (n, where), "%.2f" % wall, "%.2f" % cpu,
                         "%.1f" % (wall / n * 1e6), "%.1f" % rm])
        # HKDF alone
        prk = hkdf_extract(b"", load(ring)._master)
        ids_b = [("gw-%07d" % i).encode() for i in range(a.devices)]
        t0, c0 = time.perf_counter(), time.process_time()
        for b in ids_b:
            _derive(prk, b)
        d_wall, d_cpu = time.perf_counter() - t0, time.process_time() - c0
        rows.append(["HKDF derivation only (in process), %d devices" % a.devices, "%.2f" % d_wall, "%.2f" % d_cpu,
                     "%.2f" % (d_wall / a.devices * 1e6), "-"])
        # explicit keys, one `keys new` per device
        explicit = os.path.join(work, "explicit.keys")
        per_call = []
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(a.explicit):
            t1 = time.perf_counter()
            new_key(explicit, "gw-%07d" % i)
            per_call.append(time.perf_counter() - t1)
            if i + 1 == 100:
                sizes.append(("explicit", 100, os.path.getsize(explicit)))
        e_wall, e_cpu = time.perf_counter() - t0, time.process_time() - c0
        sizes.append(("explicit", a.explicit, os.path.getsize(explicit)))
        slope, icpt = np.polyfit(np.arange(a.explicit), per_call, 1)  # s per call = icpt + slope * devices
        env = dict(os.environ, PYTHONPATH=ROOT)
        starts = []
        for i in range(3):
            t1 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "edgesynth.cli", "keys", "new", "cli-%d" % i, "--keyring", explicit],
                           check=True, capture_output=True, env=env)
            starts.append(time.perf_counter() - t1)
        startup = float(np.median(starts)) - (icpt + slope * a.explicit)
        rows.append(["`keys new` per device (library, explicit keys), %d devices" % a.explicit, "%.2f" % e_wall,
                     "%.2f" % e_cpu, "%.0f" % (e_wall / a.explicit * 1e6), "-"])
        cap = int((16 << 20) // (sizes[-1][2] / a.explicit))  # devices at the 16 MiB keyring cap
        n_big = min(a.devices, cap)
        lib_big = icpt * n_big + slope * n_big ** 2 / 2
        rows.append(["`keys new` extrapolated to %d devices%s" % (
                     n_big, " (the 16 MiB keyring cap; %d are refused)" % a.devices if a.devices > cap else ""),
                     "%.0f (%.1f h) + %.1f h of CLI start-ups" % (lib_big, lib_big / 3600, startup * n_big / 3600), "-",
                     "%.0f" % ((lib_big + startup * n_big) / n_big * 1e6), "-"])
        derived_1k = float(rows[1][1])
        text = ("Keyring with a fleet master; ids `gw-0000000`...; files on the repository's ext4 disk (the "
                "tmpfs row: /dev/shm). `keys export` is a fresh CLI process per run (wall and CPU include "
                "start-up and reading the ids file); each run is checked (file count, mode 0600, 1000 sampled "
                "keys equal `key_for`) and its directory deleted (`rm` column). `keys new` fit: %.2f ms + %.2f µs "
                "per device already in the file, per call; one CLI `keys new` adds %.0f ms of start-up. Shared "
                "2-core machine: other work ran meanwhile.\n\n" % (icpt * 1e3, slope * 1e6, startup * 1e3))
        text += C.md_table(["what", "wall (s)", "CPU (s)", "µs / device (wall)", "rm -r (s)"], rows)
        text += "\n\n" + C.md_table(
            ["keyring", "devices", "file size (bytes)"],
            [["fleet master", str(n), str(s)] for n, s in sizes[:3]]
            + [["explicit keys (`keys new`)", str(n), str(s)] for _, n, s in sizes[3:]])
        text += ("\n\nPer 10^3 devices: derived export %.2f s wall vs `keys new` %.2f s (library) + %.0f s of CLI "
                 "start-ups: %.0fx.\n" % (derived_1k, e_wall, startup * a.explicit,
                                          (e_wall + startup * a.explicit) / derived_1k))
        text += "Load average at the end: %s (other sessions' benchmarks and tests ran on both cores).\n" % (
            " ".join("%.2f" % x for x in os.getloadavg()))
        print(text)
        if not a.no_append:
            C.results_append(text, title="bench_keys.py", elapsed=time.monotonic() - t_start)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
