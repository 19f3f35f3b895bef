"""Tables out (issue 17 items 4-6): CSV and Parquet by extension, "-" for
stdout, integer columns, exact CSV numbers, atomic files on errors and Ctrl-C."""
import csv
import glob
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import edgesynth as es
from edgesynth.cli import main
from edgesynth.data.writers import write_table


def read_csv_floats(path):
    """Header and float64 rows of a CSV, parsed with the standard library (not pyarrow)."""
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    return rows[0], np.array([[float(c) for c in r] for r in rows[1:]], dtype=np.float64)


def leftovers(directory):
    return glob.glob(os.path.join(str(directory), ".*.tmp"))


@pytest.fixture(scope="module")
def gen_path(tmp_path_factory):
    rng = np.random.default_rng(7)
    x = np.column_stack([rng.normal(0.5, 0.1, 5000), rng.normal(6.0, 1.5, 5000)])
    cfg = es.plan({"a": (0.0, 1.0), "b": (0.0, 10.0)}, epsilon=1, ram="32K")
    gen = es.assemble([es.simulate(cfg, x, seed=1, runtime="numpy")])
    path = tmp_path_factory.mktemp("gen") / "gen.msgpack"
    gen.save(path)
    return path


def test_csv_holds_every_float64_exactly(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.random((3000, 2)) * 110
    x[:8, 0] = [1 / 3, 0.1, -0.0, 5e-324, 1e-300, 1.7976931348623157e308, 2 ** 53 + 2.0, -123456789.123456789]
    p = tmp_path / "t.csv"
    assert write_table(p, ["temp", "humid"], [x[:1000], x[1000:]]) == 3000
    header, y = read_csv_floats(p)
    assert header == ["temp", "humid"]
    assert y.tobytes() == x.tobytes()  # bit for bit, -0.0 included


def test_csv_header_is_quoted_only_where_needed(tmp_path):
    p = tmp_path / "t.csv"
    write_table(p, ["a", "b,c", 'say "hi"'], [np.zeros((1, 3))])
    first = p.read_text().splitlines()[0]
    assert first == 'a,"b,c","say ""hi"""'
    assert read_csv_floats(p)[0] == ["a", "b,c", 'say "hi"']


def test_parquet_round_trip_one_row_group_per_block(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.random((2500, 3)) * 50
    x[:, 2] = np.floor(x[:, 2])
    p = tmp_path / "t.PARQUET"  # the extension decides, in any case
    seen = []
    n = write_table(p, ["a", "b", "k"], [x[:1000], x[1000:1000], x[1000:2200], x[2200:]],
                    integer=[False, False, True], progress=seen.append)
    assert n == 2500 and seen == [1000, 1200, 300]  # the empty block is skipped
    f = pq.ParquetFile(p)
    assert f.metadata.num_row_groups == 3
    assert [str(t) for t in f.schema_arrow.types] == ["double", "double", "int64"]
    t = f.read()
    assert np.array_equal(np.column_stack([t["a"].to_numpy(), t["b"].to_numpy()]), x[:, :2])
    assert t["k"].to_numpy().dtype == np.int64 and np.array_equal(t["k"].to_numpy(), x[:, 2].astype(np.int64))


def test_integer_columns_are_written_as_integers(tmp_path):
    x = np.array([[0.25, 3.0], [1.5, -2.0], [2.0, 4.4999], [2.5, 1e6]])
    p = tmp_path / "t.csv"
    write_table(p, ["f", "i"], [x], integer=[False, True])
    lines = p.read_text().splitlines()[1:]
    assert [ln.split(",")[1] for ln in lines] == ["3", "-2", "4", "1000000"]  # rounded, no ".0", no exponent
    with pytest.raises(es.InputError, match="integer has 1 flags for 2 columns"):
        write_table(p, ["f", "i"], [x], integer=[True])


def test_es_write_dataframe_dict_and_array(tmp_path):
    df = pd.DataFrame({"count": np.array([1, 2, 30], dtype=np.int64), "temp": [0.5, 21.25, 1 / 3]})
    assert es.write(df, tmp_path / "d.parquet") == 3
    back = pd.read_parquet(tmp_path / "d.parquet")
    pd.testing.assert_frame_equal(back, df)  # dtypes too: int64 stays int64
    es.write({"count": [4, 5], "temp": [0.1, 0.2]}, tmp_path / "d.csv")
    assert (tmp_path / "d.csv").read_text() == "count,temp\n4,0.1\n5,0.2\n"
    es.write(np.array([[1.5], [2.5]]), tmp_path / "a.csv", names=["v"])
    assert (tmp_path / "a.csv").read_text() == "v\n1.5\n2.5\n"
    with pytest.raises(es.InputError, match="row 1, column 'v': missing value"):
        es.write({"v": [1.0, np.nan]}, tmp_path / "n.csv")
    with pytest.raises(es.InputError, match="column 'v'.* not a finite number"):
        es.write({"v": [1.0, np.inf]}, tmp_path / "n.csv")
    assert not (tmp_path / "n.csv").exists()


def test_generator_write_is_its_sample(tmp_path, gen_path):
    gen = es.load(gen_path)
    n = (1 << 20) + 5  # two blocks
    seen = []
    assert gen.write(tmp_path / "s.parquet", n, seed=3, progress=seen.append) == n
    assert seen == [1 << 20, 5]
    f = pq.ParquetFile(tmp_path / "s.parquet")
    assert f.metadata.num_row_groups == 2 and f.schema_arrow.names == gen.names
    want = gen.sample_array(n, seed=3)
    assert np.array_equal(np.column_stack([c.to_numpy() for c in f.read().columns]), want)
    gen.write(tmp_path / "s.csv", 2000, seed=3)
    assert read_csv_floats(tmp_path / "s.csv")[1].tobytes() == gen.sample_array(2000, seed=3).tobytes()
    with pytest.raises(es.InputError, match="number of rows"):
        gen.write(tmp_path / "bad.csv", -1)
    assert not (tmp_path / "bad.csv").exists() and not leftovers(tmp_path)


def test_generator_writes_integer_channels_as_integers(tmp_path):
    rng = np.random.default_rng(5)
    x = np.c_[rng.uniform(-20, 45, 20000), rng.integers(3, 40, 20000)]
    cfg = es.plan({"temp": (-20, 45), "count": (3, 40)}, epsilon=1, ram="32K", integer=["count"])
    gen = es.assemble(es.simulate(cfg, x, seed=4, runtime="numpy"))
    assert gen.integer == [False, True]
    gen.write(tmp_path / "s.parquet", 3000, seed=1)
    back = pd.read_parquet(tmp_path / "s.parquet")
    assert [str(t) for t in back.dtypes] == ["float64", "int64"]
    pd.testing.assert_frame_equal(back, gen.sample(3000, seed=1))
    gen.write(tmp_path / "s.csv", 3000, seed=1)
    counts = [ln.split(",")[1] for ln in (tmp_path / "s.csv").read_text().splitlines()[1:]]
    assert all(c.isdigit() for c in counts)


def test_sample_to_stdout(tmp_path, gen_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["sample", str(gen_path), "-n", "500", "--seed", "2", "-o", "-"],
                           catch_exceptions=False)
    assert r.exit_code == 0
    assert not os.path.exists("-")
    lines = r.stdout.splitlines()
    assert lines[0] == "a,b" and len(lines) == 501
    rows = np.array([[float(c) for c in ln.split(",")] for ln in lines[1:]])
    assert rows.tobytes() == es.load(gen_path).sample_array(500, seed=2).tobytes()
    assert "wrote stdout: 500 rows of a,b" in r.stderr


def test_sample_parquet_via_cli(tmp_path, gen_path):
    r = CliRunner().invoke(main, ["sample", str(gen_path), "-n", "1000", "--seed", "2", "-o",
                                  str(tmp_path / "s.parquet")], catch_exceptions=False)
    assert r.exit_code == 0 and "wrote" in r.stdout
    assert pq.ParquetFile(tmp_path / "s.parquet").metadata.num_rows == 1000


@pytest.mark.parametrize("name", ["out.csv", "out.parquet"])
@pytest.mark.parametrize("previous", [None, b"a,b\n1,2\n"])
def test_error_mid_stream_leaves_no_partial_file(tmp_path, name, previous):
    p = tmp_path / name
    if previous is not None:
        p.write_bytes(previous)

    def blocks():
        yield np.ones((1000, 2))
        yield np.ones((1000, 2))
        raise es.InputError("the third block failed")

    with pytest.raises(es.InputError, match="third block"):
        write_table(p, ["a", "b"], blocks())
    assert (p.read_bytes() == previous) if previous is not None else not p.exists()
    assert not leftovers(tmp_path)


def test_bad_blocks_and_full_disk(tmp_path):
    with pytest.raises(es.InputError, match=r"shape \(m, 2\)"):
        write_table(tmp_path / "t.csv", ["a", "b"], [np.ones((4, 3))])
    assert not os.listdir(tmp_path)
    if os.path.exists("/dev/full"):
        with pytest.raises(es.InputError, match="/dev/full: cannot write"):
            write_table("/dev/full", ["a"], [np.ones((1 << 16, 1))])


@pytest.mark.parametrize("previous", [None, b"a,b\n1,2\n"])
def test_ctrl_c_during_sample_leaves_no_partial_file(tmp_path, gen_path, previous):
    out = tmp_path / "out.csv"
    if previous is not None:
        out.write_bytes(previous)
    proc = subprocess.Popen([sys.executable, "-m", "edgesynth", "sample", str(gen_path), "-n", "5000000",
                             "-o", str(out)], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not leftovers(tmp_path) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert leftovers(tmp_path), "the temporary file never appeared"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and b"aborted" in err
    assert (out.read_bytes() == previous) if previous is not None else not out.exists()
    assert not leftovers(tmp_path)
