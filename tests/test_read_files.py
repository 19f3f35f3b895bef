"""Reading real-world data (issue 17 items 2-5 for input): CSV dialects, the
plain-number rule, missing values, true line numbers, stdin, Parquet and
DataFrames with missing values, from the library and the command line."""
import io
import sys

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import edgesynth as es
from edgesynth.cli import main
from edgesynth.data import files
from edgesynth.data.files import read_table

T0 = 1262304000  # 2010-01-01T00:00Z


def run(*args, input=None):
    r = CliRunner().invoke(main, [str(a) for a in args], input=input, catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def write(tmp_path, content, name="x.csv"):
    p = tmp_path / name
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    return p


def refused(path, needle, **kw):
    with pytest.raises(es.InputError) as e:
        read_table(path, **kw)
    assert needle in str(e.value), str(e.value)
    return str(e.value)


@pytest.fixture(scope="module")
def cfg_path(tmp_path_factory):
    p = tmp_path_factory.mktemp("cfg") / "c.json"
    es.write_config(p, es.plan({"temp": (0, 100), "hum": (0, 40)}, epsilon=1, ram="32K"))
    return p


# ------------------------------------------------------------ CSV dialects
@pytest.mark.parametrize("sep", [",", ";", "\t", "|"])
def test_bom_is_dropped_and_the_delimiter_is_sniffed(tmp_path, sep):
    p = write(tmp_path, "\ufefftemp{0}hum\r\n1.5{0}2\r\n3{0}4\r\n".format(sep))
    t = read_table(p)
    assert t.names == ["temp", "hum"] and t.data.tolist() == [[1.5, 2.0], [3.0, 4.0]] and t.skipped == 0


def test_sniffing_counts_the_header_outside_quotes_and_delimiter_forces(tmp_path):
    p = write(tmp_path, '"a,b";c\n1;2\n')
    assert read_table(p).names == ["a,b", "c"]
    p = write(tmp_path, "a,b;c\n1,2;3\n")            # ties go in the order , ; tab |
    assert read_table(p, ["a"]).data.tolist() == [[1.0]]
    refused(p, "column 'b;c': '2;3' is not a plain decimal number")
    assert read_table(p, ["c"], delimiter=";").data.tolist() == [[3.0]]
    refused(write(tmp_path, "a;b\n1;2\n"), "no column 'a' (columns split at ','", columns=["a"], delimiter=",")
    assert read_table(write(tmp_path, "a\tb\n1\t2\n"), delimiter="\\t").names == ["a", "b"]
    refused(p, "--delimiter must be one character", delimiter=";;")


def test_a_decimal_comma_under_a_semicolon_header_is_refused_by_line(tmp_path):
    refused(write(tmp_path, "a;b\n1.5;2\n1,5;2\n"), "line 3, column 'a': '1,5' is not a plain decimal number")


# ------------------------------------------------------------- the numbers
@pytest.mark.parametrize("cell", ["1_000", "\uff11\uff12", "\u0663", "inf", "-Infinity", "0x10", "1e", "--1",
                                  "1.2.3", "1e5.5", "\u00a01"])
def test_only_plain_ascii_decimals_are_numbers(tmp_path, cell):
    refused(write(tmp_path, "a,b\n1,2\n3,%s\n" % cell), "line 3, column 'b': %r is not a plain decimal number"
            % cell.strip(" \t"))


def test_plain_numbers_read_exactly_and_too_large_ones_are_refused(tmp_path):
    t = read_table(write(tmp_path, "a\n+1.5\n-.5\n5.\n1E-3\n 7 \n-0\n"))
    assert t.data[:, 0].tolist() == [1.5, -0.5, 5.0, 0.001, 7.0, 0.0]
    refused(write(tmp_path, "a,b\n1,2\n3,1e999\n"), "line 3, column 'b': '1e999' is not a finite number")


# ------------------------------------------------------------ missing values
def test_missing_cells_skip_their_row_and_are_counted(tmp_path):
    cells = ["", "NA", "N/A", "n/a", "#N/A", "NaN", "nan", "NULL", "null", "None", "?", " NA "]
    rows = ["%d,%s" % (i, c) for i, c in enumerate(cells)] + ["%s,1" % c for c in cells] + ["100,200"]
    t = read_table(write(tmp_path, "a,b\n" + "\n".join(rows) + "\n"))
    assert t.data.tolist() == [[100.0, 200.0]] and t.skipped == 2 * len(cells)


def test_missing_error_names_the_first_missing_cell_by_line(tmp_path):
    p = write(tmp_path, "a,b\n1,2\n3,x\n")
    refused(p, "line 3, column 'b': 'x' is not a plain decimal number", missing="error")
    p = write(tmp_path, "a,b\n1,2\n3,4\n5,NA\n,7\n")
    refused(p, "line 4, column 'b': missing value 'NA'", missing="error")
    assert read_table(p).skipped == 2
    refused(p, "missing must be 'skip' or 'error'", missing="drop")


def test_a_missing_cell_in_an_unused_column_never_skips_a_row(tmp_path):
    p = write(tmp_path, "a,note,b\n1,NA,2\n3,,4\n5,?,NA\n")
    t = read_table(p, ["a", "b"])
    assert t.data.tolist() == [[1.0, 2.0], [3.0, 4.0]] and t.skipped == 1
    assert read_table(p, ["a"]).skipped == 0


def test_all_rows_missing_says_so_and_blank_lines_are_not_rows(tmp_path):
    refused(write(tmp_path, "a,b\nNA,1\n"), "no data rows (1 skipped for a missing value)")
    t = read_table(write(tmp_path, "a,b\n1,2\n\n   \n3,4\n"))
    assert t.data.tolist() == [[1.0, 2.0], [3.0, 4.0]] and t.skipped == 0
    assert read_table(write(tmp_path, "a,b\n"), allow_empty=True).data.shape == (0, 2)


# ---------------------------------------------------------- true line numbers
def test_bytes_that_are_not_utf8_are_named_by_their_line(tmp_path):
    refused(write(tmp_path, b"a,b\n1,2\n3,4\n5,6\n\xff\xfe\x00garbage,8\n9,10\n"), "line 5 is not UTF-8")
    big = b"a,b\n" + b"1.25,2.5\n" * 300000 + b"\x80\x81\n"      # well past the first read chunk
    refused(write(tmp_path, big), "line 300002 is not UTF-8")


def test_quoted_cells_over_several_lines_shift_the_line_numbers(tmp_path):
    p = write(tmp_path, 'a,b,note\n1,2,"one\ntwo\nthree"\n3,4,x\n5,oops,y\n')
    refused(p, "line 6, column 'b': 'oops' is not a plain decimal number", columns=["a", "b"])
    p = write(tmp_path, 'a,b,note\n1,2,"one\r\ntwo"\n3,NA,x\n')
    refused(p, "line 4, column 'b': missing value 'NA'", columns=["a", "b"], missing="error")


@pytest.mark.parametrize("quoted", [False, True])
def test_line_numbers_hold_across_batches_with_and_without_quotes(tmp_path, quoted):
    n = 3 * files.BATCH + 17
    rows = ["%d,%d" % (i, i % 7) for i in range(n)]
    if quoted:
        rows[5] = '5,"5"'                       # a quote sends the rest through the csv module
    bad = 2 * files.BATCH + 3                 # the data row at index bad is on line bad + 2
    body = "a,b\n" + "\n".join(rows) + "\n"
    t = read_table(write(tmp_path, body))
    assert t.data.shape == (n, 2) and t.data[bad, 0] == bad and t.data[5, 1] == 5
    rows[bad] = "%d,x" % bad
    refused(write(tmp_path, "a,b\n" + "\n".join(rows) + "\n"), "line %d, column 'b'" % (bad + 2))


def test_a_line_without_end_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "MAX_LINE", 1 << 20)
    monkeypatch.setattr(files, "CHUNK", 1 << 16)
    refused(write(tmp_path, b"a,b\n1,2\n" + b"7" * (2 << 20)), "line 3 is longer than 1 MiB")


def test_progress_counts_every_byte(tmp_path):
    p = write(tmp_path, "a,b\n" + "1,2\n" * 400000)
    seen = []
    read_table(p, progress=seen.append)
    assert sum(seen) == p.stat().st_size and len(seen) > 1


# ------------------------------------------------------------------ Parquet
def test_parquet_nulls_and_nan_are_missing_and_text_columns_are_refused(tmp_path):
    p = tmp_path / "x.PARQUET"
    pd.DataFrame({"a": [1.0, np.nan, 3.0, 4.0], "b": pd.array([1, 2, None, 4], dtype="Int64"),
                  "s": ["w", "x", "y", "z"]}).to_parquet(p)
    t = read_table(p, ["a", "b"])
    assert t.data.tolist() == [[1.0, 1.0], [4.0, 4.0]] and t.skipped == 2
    with pytest.raises(es.InputError, match=r"row 2, column 'a': missing value"):
        read_table(p, ["a", "b"], missing="error")
    with pytest.raises(es.InputError, match=r"column 's' is .*string, not numeric"):
        read_table(p, ["a", "s"])
    with pytest.raises(es.InputError, match="not a readable Parquet file"):
        read_table(write(tmp_path, "a,b\n1,2\n", "text.parquet"))


def test_parquet_integers_beyond_float64_precision_round_as_in_csv(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"a": pa.array([2 ** 60, 1, None], pa.int64()),
                             "b": pa.array([2 ** 64 - 1, 3, 4], pa.uint64())}), tmp_path / "big.parquet")
    t = read_table(tmp_path / "big.parquet", ["a", "b"])
    assert t.skipped == 1 and t.data.tolist() == [[float(2 ** 60), float(2 ** 64)], [1.0, 3.0]]


def test_parquet_timestamps_go_through_the_time_parser(tmp_path):
    p = tmp_path / "t.parquet"
    when = pd.to_datetime(["2010-01-01T00:00:00", None, "2010-01-01T00:00:01.5"], format="ISO8601")
    pd.DataFrame({"a": [1.0, 2.0, 3.0], "t": when}).to_parquet(p)
    t = read_table(p, ["a", "t"], parsers={"t": es.parse_time})
    assert t.data.tolist() == [[1.0, T0], [3.0, T0 + 1.5]] and t.skipped == 1


# ---------------------------------------------------------------- library
def test_read_gives_a_dataframe_with_its_skipped_rows(tmp_path, monkeypatch):
    p = write(tmp_path, "\ufefftemp;hum;note\n1;2;a\nNA;3;b\n4;5;\n")
    df = es.read(p, ["temp", "hum"])
    assert list(df.columns) == ["temp", "hum"] and df.to_numpy().tolist() == [[1, 2], [4, 5]]
    assert df.attrs["skipped_rows"] == 1
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(p.read_bytes())))
    assert es.read("-", ["temp", "hum"]).equals(df)
    frame = pd.DataFrame({"temp": [1.0, None, 4.0], "hum": pd.array([2, 3, pd.NA], dtype="Int64")})
    df = es.read(frame)
    assert df.to_numpy().tolist() == [[1.0, 2.0]] and df.attrs["skipped_rows"] == 2


def test_simulate_skips_dataframe_rows_with_a_missing_value(cfg_path):
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"temp": rng.uniform(0, 100, 500), "hum": rng.uniform(0, 40, 500), "other": np.nan})
    df.loc[[3, 40], "temp"] = np.nan
    df["hum"] = df["hum"].astype(object)
    df.loc[77, "hum"] = None
    clean = df.drop(index=[3, 40, 77])
    assert es.simulate(cfg_path, df, seed=5) == es.simulate(cfg_path, clean, seed=5)
    with pytest.raises(es.InputError, match="row 3, column 'temp': missing value"):
        es.simulate(cfg_path, df, seed=5, missing="error")
    with pytest.raises(es.InputError, match="not a finite number"):
        es.simulate(cfg_path, df.fillna({"temp": np.inf}), seed=5)
    df["t"] = T0 + np.arange(500) * 10.0
    clean = df.drop(index=[3, 40, 77])
    kw = dict(window=3600, start=T0, end=T0 + 7200, seed=5)
    assert es.simulate(cfg_path, df, times="t", **kw) == es.simulate(cfg_path, clean, times="t", **kw)


# -------------------------------------------------------------- command line
def test_simulate_reads_stdin_and_counts_skipped_rows(tmp_path, cfg_path):
    rng = np.random.default_rng(1)
    lines = ["temp;hum"] + ["%.3f;%.3f" % (a, b) for a, b in zip(rng.uniform(0, 100, 300), rng.uniform(0, 40, 300))]
    lines[10], lines[20] = "NA;1", "2;"
    body = "\ufeff" + "\n".join(lines) + "\n"
    p = write(tmp_path, body)
    code, out, err = run("simulate", "--config", cfg_path, "--input", p, "--seed", "01", "-o", tmp_path / "f.bin")
    assert code == 0 and "wrote %s: 298 readings (2 of 300 rows skipped: missing value)" % (tmp_path / "f.bin") in out
    code, out, err = run("simulate", "--config", cfg_path, "--input", "-", "--seed", "01", "-o", tmp_path / "s.bin",
                         input=body.encode())
    assert code == 0 and "298 readings" in out, err
    assert (tmp_path / "s.bin").read_bytes() == (tmp_path / "f.bin").read_bytes()
    assert not (tmp_path / "-").exists()
    code, out, err = run("simulate", "--config", cfg_path, "--input", p, "--missing", "error", "-o", tmp_path / "e")
    assert code == 2 and err.strip() == "error: %s: line 11, column 'temp': missing value 'NA'" % p
    code, out, err = run("simulate", "--config", cfg_path, "--input", p, "--delimiter", ",", "-o", tmp_path / "e")
    assert code == 2 and "split at ','" in err and not (tmp_path / "e").exists()


def test_simulate_windows_skip_a_row_without_a_time(tmp_path, cfg_path):
    rows = ["t,temp,hum"] + ["%d,%d,%d" % (T0 + 60 * i, i % 100, i % 40) for i in range(100)]
    rows[5] = "NA,4,4"
    p = write(tmp_path, "\n".join(rows) + "\n")
    code, out, err = run("simulate", "--config", cfg_path, "--input", p, "--time-column", "t", "--window", 3600,
                         "--start", T0, "--end", T0 + 7200, "--seed", "01", "-o", tmp_path / "w.bin")
    assert code == 0 and "99 readings (1 of 100 rows skipped: missing value), 2 frames" in out, err


def test_evaluate_reads_parquet_and_stdin(tmp_path):
    rng = np.random.default_rng(2)
    real = pd.DataFrame({"temp": rng.normal(50, 5, 400), "hum": rng.normal(20, 2, 400)})
    real.loc[7, "hum"] = np.nan
    real.to_parquet(tmp_path / "real.parquet")
    syn = real.dropna().sample(frac=1, random_state=0)
    syn.to_csv(tmp_path / "syn.csv", index=False)
    args = ["evaluate", "--columns", "temp,hum", "--bounds", "0:100,0:40", "--json"]
    code, out, err = run(*args, "--real", tmp_path / "real.parquet", "--synthetic", tmp_path / "syn.csv")
    assert code == 0 and "1 of 400 rows skipped" in err, err
    code, out2, _ = run(*args, "--real", tmp_path / "real.parquet", "--synthetic", "-",
                        input=(tmp_path / "syn.csv").read_bytes())
    assert code == 0 and out2 == out
    code, _, err = run(*args, "--real", "-", "--synthetic", "-")
    assert code == 2 and "cannot both be -" in err
