"""Fixes of the second host review of marginals (issue 18): the planner
refuses a joint domain the host model cannot hold, evaluate's TV is bounded
by the table sizes, value matching, input edge cases and messages."""
import itertools
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import edgesynth as es
from edgesynth.errors import InputError
from edgesynth.evaluation.table_metrics import tv
from edgesynth.mechanisms.marginals.model import MAX_CELLS
from edgesynth.mechanisms.marginals.plan import plan_marginals
from edgesynth.mechanisms.marginals.schema import Schema


def test_plan_refuses_a_joint_domain_the_host_model_cannot_fit():
    # 4 columns of 64 bins: every pair is 65**2 cells (a device holds it), the joint 65**4 > 2**22
    wide = Schema.from_json({"columns": [{"name": "c%d" % i, "bounds": [0.0, 1.0], "bins": 64} for i in range(4)]})
    assert 65 ** 4 > MAX_CELLS
    with pytest.raises(InputError, match="joint domain has %d cells, the host model holds %d" % (65 ** 4, MAX_CELLS)):
        plan_marginals(wide, Fraction(1), marginals=[(0,), (1,), (2,), (3,)])
    ok = Schema.from_json({"columns": [{"name": "c%d" % i, "bounds": [0.0, 1.0], "bins": 44} for i in range(4)]})
    assert 45 ** 4 <= MAX_CELLS
    assert plan_marginals(ok, Fraction(1), marginals=[(0,), (1,), (2,), (3,)])["plan"]["schema"] == ok.to_json()


def dense_tv(real, synth, sizes, k):
    """The former dense TV: a bincount of prod(sizes[c]) cells per marginal."""
    def dist(t, c):
        shape = [sizes[i] for i in c]
        flat = np.ravel_multi_index(tuple(t[:, i] for i in c), shape)
        return np.bincount(flat, minlength=math.prod(shape)) / len(t)
    ds = [0.5 * np.abs(dist(real, c) - dist(synth, c)).sum() for c in itertools.combinations(range(len(sizes)), k)]
    return float(np.mean(ds)), float(np.max(ds))


def test_tv_over_occupied_cells_equals_the_dense_tv():
    rng = np.random.default_rng(3)
    sizes = [5, 3, 7, 2]
    real = np.stack([rng.integers(0, s, 400) for s in sizes], axis=1)
    synth = np.stack([rng.integers(0, s, 250) for s in sizes], axis=1)
    for k in (1, 2, 3, 4):
        assert tv(real, synth, sizes, k) == pytest.approx(dense_tv(real, synth, sizes, k), abs=1e-12)
    assert tv(real, real, sizes, 3) == (0.0, 0.0)


def test_tv_memory_is_bounded_by_the_rows_not_the_domain():
    # 3 columns of 4096 cells: a dense 3-way marginal would be 2**36 float64 cells (512 GiB)
    rng = np.random.default_rng(4)
    sizes = [4096, 4096, 4096]
    real, synth = rng.integers(0, 4096, (300, 3)), rng.integers(0, 4096, (200, 3))
    assert tv(real, synth, sizes, 3) == (1.0, 1.0)  # no shared cell: disjoint supports
    assert tv(real, real[::-1], sizes, 3) == (0.0, 0.0)


def test_evaluate_on_a_one_column_schema_says_there_is_no_pair():
    schema = {"columns": [{"name": "site", "values": ["a", "b"]}]}
    df = pd.DataFrame({"site": ["a", "b", "a"]})
    with pytest.raises(InputError, match=r"one column \(site\): there is no 2-way marginal"):
        es.evaluate(df, df, schema=schema)


SCHEMA = {"columns": [{"name": "site", "values": ["north", "south"]},
                      {"name": "hour", "values": [0, 1, 2]},
                      {"name": "temp", "bounds": [0.0, 10.0], "bins": 4}]}


def generator(meta):
    """A marginals generator fitted to exact pair marginals of a fixed table."""
    from edgesynth.mechanisms.marginals.generator import MarginalsGenerator
    from edgesynth.mechanisms.marginals.measure import Measurement
    from edgesynth.mechanisms.marginals.model import fit

    schema = Schema.from_json(SCHEMA)
    rng = np.random.default_rng(5)
    cells = np.stack([rng.integers(0, s, 3000) for s in schema.sizes], axis=1)
    ms = []
    for c in ((0, 1), (1, 2)):
        shape = [schema.sizes[i] for i in c]
        flat = np.ravel_multi_index(tuple(cells[:, i] for i in c), shape)
        ms.append(Measurement.ungrouped(c, np.bincount(flat, minlength=math.prod(shape)), 1.0))
    plans = [{"config_id": "x", "first_epoch": 0, "windows": 1, "frames": 1, "estimated_records": 3000.0,
              "drift": [0.0, 1]}]
    return MarginalsGenerator(schema, fit(schema.sizes, ms, iters=50), {"plans": plans, **meta})


def test_plan_from_generator_defaults_to_the_generators_relation():
    gen = generator({"mechanism": "marginals", "relation": "replace"})
    assert es.plan(mechanism="marginals", epsilon=1, from_generator=gen)["relation"] == "replace"
    assert es.plan(mechanism="marginals", epsilon=1, from_generator=gen, relation="replace")["relation"] == "replace"
    with pytest.raises(InputError, match="--relation add-remove differs from the generator's replace"):
        es.plan(mechanism="marginals", epsilon=1, from_generator=gen, relation="add-remove")
    with pytest.raises(InputError, match="the generator's relation 'sideways'"):
        es.plan(mechanism="marginals", epsilon=1, from_generator=generator({"relation": "sideways"}))
    assert es.plan(mechanism="marginals", epsilon=1, schema=SCHEMA)["relation"] == "add-remove"


@pytest.mark.parametrize("sets", ["site;site", "site,hour;hour,site", [["temp"], [" temp "]]])
def test_a_marginal_listed_twice_is_refused(sets):
    with pytest.raises(InputError, match="--marginals lists the marginal .* twice"):
        es.plan(mechanism="marginals", epsilon=1, schema=SCHEMA, marginals=sets)


def test_sample_without_n_on_a_huge_estimate_asks_for_n():
    from edgesynth.synthesis import Generator

    gen = generator({"mechanism": "marginals"})
    gen.model.total = 2e9
    with pytest.raises(InputError, match="estimates 2000000000 records, more than the 1000000000 .* pass the number"):
        Generator(gen).sample(seed=1)
    assert len(Generator(gen).sample(5, seed=1)) == 5


def test_a_tiny_epsilon_names_the_marginal_by_its_columns():
    with pytest.raises(InputError, match=r"leaves the marginal of site x hour a noise scale above 2\*\*22"):
        plan_marginals(Schema.from_json(SCHEMA), Fraction(1, 10 ** 7), marginals=[(0, 1), (2,)])


def test_a_duplicated_column_name_is_refused_in_csv_and_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from edgesynth.mechanisms.marginals.table import read_records

    path = tmp_path / "dup.csv"
    path.write_text("site,site,hour\nnorth,south,1\n")
    with pytest.raises(InputError, match="a column is named twice"):
        read_records(path, ["site", "hour"])
    pq.write_table(pa.table([pa.array(["north"]), pa.array(["south"])], names=["site", "site"]), tmp_path / "d.parquet")
    with pytest.raises(InputError, match="a column is named twice"):
        read_records(tmp_path / "d.parquet", ["site"])


def test_a_blank_line_of_a_one_column_table_is_an_other_record(tmp_path):
    from edgesynth.mechanisms.marginals.table import read_cells

    schema = Schema.from_json({"columns": [{"name": "site", "values": ["north", "south"]}]})
    path = tmp_path / "one.csv"
    path.write_text("site\nnorth\n\nsouth\n")
    assert read_cells(path, schema).ravel().tolist() == [0, 2, 1]
    path.write_text("site\nnorth\nsouth\n")
    assert read_cells(path, schema).ravel().tolist() == [0, 1]
    two = Schema.from_json(SCHEMA)  # a blank line is no record of a wider table
    path.write_text("site,hour,temp\nnorth,1,2.5\n\nsouth,0,3\n")
    assert read_cells(path, two).tolist() == [[0, 1, 1], [1, 0, 1]]


def test_simulate_window_skips_or_refuses_a_row_without_a_time_as_missing_says(tmp_path):
    import json

    from click.testing import CliRunner

    from edgesynth.cli import main

    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps(es.plan(mechanism="marginals", epsilon=1, schema=SCHEMA)))
    data = tmp_path / "d.csv"
    data.write_text("site,hour,temp,t\nnorth,1,2.5,1000\nsouth,,3,\neast,2,11,1003\nnorth,0,1,NA\n")
    args = ["simulate", "--config", cfg, "--input", data, "--time-column", "t", "--window", 10, "--start", 1000,
            "--end", 1020, "--seed", "01", "-o", tmp_path / "f.bin"]
    r = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "2 readings (2 of 4 rows skipped: missing value)" in r.output
    r = CliRunner().invoke(main, [str(a) for a in args + ["--missing", "error"]], catch_exceptions=False)
    assert r.exit_code == 2 and "row 2, column 't': missing time" in r.output


def test_the_value_rule_text_matches_strings_and_numbers_numerically():
    col = Schema.from_json({"columns": [{"name": "c", "values": ["007", 3, 2.5, 1e20, "1.0", "a"]}]})
    got = col.encode_column(0, ["007", 7, "7", "3", "3.0", "3e0", 3.0, np.int64(3), "2.5", 2.5, "1e+20", 1e20,
                                "100000000000000000000", "1.0", 1, "1", "a", "", None, "inf", "nan", True])
    assert got.tolist() == [0, 6, 6, 1, 1, 1, 1, 1, 2, 2, 3, 3, 3, 4, 6, 6, 5, 6, 6, 6, 6, 6]
    # a number matches a string category by its canonical text when no number of the schema equals it
    assert Schema.from_json({"columns": [{"name": "c", "values": ["1", "2"]}]}).encode_column(
        0, [1, 2.0, np.int64(2), 3]).tolist() == [0, 1, 1, 2]


@pytest.mark.parametrize("values", [[1, "1"], [1.0, "1"], [2.5, "2.5"], [1, 1.0], ["a", "a"], ["a", ""]])
def test_values_that_would_read_back_alike_are_refused(values):
    with pytest.raises(InputError, match="repeat|is not a value"):
        Schema.from_json({"columns": [{"name": "c", "values": values}]})


def _distinct(vals):
    from edgesynth.mechanisms.marginals.schema import repeats

    return not repeats(vals)


TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp")), min_size=1, max_size=8)
VALUE = st.one_of(TEXT, st.integers(-2 ** 31, 2 ** 31 - 1), st.floats(allow_nan=False, allow_infinity=False),
                  st.sampled_from(["007", "1.0", "3e0", "1e+20", "2.5e-07", "-0", "NA", "nan", "None"]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(VALUE, min_size=1, max_size=6).filter(_distinct), st.sampled_from(["csv", "parquet"]))
def test_every_schema_value_written_reads_back_to_its_cell(tmp_path, values, ext):
    from edgesynth.mechanisms.marginals.table import read_cells, write_tables

    schema = Schema.from_json({"columns": [{"name": "v", "values": values}, {"name": "w", "values": values[::-1]}]})
    k = len(values)
    cells = np.array([[j, k - j] for j in range(k + 1)], dtype=np.int64)  # every cell of both, "other" included
    frame = pd.DataFrame({n: schema.decode_column(i, cells[:, i], None) for i, n in enumerate(schema.names)})
    path = tmp_path / ("t." + ext)
    write_tables(path, schema, [frame])
    assert read_cells(path, schema).tolist() == cells.tolist()
    # a one-column table: "other" is a blank line
    one = Schema.from_json({"columns": [{"name": "v", "values": values}]})
    write_tables(path, one, [frame[["v"]]])
    assert read_cells(path, one).ravel().tolist() == cells[:, 0].tolist()


def test_adapt_leaves_out_a_pair_above_the_device_cells_instead_of_falling_back_to_one_way():
    from edgesynth.mechanisms.marginals.adapt import plan_from_model
    from edgesynth.mechanisms.marginals.model import Model

    wide = Schema.from_json({"columns": [{"name": "a", "bounds": [0.0, 1.0], "bins": 300},
                                         {"name": "b", "bounds": [0.0, 1.0], "bins": 300},
                                         {"name": "c", "values": [0, 1]}, {"name": "d", "values": [0, 1]}]})
    assert wide.sizes == [301, 301, 3, 3]
    p = np.random.default_rng(2).random(wide.sizes) + 0.1
    cfg = plan_from_model(Model(wide.sizes, np.log(p / p.sum()), 5000.0), wide, Fraction(1))
    cols = [tuple(c) for c in cfg["mechanisms"][0]["cols"]]
    assert (0, 1) not in cols  # 90,601 cells: no device holds it, and the 1-ways or triples cover a and b
    assert sorted(cols) == [(0, 2, 3), (1, 2, 3)]


def test_adapt_on_two_columns_too_wide_for_their_pair_measures_both_one_ways():
    from edgesynth.mechanisms.marginals.adapt import plan_from_model
    from edgesynth.mechanisms.marginals.model import Model

    wide = Schema.from_json({"columns": [{"name": "a", "bounds": [0.0, 1.0], "bins": 300},
                                         {"name": "b", "bounds": [0.0, 1.0], "bins": 300}]})
    p = np.ones(wide.sizes)
    cfg = plan_from_model(Model(wide.sizes, np.log(p / p.sum()), 5000.0), wide, Fraction(1))
    assert cfg["mechanisms"][0]["cols"] == [[0], [1]]


def test_assemble_names_the_model_limit_before_the_memory_check():
    from types import SimpleNamespace

    from edgesynth.mechanisms.marginals.generator import build

    wide = Schema.from_json({"columns": [{"name": "c%d" % i, "bounds": [0.0, 1.0], "bins": 64} for i in range(4)]})
    state = SimpleNamespace(schema=wide, factor=1, config_id=lambda: "x")  # nothing else is read before the check
    with pytest.raises(InputError, match="joint domain has %d cells, the host model holds %d" % (65 ** 4, MAX_CELLS)):
        build(None, [state])


def test_plan_from_generator_is_a_function_of_the_saved_generator(tmp_path):
    """Two windows under the first plan, then a smaller window under the plan
    made from them: the next window's records are the latest plan's per
    window, and the saved generator plans the same config as the one in memory."""
    rng = np.random.default_rng(8)

    def data(n):
        return pd.DataFrame({"site": rng.choice(["north", "south"], n), "hour": rng.integers(0, 3, n),
                             "temp": rng.uniform(0, 10, n)})

    cfg0 = es.plan(mechanism="marginals", schema=SCHEMA, epsilon=1)
    f = [es.simulate(cfg0, data(8000), seed=e + 1, runtime="numpy", epoch=e) for e in (0, 1)]
    cfg1 = es.plan(mechanism="marginals", epsilon=1, from_generator=es.assemble(f))
    assert cfg1["mechanisms"][0] != cfg0["mechanisms"][0]
    f.append(es.simulate(cfg1, data(2000), seed=3, runtime="numpy", epoch=2))
    gen = es.assemble(f)
    plans = {p["first_epoch"]: (p["windows"], p["estimated_records"]) for p in gen.summary()["plans"]}
    assert sorted(plans) == [0, 2] and plans[0][0] == 2 and plans[2][0] == 1
    assert abs(gen.model.next_window_records() - 2000) < 150  # the latest plan's one window, not the mean
    path = tmp_path / "g.msgpack"
    path.write_bytes(gen.to_bytes())
    assert es.plan(mechanism="marginals", epsilon=1, from_generator=str(path)) == \
        es.plan(mechanism="marginals", epsilon=1, from_generator=gen)


@pytest.mark.parametrize("plans", [[], [{"config_id": "x", "windows": 1, "estimated_records": 10.0}],
                                   [{"config_id": "x", "first_epoch": 0, "windows": 0, "estimated_records": 1.0}],
                                   "plans"])
def test_a_generator_without_plan_windows_is_a_one_line_error(plans):
    gen = generator({})
    gen.meta["plans"] = plans
    with pytest.raises(InputError, match="first_epoch, windows and estimated_records"):
        es.plan(mechanism="marginals", epsilon=1, from_generator=gen)
