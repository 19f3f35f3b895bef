"""The cpython runtime: the device agent's own code, one ``update`` per reading."""
from edgesynth import agent
from edgesynth.agent.errors import ConfigError
from edgesynth.errors import InputError

BLOCK = 4096  # readings between progress reports


def run_cpython(cfg, rows, seed=None, device_id="device", epoch=0, seq=0, key=None, progress=None):
    """Feed ``rows`` to an in-process agent; returns the frame bytes."""
    try:
        a = agent.Agent(cfg, seed=seed, device_id=device_id, epoch=epoch, seq=seq, key=key)
    except ConfigError as e:
        raise InputError("invalid device config: %s" % e)
    up = a.update
    for start in range(0, len(rows), BLOCK):
        for x in rows[start:start + BLOCK]:
            up(x)
        if progress:
            progress(min(BLOCK, len(rows) - start))
    return a.release()


def run_cpython_stream(cfg, windows, seed=None, device_id="device", key=None, progress=None):
    """Frames [(epoch, bytes), ...] of ONE continual (phdstream) agent over
    ``windows`` [(epoch, seq, rows), ...]: each window's rows, then its
    release (the window's step), then Agent.next_window."""
    frames = []
    a = None
    try:
        for e, q, rows in windows:
            if a is None:
                a = agent.Agent(cfg, seed=seed, device_id=device_id, epoch=e, seq=q, key=key)
            else:
                a.next_window(e)
            up = a.update
            for x in rows:
                up(x)
            frames.append((e, a.release()))
            if progress:
                progress(len(rows))
    except ConfigError as e:
        raise InputError("invalid device config: %s" % e)
    return frames
