"""PHDStream on the MicroPython unix port allocates nothing per update, and a
step keeps nothing on the heap (tests/mp/phd_memory.py).

The step's transient garbage is measured and bounded: the DRBG (pure-Python
HMAC-SHA256, about 0.6 KB per discrete Laplace draw here) and spec.draw's
in-function import dominate; the step's own code allocates nothing
(checked with an allocation-free stand-in source, up to that import).
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "mp" / "phd_memory.py"


def figures(out):
    return {k: int(v) for k, v in (line.split() for line in out.splitlines())}


def test_cpython_runs_the_script():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cp = subprocess.run([sys.executable, str(SCRIPT)], cwd=REPO, env=env, capture_output=True, text=True,
                        timeout=120)
    assert cp.returncode == 0, cp.stderr
    f = figures(cp.stdout)
    for pre in ("", "fold_"):
        assert f[pre + "update_locked"] == -1 and f[pre + "nv"] == 1 + 2 * (f[pre + "nv"] // 2) \
            and f[pre + "nl"] == (f[pre + "nv"] + 1) // 2
    assert f["freed"] == 0 and f["fold_freed"] == 1


def test_micropython_update_allocates_nothing_and_step_keeps_nothing():
    exe = shutil.which("micropython")
    if exe is None:
        pytest.skip("no `micropython` on PATH")
    env = dict(os.environ, MICROPYPATH=str(REPO))
    mp = subprocess.run([exe, "-X", "heapsize=256wK", str(SCRIPT)], cwd=REPO, env=env, capture_output=True,
                        text=True, timeout=300)
    assert mp.returncode == 0, mp.stderr + mp.stdout
    f = figures(mp.stdout)
    assert f["fold_freed"] == 1  # the folding state's last step left pairs free
    for pre in ("", "fold_"):  # without and with fold-pruning
        g = {k[len(pre):]: v for k, v in f.items() if k.startswith(pre) and (pre or not k.startswith("fold_"))}
        assert g["update_locked"] == 1000            # 1000 updates under heap_lock(): no MemoryError
        assert g["update_grew"] == 0
        assert g["step_retained"] == 0               # the batch is cleared in place, the noise garbage is freed
        draws = g["nv"] + g["nl"]                    # an upper bound: leaves at depth D draw no split noise
        assert g["step_own_bytes"] <= 64 * draws, g  # spec.draw's import only; nothing per node or event
        assert g["step_bytes"] <= 2048 * draws, g    # the DRBG's HMAC blocks (transient)
    print("phdstream step: %d B allocated (transient) for <= %d draws, %d B without the DRBG; state %d B"
          % (f["step_bytes"], draws, f["step_own_bytes"], f["state_bytes"]))
