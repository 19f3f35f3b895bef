"""`edgesynth deploy`: copy a bundle to a board's filesystem with mpremote.

mpremote (PyPI, MicroPython's own tool) does the transfer; this module only
builds its commands, so a test can run them through a fake runner.
"""
import os
import shutil
import subprocess
import sys

from edgesynth.errors import InputError


def bundle_files(bundle_dir):
    """(relative path, absolute path) of every file in a bundle, parents first."""
    out = []
    for root, dirs, files in os.walk(bundle_dir):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            out.append((os.path.relpath(full, bundle_dir).replace(os.sep, "/"), full))
    return out


def commands(bundle_dir, port):
    """The mpremote argument lists that copy ``bundle_dir`` onto the board."""
    files = bundle_files(bundle_dir)
    if not any(rel.startswith("agent/") for rel, _ in files):
        raise InputError("%s is not a bundle (run `edgesynth bundle` first)" % bundle_dir)
    dirs = sorted({rel.rsplit("/", 1)[0] for rel, _ in files if "/" in rel})
    cmds = [["connect", port, "fs", "mkdir", ":" + d] for d in dirs]
    cmds += [["connect", port, "fs", "cp", full, ":" + rel] for rel, full in files]
    cmds.append(["connect", port, "reset"])
    return cmds


def mpremote():
    exe = shutil.which("mpremote")
    return [exe] if exe else [sys.executable, "-m", "mpremote"]


def deploy(bundle_dir, port, run=subprocess.run, progress=None):
    """Copy the bundle and reset the board. ``run`` is subprocess.run or a fake.

    "mkdir" of an existing directory is not an error (re-deploys).
    """
    if not os.path.isdir(bundle_dir):
        raise InputError("%s: no such bundle directory" % bundle_dir)
    base = mpremote()
    cmds = commands(bundle_dir, port)
    for cmd in cmds:
        proc = run(base + cmd, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0 and "mkdir" not in cmd:
            msg = (proc.stderr or proc.stdout or "").strip().splitlines()
            raise InputError("mpremote %s failed: %s" % (" ".join(cmd[2:4]), msg[-1] if msg else proc.returncode))
        if progress:
            progress(1)
    return len(cmds)
