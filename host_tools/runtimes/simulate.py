"""Run the device agent over recorded readings on this machine.

The runtime decides where the agent executes; the frame bytes are the same on
every runtime for the same config, seed and input (tested). ``cpython`` calls
the agent's own ``update`` per reading; ``numpy`` builds the agent the same way
and fills its counters with the vectorised equivalent (host_tools/mechanisms/privhp/vector.py),
about 50 times faster, for large recorded streams; ``micropython`` runs the
agent in the MicroPython unix port with a capped heap (host_tools/runtimes/micropython.py). Readings are passed
as integers when a channel has integer bounds and the value is integral (the
ADC-code path that allocates nothing on a device), else as floats.
"""

import numpy as np

from edgesynth.channels import spec_names
from edgesynth.config import with_names
from edgesynth.errors import InputError
from edgesynth.runtimes.cpython import run_cpython, run_cpython_stream
from edgesynth.runtimes.micropython import publish_micropython, run_micropython, run_micropython_stream
from edgesynth.runtimes.native import run_native, run_native_stream
from edgesynth.runtimes.qemu import run_qemu, run_qemu_stream
from edgesynth.runtimes.vectorized import run_numpy

RUNTIMES = ("cpython", "numpy", "micropython", "native", "qemu")
DEFAULT_HEAP = 256 * 1024  # bytes of 32-bit-equivalent MicroPython heap


def _bound(m, key, i):
    """Bound ``i`` ("lo" or "hi") of spec ``m``, or None where the spec is
    malformed: readings are then passed as floats and the agent refuses it."""
    v = m.get(key)
    return v[i] if isinstance(v, list) and i < len(v) else None


def _int_columns(cfg):
    """Per reading column: pass it as int (every reader has integer bounds
    there, or is a profile reading ids), else as float."""
    inputs = cfg.get("inputs")
    if inputs is None:
        m = cfg["mechanisms"][0]
        if m.get("kind") == "marginals":  # cell indices: whole numbers, passed as ints
            return [True] * len(spec_names(m))
        return [isinstance(_bound(m, "lo", i), int) and isinstance(_bound(m, "hi", i), int)
                for i in range(len(m.get("names") or []))]
    flags = [True] * len(inputs)
    for m in cfg["mechanisms"]:
        for i, name in enumerate(m.get("names") or []):  # a marginals spec's channels are cells: ints
            if name in inputs and m.get("kind") != "profile":
                flags[inputs.index(name)] &= (isinstance(_bound(m, "lo", i), int)
                                              and isinstance(_bound(m, "hi", i), int))
    return flags


def _id_columns(cfg):
    inputs = cfg.get("inputs") or []
    return {inputs.index(n) for m in cfg["mechanisms"] if m.get("kind") == "profile"
            for n in m.get("names") or [] if n in inputs}


def as_readings(data, cfg):
    """Rows as tuples of int (integer channels with integral values) or float."""
    int_ch = _int_columns(cfg)
    for i in _id_columns(cfg):
        c = data[:, i]
        if not (np.all(c == np.floor(c)) and np.all(np.abs(c) < 2 ** 31)):
            raise InputError("column %r holds ids for a profile: they must be integers"
                             % cfg["inputs"][i])
    cols = []
    for i in range(data.shape[1]):
        c = data[:, i]
        if i < len(int_ch) and int_ch[i] and np.all(c == np.floor(c)) and np.all(np.abs(c) < 2 ** 53):
            cols.append(c.astype(np.int64).tolist())
        else:
            cols.append(c.tolist())
    return list(zip(*cols))


def clamped_fraction(data, cfg):
    """Fraction of rows with a value outside the config's box (host-side notice only)."""
    m = cfg["mechanisms"][0]
    if not isinstance(m.get("lo"), list):
        return 0.0
    lo, hi = np.array(m["lo"], float), np.array(m["hi"], float)
    if lo.size != data.shape[1] or not len(data):
        return 0.0
    return float(np.mean(np.any((data < lo) | (data > hi), axis=1)))


def publish_blocks(cfg, blocks, columns, conn, heap=DEFAULT_HEAP, device_id="device", key=None, timeout=30.0,
                   on_sent=None, on_receipt=None):
    """The micropython runtime publishing through the device's own MQTT code:
    ``blocks`` [(epoch, seq, seed, rows (k, d))] as windows.window_blocks
    gives them, readings passed as ``simulate`` passes them (the same frame
    bytes); the rest as runtimes.micropython.publish_micropython."""
    cfg = with_names(cfg, columns)
    windows = [(e, q, s, as_readings(rows, cfg)) for e, q, s, rows in blocks]
    publish_micropython(cfg, windows, heap, conn, device_id=device_id, key=key, timeout=timeout, on_sent=on_sent,
                        on_receipt=on_receipt)


def simulate(cfg, data, columns, runtime="cpython", seed=None, device_id="device", epoch=0, key=None,
             progress=None, heap=DEFAULT_HEAP, seq=0, cpu="cortex-m4"):
    """Frame bytes of one device that saw ``data`` (n, d) on ``runtime``
    (``cpu``: the emulated Cortex-M of the qemu runtime)."""
    if runtime not in RUNTIMES:
        raise InputError("runtime %r is not available (choose from %s)" % (runtime, ", ".join(RUNTIMES)))
    cfg = with_names(cfg, columns)
    if runtime == "numpy":
        return run_numpy(cfg, data, seed=seed, device_id=device_id, epoch=epoch, seq=seq, key=key,
                         progress=progress)
    if runtime == "native":  # agent/c through cffi (host_tools/runtimes/native.py)
        return run_native(cfg, data, seed=seed, device_id=device_id, epoch=epoch, seq=seq, key=key,
                          progress=progress)
    if runtime == "qemu":  # agent/c bare metal under qemu-system-arm (host_tools/runtimes/qemu.py)
        return run_qemu(cfg, data, cpu=cpu, seed=seed, device_id=device_id, epoch=epoch, seq=seq, key=key,
                        progress=progress)
    rows = as_readings(data, cfg)
    if runtime == "micropython":
        return run_micropython(cfg, rows, heap, seed=seed, device_id=device_id, epoch=epoch, key=key,
                               progress=progress, seq=seq)
    return run_cpython(cfg, rows, seed=seed, device_id=device_id, epoch=epoch, seq=seq, key=key,
                       progress=progress)


def continual(cfg):
    """Whether ``cfg`` is a continual (phdstream) config: one agent runs
    every window, one step each (agent.device.Agent.next_window)."""
    return any(isinstance(m, dict) and m.get("kind") == "phdstream" for m in cfg.get("mechanisms") or ())


def simulate_stream(cfg, windows, columns, runtime="cpython", seed=None, device_id="device", key=None,
                    progress=None, heap=DEFAULT_HEAP, cpu="cortex-m4"):
    """Frames [(epoch, bytes), ...] of one continual (phdstream) device over
    ``windows`` [(epoch, seq, rows (k, channels + op))], ONE agent (seeded
    with ``seed`` itself) on ``runtime``: byte-identical across runtimes.
    numpy runs the agent's own update (a batch is codes and signs: nothing
    to vectorise), native and qemu the C core (agent/c/es_phdstream.c)."""
    if runtime not in RUNTIMES:
        raise InputError("runtime %r is not available (choose from %s)" % (runtime, ", ".join(RUNTIMES)))
    cfg = with_names(cfg, columns)
    if runtime == "native":
        return run_native_stream(cfg, windows, seed=seed, device_id=device_id, key=key, progress=progress)
    if runtime == "qemu":
        return run_qemu_stream(cfg, windows, cpu=cpu, seed=seed, device_id=device_id, key=key, progress=progress)
    blocks = [(e, q, as_readings(rows, cfg)) for e, q, rows in windows]
    if runtime == "micropython":
        return run_micropython_stream(cfg, blocks, heap, seed=seed, device_id=device_id, key=key,
                                      progress=progress)
    return run_cpython_stream(cfg, blocks, seed=seed, device_id=device_id, key=key, progress=progress)
