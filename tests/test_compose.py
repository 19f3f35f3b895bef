"""Several mechanisms on one device: combine, per-mechanism columns, one frame
carrying every state, the same bytes on every runtime, assemble per mechanism."""
import json
import shutil
from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner

from edgesynth.cli import main
from edgesynth.errors import InputError, MergeError
from edgesynth.frames import iter_frames
from edgesynth.mechanisms import assemble
from edgesynth.runtimes.simulate import simulate


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def combo(tmp_path):
    paths = [tmp_path / n for n in ("hp.json", "cdf.json", "prof.json", "all.json")]
    assert run("plan", "--bounds", "0:1024,0:1024", "--epsilon", "1/2", "--ram", "64K", "--names", "a,b",
               "--hash-seed", "s", "-o", paths[0]).exit_code == 0
    assert run("plan", "--mechanism", "cdf", "--bounds", "0:1024", "--bins", "256", "--epsilon", "1/4",
               "--names", "b", "-o", paths[1]).exit_code == 0
    assert run("plan", "--mechanism", "profile", "--domain", "0:300", "--cap", "50", "--epsilon", "1/4",
               "--names", "dev", "-o", paths[2]).exit_code == 0
    out = run("combine", *paths[:3], "-o", paths[3])
    assert out.exit_code == 0 and "epsilon 1" in out.output
    return json.loads(paths[3].read_text())


def _data(n=3000):
    rng = np.random.default_rng(0)
    return np.c_[rng.integers(0, 300, n), rng.integers(0, 1024, n), rng.integers(0, 1024, n)].astype(float)


def test_each_mechanism_reads_its_own_columns(combo):
    cols = ["dev", "b", "a"]  # any order: the config's inputs follow --columns
    data = _data()
    seed = b"compose-seed-000"
    empty = next(iter_frames(simulate(combo, np.zeros((0, 3)), cols, seed=seed))).mechs
    frame = simulate(combo, data, cols, seed=seed)
    rel = next(iter_frames(frame))
    assert Fraction(*rel.eps) == 1 and [m.kind for m in rel.mechs] == ["privhp", "cdf", "profile"]
    hp, cdf, prof = rel.mechs
    assert hp.names == ["a", "b"] and cdf.names == ["b"] and prof.names == ["dev"]
    assert np.array_equal(prof.counts - empty[2].counts, np.bincount(data[:, 0].astype(int), minlength=300))
    leaves = cdf.levels[0][-1] - empty[1].levels[0][-1]
    assert np.array_equal(leaves, np.bincount(data[:, 1].astype(int) // 4, minlength=256))
    assert hp.tree[0] - empty[0].tree[0] == len(data)
    assert simulate(combo, data, cols, seed=seed, runtime="numpy") == frame
    assert simulate(combo, data, cols, seed=seed, runtime="native") == frame   # the C core
    if shutil.which("micropython"):
        assert simulate(combo, data, cols, seed=seed, runtime="micropython") == frame


def test_assemble_picks_a_mechanism(combo, tmp_path):
    rel = next(iter_frames(simulate(combo, _data(), ["a", "b", "dev"], seed=b"x" * 16)))
    with pytest.raises(MergeError, match="several mechanisms"):
        assemble([rel])
    assert assemble([rel], "cdf").summary()["mechanism"] == "cdf"
    assert assemble([rel], "profile").summary()["ids"] == 300
    assert assemble([rel], "privhp").summary()["mechanism"] == "privhp"
    with pytest.raises(InputError, match="reads channels"):
        simulate(combo, _data()[:, :2], ["a", "b"], seed=b"x" * 16)
