"""The firmware tier: the C core cross-compiled for Cortex-M (sizes, stack,
config header), the qemu runtime byte-identical to cpython and native on
Cortex-M4 (mps2-an386) and Cortex-M0+ (microbit), and the C unit tests
(tests/c/test_core.c) compiled with the host gcc. Skips, saying why, where the
ARM toolchain or QEMU is missing (.ci/run installs them)."""
import json
import os
import shutil
import subprocess

import pytest

from host_tools import native
from host_tools.errors import InputError
from host_tools.simulate import with_names
from tests.conftest import privhp_config
from tests.native_cases import cases

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = cases()
IDS = [c[0] for c in CASES]
M0_RAM = 16 * 1024


def _need(*tools):
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip("%s not installed (apt-get install -y gcc-arm-none-eabi libnewlib-arm-none-eabi "
                    "qemu-system-arm)" % ", ".join(missing))


@pytest.fixture(scope="module")
def arm():
    _need("arm-none-eabi-gcc", "arm-none-eabi-size", "arm-none-eabi-nm")


@pytest.fixture(scope="module")
def qemu(arm):
    _need("qemu-system-arm")


def _cfg(case):
    name, cfg, data, seed, key = case
    return with_names(cfg, ["c%d" % i for i in range(data.shape[1])])


@pytest.mark.parametrize("cpu", ["cortex-m4", "cortex-m0plus"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_qemu_frames_identical_to_cpython(qemu, cpu, case):
    from host_tools.qemu_runtime import run_qemu
    from host_tools.simulate import as_readings, run_cpython
    name, _, data, seed, key = case
    cfg = _cfg(case)
    kw = dict(seed=seed, device_id="dev-qemu", epoch=11, seq=4, key=key)
    want = bytes(run_cpython(cfg, as_readings(data, cfg), **kw))
    p = native.core_params(cfg)
    if cpu == "cortex-m0plus" and p["mem_bytes"] + 256 + 2048 > M0_RAM:
        # the link-time RAM budget refuses it, with the overflow figure
        with pytest.raises(InputError, match="does not fit microbit's 16K of RAM"):
            run_qemu(cfg, data, cpu=cpu, **kw)
        return
    assert run_qemu(cfg, data, cpu=cpu, **kw) == want


def test_qemu_reports_a_failing_run(qemu):
    """A run the core refuses (noise scale beyond 2**22: exit status 11) is an
    InputError naming the failure, not a silent empty frame."""
    from host_tools.qemu_runtime import run_qemu
    import numpy as np
    cfg = privhp_config(d=1, r=4, k=2, w=16, j=1, lo=[0], hi=[10])
    m = cfg["mechanisms"][0]
    m["sigma"] = [s << 23 for s in m["sigma"]]
    m["sigma"][0] = 1
    m["clamp_p"] <<= 23
    m["q"] <<= 23
    from fractions import Fraction
    e = Fraction(sum(m["sigma"]) + m["clamp_p"], m["q"])
    cfg["epsilon"] = [e.numerator, e.denominator]
    with pytest.raises(InputError, match="exit 11.*noise failed"):
        run_qemu(cfg, np.zeros((3, 1)), seed=b"x")


@pytest.mark.parametrize("cpu", ["cortex-m4", "cortex-m0plus"])
def test_firmware_build_report(arm, cpu):
    from host_tools.firmware import build
    cfg = privhp_config(d=2, r=16, k=64, w=256, j=2, lo=[0, 0], hi=[4096, 4096])
    r = build(cpu, cfg)
    core = r["core"]
    assert core["data"] == 0 and core["bss"] == 0          # no static state: caller memory only
    assert 1000 < core["text"] == sum(o["text"] for o in r["objects"].values())
    assert r["float_quantiser"]["text"] > 0
    assert set(r["stack"]) >= {"es_agent_init", "es_privhp_update_i32", "es_agent_release"}
    # a chain is at least its entry's own frame and below a few KiB on a small MCU
    assert all(64 <= v < 4096 for v in r["stack"].values())
    assert r["counters_bytes"] == native.core_params(cfg)["mem_bytes"] == 4 * (127 + 10 * 2 * 256) + 160
    assert r["ram_bytes"] == r["counters_bytes"] + r["state_bytes"]
    assert r["state"]["es_privhp_t"] < r["state"]["es_agent_t"]


def test_firmware_cli_json_and_header(arm, tmp_path):
    from click.testing import CliRunner
    from host_tools.cli import main
    cfg = privhp_config(d=2, r=10, k=8, w=32, j=2, lo=[0, 0], hi=[100, 100])
    (tmp_path / "dev.json").write_text(json.dumps(cfg))
    res = CliRunner().invoke(main, ["firmware", "build", "--cpu", "cortex-m0plus", "--config",
                                    str(tmp_path / "dev.json"), "--header", str(tmp_path / "es_config.h"),
                                    "--json"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    assert rep["cpu"] == "cortex-m0plus" and rep["ram_bytes"] > rep["counters_bytes"] > 0
    assert "es_cfg_privhp" in (tmp_path / "es_config.h").read_text()
    res = CliRunner().invoke(main, ["firmware", "build", "--header", "x.h"])
    assert res.exit_code == 2 and "--header needs --config" in res.output


def test_c_unit(tmp_path):
    """tests/c/test_core.c against a generated header, with the host gcc."""
    if shutil.which("gcc") is None:
        pytest.skip("no host gcc")
    from host_tools.firmware import config_header
    cfg = privhp_config(d=2, r=12, k=16, w=64, j=2, sketch="cs", lo=[0, -20], hi=[100, 120])
    (tmp_path / "es_config.h").write_text(config_header(cfg))
    inc = native.includedir()
    srcs = [os.path.join(inc, f) for f in sorted(os.listdir(inc)) if f.endswith(".c")]
    exe = tmp_path / "test_core"
    subprocess.run(["gcc", "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-I", str(tmp_path), "-I", inc,
                    os.path.join(HERE, "c", "test_core.c")] + srcs + ["-o", str(exe)], check=True)
    res = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout
    assert res.stdout.strip().endswith(" passed, 0 failed")
