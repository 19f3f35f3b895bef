"""The firmware tier: the C core cross-compiled for Cortex-M (sizes, stack,
config header), the qemu runtime byte-identical to cpython and native on
Cortex-M4 (mps2-an386) and Cortex-M0+ (microbit), and the C unit tests
(tests/c/test_core.c) compiled with the host gcc. Skips, saying why, where the
ARM toolchain or QEMU is missing (.ci/run installs them)."""
import json
import os
import shutil
import subprocess
from fractions import Fraction

import pytest

from edgesynth import ccore
from edgesynth.config import combine, with_names
from edgesynth.errors import InputError
from edgesynth.mechanisms.cdf.plan import plan_cdf
from edgesynth.mechanisms.profile.plan import plan_profile
from edgesynth.runtimes import native
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
    from edgesynth.runtimes.cpython import run_cpython
    from edgesynth.runtimes.qemu import run_qemu
    from edgesynth.runtimes.simulate import as_readings
    name, _, data, seed, key = case
    cfg = _cfg(case)
    kw = dict(seed=seed, device_id="dev-qemu", epoch=11, seq=4, key=key)
    want = bytes(run_cpython(cfg, as_readings(data, cfg), **kw))
    p = ccore.core_params(cfg)
    if cpu == "cortex-m0plus" and p["mem_bytes"] + 256 + 2048 > M0_RAM:
        # the link-time RAM budget refuses it, with the overflow figure
        with pytest.raises(InputError, match="does not fit microbit's 16K of RAM"):
            run_qemu(cfg, data, cpu=cpu, **kw)
        return
    assert run_qemu(cfg, data, cpu=cpu, **kw) == want


def test_qemu_reports_a_failing_run(qemu):
    """A run the core refuses (noise scale beyond 2**22: exit status 11) is an
    InputError naming the failure, not a silent empty frame."""
    import numpy as np

    from edgesynth.runtimes.qemu import run_qemu
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


def test_qemu_core_refuses_a_bad_device_id(qemu, tmp_path):
    """Past the host's check (run_qemu refuses it first), the core on the board
    refuses an id outside the device-id rule itself: es_agent_init's ES_E_CONFIG,
    exit 11, no frame written."""
    import numpy as np

    from edgesynth.runtimes.qemu import build_harness, run_elf
    cfg = with_names(privhp_config(d=1, r=4, k=2, w=16, j=1, lo=[0], hi=[10]), ["x0"])
    elf = build_harness(cfg, "cortex-m4", str(tmp_path), b"x", "dev\nack", 0, 0, None, False)
    (tmp_path / "in.bin").write_bytes(np.zeros(3, dtype="<i4").tobytes())
    status, log = run_elf(elf, "cortex-m4", str(tmp_path))
    assert status == 11 and "noise failed" in log
    assert not (tmp_path / "out.bin").exists()


def test_qemu_without_seed_seeds_from_the_board_through_the_health_tests(qemu, monkeypatch):
    """Without a seed the harness seeds as a device does: es_drbg_platform reads
    the board's entropy hook (entropy.bin, fresh host bytes per run) and runs the
    health tests. Given fixed bytes, its frame is the cffi core's seeded from the
    same entropy and nonce; a stuck or short source is refused (exit 15)."""
    import hashlib

    import numpy as np

    import edgesynth.firmware_shims.entropy
    from edgesynth.runtimes.qemu import ENTROPY_FILE_BYTES, run_qemu
    cfg = with_names(privhp_config(d=1, r=6, k=4, w=16, j=1, lo=[0], hi=[10]), ["x0"])
    data = np.arange(40).reshape(40, 1) % 11
    board = b"".join(hashlib.sha256(b"board %d" % i).digest() for i in range(2))[:ENTROPY_FILE_BYTES]
    monkeypatch.setattr(edgesynth.firmware_shims.entropy, "gather", lambda: (board[:48], board[48:]))
    assert run_qemu(cfg, data, entropy=board) == native.run_native(cfg, data)
    for bad in (bytes(ENTROPY_FILE_BYTES), board[:ENTROPY_FILE_BYTES - 1]):
        with pytest.raises(InputError, match="exit 15.*drbg failed"):
            run_qemu(cfg, data, entropy=bad)


def _combo():
    name, cfg, data, seed, key = next(c for c in CASES if c[0] == "combo-float-tag")
    return with_names(cfg, ["c0", "c1", "c2"])


@pytest.mark.parametrize("cpu", ["cortex-m4", "cortex-m0plus"])
def test_firmware_build_report(arm, cpu):
    from edgesynth.targets.firmware import C_SOURCES, COMMON, ENTRY_POINTS, FLOAT, build

    def text(files):
        return sum(r["objects"][f[:-2] + ".o"]["text"] for f in set(files))
    cfg = _combo()
    r = build(cpu, cfg)
    assert all(o["data"] == 0 and o["bss"] == 0 for o in r["objects"].values())  # caller memory only
    assert 1000 < r["common"]["text"] == text(COMMON)
    for kind, files in C_SOURCES.items():
        assert r["devices"][kind]["text"] == text(COMMON + files) > r["common"]["text"]
    assert r["float"]["cdf"]["text"] > 0 and r["float"]["privhp"]["text"] > 0
    one_shot = C_SOURCES["privhp"] + C_SOURCES["cdf"] + C_SOURCES["profile"]
    assert r["config"] == {"kinds": ["privhp", "cdf", "profile"], "float": True,
                           "text": text(COMMON + one_shot + FLOAT["privhp"] + FLOAT["cdf"])}
    assert set(r["stack"]) == set(ENTRY_POINTS)
    # a chain is at least its entry's own frame and below a few KiB on a small MCU
    assert all(32 <= v < 4096 for v in r["stack"].values())
    # the noise is drawn through the ops tables: es_agent_init's chain reaches the
    # DRBG's SHA-256 below every kind's draw_noise, deeper than laying out a state
    assert r["stack"]["es_agent_init"] > r["stack"]["es_privhp_init"] + 200
    assert r["counters_bytes"] == ccore.core_params(cfg)["mem_bytes"] == 5420
    st = r["state"]
    assert r["state_bytes"] == st["es_privhp_t"] + st["es_cdf_t"] + st["es_profile_t"] + st["es_agent_t"]
    assert r["ram_bytes"] == r["counters_bytes"] + r["state_bytes"]
    assert max(st["es_privhp_t"], st["es_cdf_t"], st["es_profile_t"]) < st["es_agent_t"] <= 256


@pytest.mark.parametrize("cpu", ["cortex-m4", "cortex-m0plus"])
def test_the_planner_charges_what_the_c_core_needs(arm, cpu):
    """plan --device-runtime c charges C_CORE_OVERHEAD beyond the counters: it
    must hold the agent and the largest mechanism state, the construction DRBG
    and the deepest stack chain as compiled for the CPU."""
    from edgesynth.ram import C_CORE_OVERHEAD
    from edgesynth.targets.firmware import build
    r = build(cpu)
    st = r["state"]
    need = (st["es_agent_t"] + max(st["es_privhp_t"], st["es_cdf_t"], st["es_profile_t"]) + st["es_drbg_t"]
            + max(r["stack_by_kind"][k] for k in ("privhp", "cdf", "profile")))
    assert need <= C_CORE_OVERHEAD < need + 512
    # a one-kind chain is the conservative all-kinds one restricted: never deeper
    assert max(r["stack_by_kind"].values()) == max(r["stack"].values())


def test_firmware_cli_json_and_header(arm, tmp_path):
    from click.testing import CliRunner

    from edgesynth.cli import main
    cfg = privhp_config(d=2, r=10, k=8, w=32, j=2, lo=[0, 0], hi=[100, 100])
    (tmp_path / "dev.json").write_text(json.dumps(cfg))
    res = CliRunner().invoke(main, ["firmware", "build", "--cpu", "cortex-m0plus", "--config",
                                    str(tmp_path / "dev.json"), "--header", str(tmp_path / "es_config.h"),
                                    "--json"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    assert rep["cpu"] == "cortex-m0plus" and rep["ram_bytes"] > rep["counters_bytes"] > 0
    assert "static const es_privhp_cfg_t es_cfg_m0 = {" in (tmp_path / "es_config.h").read_text()
    res = CliRunner().invoke(main, ["firmware", "build", "--header", "x.h"])
    assert res.exit_code == 2 and "--header needs --config" in res.output


def test_c_unit(tmp_path):
    """tests/c/test_core.c against a generated header (PrivHP, CDF and profile
    on one device, the device glue included), with the host gcc and sanitizers."""
    from edgesynth.targets.firmware import config_header
    hp = privhp_config(d=2, r=12, k=16, w=64, j=2, sketch="cs", lo=[0, -20], hi=[100, 120])
    hp["mechanisms"][0]["names"] = ["a", "b"]
    cfg = combine([hp, plan_cdf([0], [1000], Fraction(1, 2), 100, names=["c"]),
                   plan_profile(0, 50, 3, Fraction(1, 2), names=["id"])])
    with open(os.path.join(HERE, "c", "test_core.c"), encoding="utf-8") as fh:
        test_core = fh.read()
    # under AddressSanitizer and UBSan: an out-of-bounds access or undefined behaviour fails the test
    exe = _gcc(tmp_path, config_header(with_names(cfg, ["a", "b", "c", "id"])), test_core,
               "-O2", "-fsanitize=address,undefined", "-fno-sanitize-recover=all")
    res = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout
    assert res.stdout.strip().endswith(" passed, 0 failed")


def _gcc(tmp_path, header, main_c, *flags):
    """Compile ``main_c`` with ``header`` as es_config.h and the whole core (host gcc)."""
    if shutil.which("gcc") is None:
        pytest.skip("no host gcc")
    (tmp_path / "es_config.h").write_text(header)
    (tmp_path / "main.c").write_text(main_c)
    inc = ccore.includedir()
    srcs = [os.path.join(inc, f) for f in sorted(os.listdir(inc)) if f.endswith(".c")]
    exe = tmp_path / "prog"
    subprocess.run(["gcc", "-std=c99", "-O1", "-Wall", "-Wextra", "-Werror", "-I", str(tmp_path), "-I", inc]
                   + list(flags) + [str(tmp_path / "main.c")] + srcs + ["-lm", "-o", str(exe)], check=True)
    return exe


def test_header_comments_cannot_be_escaped(tmp_path):
    """Column names and the config's file name land in C comments: a line
    splice, a trigraph or a comment end must not let them into the code."""
    from edgesynth.targets.firmware import config_header
    cfg = privhp_config(d=2, r=8, k=4, w=16, j=1, lo=[0, 0], hi=[9, 9])
    names = cfg["mechanisms"][0]["names"] = ["a*\\\n/ + 5 /*", "b??/"]
    cfg = with_names(cfg, names)
    header = config_header(cfg, source="x */ int leaked = 1; /*")
    exe = _gcc(tmp_path, header, '#include "es_config.h"\ntypedef char two[ES_CFG_INPUTS == 2 ? 1 : -1];\n'
               "extern int leaked;\nint main(void) { return (int)sizeof(two) - 1; }\n",
               "-Wl,--unresolved-symbols=ignore-all")
    assert subprocess.run([str(exe)]).returncode == 0
    assert "leaked" not in header.replace("x _/ int leaked = 1_ /_", "")


def test_double_reading_glue_takes_ids_as_the_python_agent_does(tmp_path):
    """ES_CFG_DEVICE_F64: an integral id beyond int32 is outside every domain
    and ignored (as in Python); a non-integral one is refused before any
    mechanism counts its reading; the frame is the Python agent's."""
    from edgesynth.runtimes.cpython import run_cpython
    from edgesynth.targets.firmware import config_header
    cfg = with_names(combine([plan_cdf([0.0], [10.0], Fraction(1, 2), 16, names=["t"]),
                              plan_profile(0, 50, 3, Fraction(1, 2), names=["id"])]), ["t", "id"])
    main_c = r'''#include <stdio.h>
#include "es_core.h"
#define ES_CFG_DEVICE
#define ES_CFG_DEVICE_F64
#include "es_config.h"
static int put(void *ctx, const uint8_t *p, size_t n) { return fwrite(p, 1, n, (FILE *)ctx) != n; }
int main(void)
{
    static es_agent_t a;
    es_drbg_t d;
    const double rows[] = {1.0, 5.0, 2.0, 5e9, 3.0, -1e300, 4.0, 7.0, 5.0, 5.0};
    const double bad[] = {6.0, 2.5};
    if (es_dev_init() || es_drbg_seeded(&d, (const uint8_t *)"glue-seed", 9) ||
        es_agent_init(&a, es_dev_mechs, ES_CFG_N_MECHS, ES_CFG_FACTOR, ES_CFG_EPS_NUM, ES_CFG_EPS_DEN,
                      (const uint8_t *)"device", 6, 0, 0, NULL, 0, &d))
        return 1;
    if (es_dev_update(rows, 5) != ES_OK || es_dev_update(bad, 1) != ES_E_INPUT || es_dev_m0.items != 5)
        return 2;
    return es_agent_release(&a, put, stdout) < 0 ? 3 : 0;
}
'''
    exe = _gcc(tmp_path, config_header(cfg), main_c)
    res = subprocess.run([str(exe)], capture_output=True)
    assert res.returncode == 0
    rows = [(1.0, 5), (2.0, 5 * 10 ** 9), (3.0, -10 ** 300), (4.0, 7), (5.0, 5)]
    assert res.stdout == bytes(run_cpython(cfg, rows, seed=b"glue-seed"))
