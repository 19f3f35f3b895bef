"""Without a seed, every runtime draws fresh entropy: two seedless runs of
``simulate`` on the same config and readings give different frames (the noise
differs), and neither is the frame of a fixed seed. With a seed, the run is
reproducible and identical across runtimes (NOT private: tests and simulation
only). Skips, saying why, only where a runtime's tool is missing."""
import shutil

import numpy as np
import pytest

from edgesynth.runtimes.simulate import RUNTIMES, simulate
from tests.conftest import privhp_config

CFG = privhp_config(d=2, r=8, k=8, w=32, j=1, lo=[0, 0], hi=[100, 100])
COLUMNS = ["x0", "x1"]   # the config's channel names
DATA = np.floor(np.random.default_rng(11).uniform(0, 100, (200, 2)))
SEED = b"fresh-entropy-test"
TOOLS = {"micropython": ("micropython",), "qemu": ("arm-none-eabi-gcc", "qemu-system-arm")}


def _run(runtime, seed=None):
    return bytes(simulate(CFG, DATA, COLUMNS, runtime=runtime, seed=seed))


@pytest.fixture(scope="module")
def seeded():
    """The reference frames: cpython with SEED, and with the empty seed (the
    all-zero-material seed the qemu runtime used where no seed was given)."""
    return _run("cpython", SEED), _run("cpython", b"")


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_seedless_runs_draw_fresh_noise_and_seeded_runs_repeat(runtime, seeded):
    missing = [t for t in TOOLS.get(runtime, ()) if shutil.which(t) is None]
    if missing:
        pytest.skip("the %s runtime needs %s, not installed" % (runtime, ", ".join(missing)))
    want, empty_seed = seeded
    first, second = _run(runtime), _run(runtime)
    assert first != second                         # fresh noise on every run
    assert want not in (first, second) and empty_seed not in (first, second)
    assert _run(runtime, SEED) == want             # seeded: the same frame on every runtime
    if runtime in ("cpython", "numpy", "native"):  # cheap: a second seeded run repeats it exactly
        assert _run(runtime, SEED) == want
