"""Install weight: the base dependencies are the ones that earn their place, and the demo's
data ship with the package (no dataset package, no network)."""
import hashlib
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from edgesynth.data import datasets

ROOT = Path(__file__).resolve().parent.parent


def _requirement_names(reqs):
    return {re.split(r"[\s<>=!~\[;]", r, maxsplit=1)[0].lower().replace("_", "-") for r in reqs}


def test_base_dependencies_are_the_chosen_ones():
    # POT (177 MB for one metric) and vega_datasets (one package for two CSV files) are gone;
    # a new base dependency must be a decision (benchmarks/RESULTS.md, "install weight").
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert _requirement_names(project["dependencies"]) == {
        "msgpack", "cffi", "numpy", "pandas", "pyarrow", "scipy", "click", "rich", "matplotlib", "paho-mqtt"}
    assert "micropython" in project["optional-dependencies"]


def test_demo_data_are_the_published_files_byte_for_byte():
    readme = resources.files("edgesynth.data").joinpath("noaa", "README.md").read_text(encoding="utf-8")
    for name in datasets.FILES:
        digest = hashlib.sha256(resources.files("edgesynth.data").joinpath("noaa", name).read_bytes()).hexdigest()
        assert digest in readme, name


def test_demo_data_and_evaluation_work_without_the_dropped_packages():
    # `import ot` and `import vega_datasets` fail in the child (None in sys.modules)
    code = (
        "import sys; sys.modules['vega_datasets'] = None; sys.modules['ot'] = None\n"
        "import numpy as np, edgesynth as es\n"
        "from edgesynth.data.datasets import station_temperatures\n"
        "x, names = station_temperatures()\n"
        "assert x.shape == (8759, 2) and names == ['seattle_temp_f', 'sf_temp_f'], (x.shape, names)\n"
        "assert x[0].tolist() == [39.4, 47.8] and 0 < x.min() and x.max() < 110\n"
        "real = x[:300]\n"
        "rep = es.evaluate(real, real[::-1] + 1, names, bounds=[(0, 110), (0, 110)], seed=1)\n"
        "assert 0 < rep['synthetic']['w1_joint'] < rep['baseline']['w1_joint'], rep\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
