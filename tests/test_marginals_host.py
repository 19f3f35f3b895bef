"""Marginals on the host (issue 18): numpy ingestion equal to the device's
update, the generator file (round trip, hostile files), tables with the
schema's values in and out, simulate's encoding and evaluate's figures."""
import itertools
import math

import msgpack
import numpy as np
import pandas as pd
import pytest

import edgesynth as es
from edgesynth.agent.marginals import Marginals
from edgesynth.errors import InputError
from edgesynth.evaluation.table_metrics import tv
from edgesynth.mechanisms.marginals.generator import FILE_KIND, MarginalsGenerator
from edgesynth.mechanisms.marginals.measure import Measurement
from edgesynth.mechanisms.marginals.model import fit
from edgesynth.mechanisms.marginals.schema import Schema
from edgesynth.mechanisms.marginals.table import encode, load_schema, read_cells, write_tables
from edgesynth.mechanisms.marginals.vector import ingest

SCHEMA = {"columns": [{"name": "site", "values": ["north", "south", "east"]},
                      {"name": "status", "values": ["ok", "warn", "fail"]},
                      {"name": "hour", "values": [0, 1, 2, 3]},
                      {"name": "temp", "bounds": [-10.0, 30.0], "bins": 8}]}


def records(n, seed):
    """A table over SCHEMA with dependent columns, a category outside it
    ("west") and missing statuses: both must land in "other"."""
    rng = np.random.default_rng(seed)
    site = rng.choice(["north", "south", "east", "west"], n, p=[.5, .3, .15, .05])
    ok = rng.choice(["ok", "warn", "fail"], n, p=[.8, .15, .05])
    status = np.where(site == "north", ok, rng.choice(["ok", "warn", "fail"], n, p=[.4, .4, .2])).astype(object)
    status[::37] = None
    temp = np.where(status == "fail", rng.normal(25, 3, n), rng.normal(10, 5, n)).round(2)
    return pd.DataFrame({"site": site, "status": status, "hour": rng.integers(0, 4, n), "temp": temp})


def exact_generator(df, cols=((0, 1), (1, 2), (1, 3), (0, 3))):
    """A generator fitted to the exact (noise-free) marginals of ``df``."""
    schema = Schema.from_json(SCHEMA)
    cells = encode(schema, df)
    ms = []
    for c in cols:
        flat = np.ravel_multi_index(tuple(cells[:, i] for i in c), [schema.sizes[i] for i in c])
        ms.append(Measurement.ungrouped(c, np.bincount(flat, minlength=math.prod(schema.sizes[i] for i in c)), 1.0))
    return MarginalsGenerator(schema, fit(schema.sizes, ms, iters=200), {"mechanism": "marginals"}), cells


def test_ingest_equals_the_device_update_per_record():
    spec = {"kind": "marginals", "schema": SCHEMA, "cols": [[0], [0, 1], [1, 2], [0, 3], [0, 1, 3]],
            "groups": [None, None, [0, 1, 1, 2, 2] * 4, None, None], "q": 4, "sigma": [1, 1, 1, 1, 1]}
    rng = np.random.default_rng(1)
    x = rng.integers(-2, 11, size=(2000, 4)).astype(float)
    x[::7, 1] = np.nan
    x[::5, 3] += 0.75  # floored, as update does
    x[::11, 2] = 1e9
    a, b = Marginals(spec), Marginals(spec)
    for row in x:
        a.update(tuple(row))
    ingest(b, x)
    assert [list(t) for t in a.tabs] == [list(t) for t in b.tabs]
    # every record reached every marginal once (the totals started at range(G))
    assert all(sum(t) - sum(range(len(t))) == len(x) for t in b.tabs)


def test_generator_file_round_trip_gives_the_same_samples():
    gen, _ = exact_generator(records(3000, 0))
    again = MarginalsGenerator.from_bytes(gen.to_bytes())
    a = gen.sample(5000, np.random.default_rng(7))
    b = again.sample(5000, np.random.default_rng(7))
    assert np.array_equal(a, b)
    assert again.schema.to_json() == gen.schema.to_json() and again.model.total == gen.model.total
    w = es.Generator(gen)
    assert w.tabular and w.sample(seed=4).equals(w.sample(seed=4))
    assert len(w.sample(seed=4)) == round(gen.model.total) and not w.sample(seed=4).equals(w.sample(seed=5))


def hostile(gen, **change):
    m = msgpack.unpackb(gen.to_bytes(), raw=False)
    m.update(change)
    for k in [k for k, v in change.items() if v is None]:
        del m[k]
    return msgpack.packb(m)


@pytest.mark.parametrize("change, message", [
    (dict(log_p=b"\0" * 16), "log_p must be"),
    (dict(total=float("nan")), "total must be"),
    (dict(total=5), "total must be"),
    (dict(schema={"columns": []}), "schema.columns"),
    (dict(schema={"columns": [{"name": "a", "bins": 2, "bounds": [0, 1]}] * 2}), "used twice"),
    (dict(meta=[1]), "meta must be"),
    (dict(extra=1), "holds the keys"),
    (dict(iters=None), "holds the keys"),
    (dict(schema={"columns": [{"name": "c%d" % i, "bounds": [0, 1], "bins": 4000} for i in range(3)]}),
     "joint domain"),
])
def test_hostile_generator_files_are_one_line_errors(change, message):
    gen, _ = exact_generator(records(500, 1))
    with pytest.raises(InputError, match=message) as e:
        es.Generator.from_bytes(hostile(gen, **change), "g.bin")
    assert "\n" not in str(e.value) and str(e.value).startswith("g.bin")


def test_a_log_p_that_is_not_a_distribution_is_refused():
    gen, _ = exact_generator(records(500, 1))
    for bad in (gen.model.log_p + 0.1, np.where(gen.model.log_p < -3, np.nan, gen.model.log_p)):
        with pytest.raises(InputError, match="not a log-probability table"):
            MarginalsGenerator.from_bytes(hostile(gen, log_p=bad.astype("<f8").tobytes()))
    with pytest.raises(InputError, match="not a generator file"):
        MarginalsGenerator.from_bytes(gen.to_bytes()[:-3])
    with pytest.raises(InputError, match="not an edgesynth marginals generator"):
        MarginalsGenerator.from_bytes(hostile(gen, kind="edgesynth-cdf-generator"))
    assert FILE_KIND in gen.to_bytes().decode("latin-1")


@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_written_tables_read_back_to_the_sampled_cells(tmp_path, ext):
    gen, _ = exact_generator(records(3000, 2))
    rng = np.random.default_rng(3)
    cells = gen.sample(4000, rng)
    cells[:50, 0] = 3  # "other" site: a missing value in the table
    cells[50:60, 3] = 8  # "other" temp: NaN
    frame = gen.table(0, rng)  # the empty table still has the schema's columns
    assert list(frame.columns) == gen.names
    from edgesynth.mechanisms.marginals.model import to_table
    table = to_table(gen.schema, cells, rng)
    path = tmp_path / ("t." + ext)
    assert write_tables(path, gen.schema, [table[:1000], table[1000:]]) == 4000
    back = read_cells(path, gen.schema)
    assert np.array_equal(back, cells)
    raw = pd.read_csv(path, keep_default_na=False, dtype=str) if ext == "csv" else pd.read_parquet(path)
    assert set(raw["site"][:50]) == {""} if ext == "csv" else raw["site"][:50].isna().all()
    assert set(raw["status"].dropna()) <= {"ok", "warn", "fail", ""}


def test_simulate_encodes_values_with_the_schema_unknown_and_missing_are_other():
    cfg = es.plan(mechanism="marginals", schema=SCHEMA, epsilon=1, marginals="site;status;site,status")
    df = records(400, 3)
    frame = es.simulate(cfg, df, seed=5)
    rel = es.read_frames(frame)[0]
    state = rel.mechs[0]
    schema = Schema.from_json(SCHEMA)
    cells = encode(schema, df)
    assert (cells[:, 0] == 3).sum() == (df["site"] == "west").sum() > 0
    assert (cells[:, 1] == 3).sum() == df["status"].isna().sum() > 0
    # other unknown values and missing ones are the same "other" cell: the same frame
    moved = df.assign(site=df["site"].replace("west", "nowhere"), status=df["status"].fillna("??"))
    assert es.simulate(cfg, moved, seed=5) == frame
    # one row dropped changes it (no row is skipped silently)
    assert es.simulate(cfg, df[1:], seed=5) != frame
    assert [tuple(c) for c in state.cols] == [(0,), (1,), (0, 1)]
    assert es.simulate(cfg, df, seed=5, runtime="numpy") == frame


def test_evaluate_equals_tv_directly():
    df = records(2000, 4)
    gen, cells = exact_generator(df)
    synth = gen.table(1500, np.random.default_rng(9))
    report = es.evaluate(df, synth, schema=SCHEMA)
    s = encode(Schema.from_json(SCHEMA), synth)
    for k in (2, 3):
        avg, top = tv(cells, s, Schema.from_json(SCHEMA).sizes, k)
        assert report["tv_%dway" % k] == {"average": avg, "max": top, "marginals": math.comb(4, k)}
    assert report["rows"] == {"real": 2000, "synthetic": 1500}
    # the fitted pairs are close; an independent table is not
    rng = np.random.default_rng(1)
    shuffled = pd.DataFrame({c: rng.permutation(df[c].to_numpy()) for c in df.columns})
    assert report["tv_2way"]["average"] < 0.5 * es.evaluate(df, shuffled, schema=SCHEMA)["tv_2way"]["average"]


def test_load_schema_from_a_config_and_bad_sources(tmp_path):
    cfg = {"mechanisms": [{"kind": "marginals", "schema": SCHEMA}]}
    assert load_schema(cfg).names == ["site", "status", "hour", "temp"]
    p = tmp_path / "s.json"
    p.write_text("{not json")
    with pytest.raises(InputError, match="not a JSON schema"):
        load_schema(str(p))
    with pytest.raises(InputError, match="one marginals mechanism"):
        load_schema({"mechanisms": [{"kind": "cdf"}]})


def test_every_pair_and_triple_is_scored():
    df = records(300, 5)
    report = es.evaluate(df, df, schema=SCHEMA)
    assert report["tv_2way"]["max"] == 0 and report["tv_3way"]["marginals"] == len(
        list(itertools.combinations(range(4), 3)))


def test_a_combined_config_encodes_the_schema_columns_and_reads_the_others_as_numbers():
    m = es.plan(mechanism="marginals", schema=SCHEMA, epsilon=1, marginals="site,status;hour")
    c = es.plan({"load": (0, 100)}, epsilon=1, mechanism="cdf", bins=16, ram="32K")
    both = es.combine([m, c])
    df = records(600, 6).assign(load=np.random.default_rng(0).uniform(0, 100, 600))
    df.loc[3, "load"] = np.nan  # a missing number skips its row for every mechanism of the device
    frame = es.simulate(both, df, seed=1)
    assert frame == es.simulate(both, df, seed=1, runtime="numpy")
    assert frame == es.simulate(both, df.drop(index=3), seed=1)
    kinds = [s.kind for s in es.read_frames(frame)[0].mechs]
    assert kinds == ["marginals", "cdf"]
    assert es.assemble(frame, mechanism="marginals").tabular


def test_plan_refuses_options_of_other_mechanisms():
    with pytest.raises(InputError, match="--bounds, --names do\\(es\\) not apply to --mechanism marginals"):
        es.plan({"a": (0, 1)}, mechanism="marginals", schema=SCHEMA, epsilon=1, names=["a"])
    with pytest.raises(InputError, match="apply to --mechanism marginals"):
        es.plan({"a": (0, 1)}, mechanism="cdf", bins=4, schema=SCHEMA, epsilon=1)


def test_encoding_once_per_distinct_value_equals_the_schema_per_row():
    schema = Schema.from_json({"columns": [{"name": "c", "values": ["a", 3, 2.5, "7"]}]})
    vals = ["a", 3, 3.0, "3", 2.5, "2.5", 7, "7", None, float("nan"), pd.NA, "b", 4, "a ", True]
    for col in (vals, pd.Series(vals, dtype=object), np.array(vals, dtype=object)):
        assert encode(schema, {"c": col})[:, 0].tolist() == schema.encode_column(0, vals).tolist()
    assert encode(schema, {"c": np.array([3, 7, 4])})[:, 0].tolist() == [1, 3, 4]


@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_a_column_of_mixed_kinds_is_written_as_text_and_reads_back(tmp_path, ext):
    schema = Schema.from_json({"columns": [{"name": "c", "values": ["a", 1, 2.5]},
                                           {"name": "k", "values": [10, 20]}]})
    cells = np.array([[0, 0], [1, 1], [2, 2], [3, 0]])
    from edgesynth.mechanisms.marginals.model import to_table
    path = tmp_path / ("m." + ext)
    write_tables(path, schema, [to_table(schema, cells, np.random.default_rng(0))])
    assert np.array_equal(read_cells(path, schema), cells)
