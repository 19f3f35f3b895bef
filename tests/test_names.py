"""Item 7 of issue 17: a config's names are its channel names and never
change; --columns (es.simulate(columns=...)) only maps data columns onto
them, by position or FILE=CHANNEL, and a mismatch is one error naming the
channels expected."""
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import edgesynth as es
from edgesynth.channels import column_map, parse_columns
from edgesynth.cli import main

SEED = b"names-seed-00001"


@pytest.fixture(scope="module")
def cfg():
    return es.plan({"a": (0.0, 1.0), "b": (0.0, 1.0)}, epsilon=1, ram="32K", hash_seed="names")


@pytest.fixture(scope="module")
def readings():
    x = np.random.default_rng(3).uniform(0, 1, (300, 2))
    return pd.DataFrame({"a": x[:, 0], "b": x[:, 1]})


def _mech(frame):
    return es.read_frames(frame)[0].mechs[0]


def test_the_frame_carries_the_configs_names_whatever_the_headers(cfg, readings):
    want = es.simulate(cfg, readings, seed=SEED)
    headers = readings.rename(columns={"a": "temp", "b": "humid"})
    by_position = es.simulate(cfg, headers, seed=SEED, columns=["temp", "humid"])
    by_name = es.simulate(cfg, headers[["humid", "temp"]], seed=SEED, columns={"humid": "b", "temp": "a"})
    as_text = es.simulate(cfg, headers, seed=SEED, columns="humid=b,temp=a")
    assert by_position == by_name == as_text == want
    assert _mech(want).names == ["a", "b"]
    assert _mech(by_position).config_id() == _mech(want).config_id()


def test_position_maps_the_listed_column_to_that_channel(cfg, readings):
    """Listing the columns the other way round swaps what each channel reads."""
    swapped = readings.rename(columns={"a": "b", "b": "a"})
    assert es.simulate(cfg, swapped, seed=SEED, columns=["b", "a"]) == es.simulate(cfg, readings, seed=SEED)
    assert es.simulate(cfg, readings, seed=SEED, columns=["b", "a"]) != es.simulate(cfg, readings, seed=SEED)


def test_an_array_takes_its_columns_in_the_order_the_mapping_gives(cfg, readings):
    want = es.simulate(cfg, readings, seed=SEED)
    x = readings[["b", "a"]].to_numpy()
    assert es.simulate(cfg, x, seed=SEED, columns={"q": "b", "p": "a"}) == want
    assert es.simulate(cfg, readings.to_numpy(), seed=SEED) == want


@pytest.mark.parametrize("columns,message", [
    (["temp"], "gives 1 column\\(s\\) for 2 channel\\(s\\): the config's channels are a, b"),
    (["temp", "humid", "x"], "gives 3 column"),
    ({"temp": "a", "humid": "c"}, "'c', which is not a channel: the config's channels are a, b"),
    ({"temp": "a", "humid": "a"}, "feeds channel 'a' twice .*channels are a, b"),
    ({"temp": "a"}, "feeds no column to channel 'b': the config's channels are a, b"),
    (["temp", "temp"], "names column 'temp' twice"),
    ("temp=a,temp=b", "names column 'temp' twice"),
    ("temp=a,humid", "mixes FILE=CHANNEL"),
    ("=a,humid=b", "leaves one side empty"),
    (" , ", "at least one column"),
])
def test_a_mismatch_is_one_error_naming_the_channels(cfg, columns, message):
    with pytest.raises(es.InputError, match=message):
        column_map(cfg, columns)


def test_missing_data_columns_name_the_channels(cfg, readings):
    headers = readings.rename(columns={"a": "temp", "b": "humid"})
    with pytest.raises(es.InputError, match="no column 'a' .*channels are a, b: map data columns onto them"):
        es.simulate(cfg, headers, seed=SEED)
    with pytest.raises(es.InputError, match="3 columns for the config's 2 channel"):
        es.simulate(cfg, np.zeros((4, 3)), seed=SEED)


def test_parse_columns_forms():
    assert parse_columns(" temp , humid ") == ["temp", "humid"]
    assert parse_columns("temp=a, humid = b") == {"temp": "a", "humid": "b"}


def test_a_combined_config_maps_onto_its_inputs(readings):
    cdf = es.plan({"t": (0.0, 1.0)}, epsilon=0.5, mechanism="cdf", bins=16)
    prof = es.plan(None, epsilon=0.5, mechanism="profile", domain=(0, 50), cap=3, names=["id"])
    combo = es.combine([cdf, prof])
    ids = np.arange(len(readings)) % 50
    fed = pd.DataFrame({"temp": readings["a"], "sensor": ids})
    want = es.simulate(combo, {"t": readings["a"], "id": ids}, seed=SEED)
    assert es.simulate(combo, fed, seed=SEED, columns={"sensor": "id", "temp": "t"}) == want
    assert es.simulate(combo, fed, seed=SEED, columns=["temp", "sensor"]) == want
    assert [m.names for m in es.read_frames(want)[0].mechs] == [["t"], ["id"]]
    with pytest.raises(es.InputError, match="the config's channels are t, id"):
        es.simulate(combo, fed, seed=SEED, columns={"temp": "t"})


def _run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    return r.exit_code, r.output


def test_frames_from_files_with_different_headers_merge(tmp_path, readings):
    """Two devices of one config, recorded under different headers, give
    frames of one config id that assemble together, under the config's names."""
    cfg = tmp_path / "device.json"
    code, _ = _run("plan", "--bounds", "0.0:1.0,0.0:1.0", "--epsilon", 1, "--ram", "32K", "--names", "a,b",
                   "--hash-seed", "h", "-o", cfg)
    assert code == 0
    readings.rename(columns={"a": "temp", "b": "humid"}).to_csv(tmp_path / "one.csv", index=False)
    readings.rename(columns={"a": "T", "b": "H"}).to_csv(tmp_path / "two.csv", index=False)
    readings.to_csv(tmp_path / "named.csv", index=False)
    runs = [("one.csv", ["--columns", "temp,humid"]), ("two.csv", ["--columns", "H=b,T=a"]), ("named.csv", [])]
    for i, (src, cols) in enumerate(runs):
        code, out = _run("simulate", "--config", cfg, "--input", tmp_path / src, *cols, "--seed", "01",
                         "--device-id", "d%d" % i, "-o", tmp_path / ("r%d" % i))
        assert code == 0, out
    frames = [es.read_frames(tmp_path / ("r%d" % i))[0] for i in range(3)]
    assert len({f.mechs[0].config_id() for f in frames}) == 1
    gen = es.assemble([tmp_path / ("r%d" % i) for i in range(3)])
    assert gen.names == ["a", "b"] and gen.summary()["frames"] == 3


def test_cli_mismatch_is_one_line_exit_2(tmp_path, readings):
    cfg = tmp_path / "device.json"
    _run("plan", "--bounds", "0.0:1.0,0.0:1.0", "--epsilon", 1, "--ram", "32K", "--names", "a,b", "-o", cfg)
    readings.rename(columns={"a": "temp", "b": "humid"}).to_csv(tmp_path / "d.csv", index=False)
    code, out = _run("simulate", "--config", cfg, "--input", tmp_path / "d.csv", "--columns", "temp=a,humid=c",
                     "-o", tmp_path / "r")
    assert code == 2 and out.strip().count("\n") == 0
    assert "the config's channels are a, b" in out


def test_plan_names_twice_says_names(tmp_path):
    code, out = _run("plan", "--bounds", "0:1,0:1", "--epsilon", 1, "--ram", "64K", "--names", "a,a",
                     "-o", tmp_path / "c.json")
    assert code == 2 and "--names names a channel twice" in out and "--columns" not in out


def test_a_config_naming_a_channel_twice_is_refused(cfg):
    bad = dict(cfg, mechanisms=[dict(cfg["mechanisms"][0], names=["a", "a"])])
    with pytest.raises(es.InputError, match="names a channel twice \\(a, a\\); plan it with distinct --names"):
        es.simulate(bad, np.zeros((3, 2)), seed=SEED)


def test_evaluate_columns_refuse_a_mapping(tmp_path, readings):
    readings.to_csv(tmp_path / "d.csv", index=False)
    code, out = _run("evaluate", "--real", tmp_path / "d.csv", "--synthetic", tmp_path / "d.csv",
                     "--columns", "a=x,b=y")
    assert code == 2 and "FILE=CHANNEL maps" in out
