"""The marginals schema (host_tools/mechanisms/marginals/schema.py): public
domains, the reserved "other" cell, round trips, and clear errors."""
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgesynth.errors import InputError
from edgesynth.mechanisms.marginals.schema import OTHER_CATEGORY, Schema

OBJ = {"columns": [{"name": "site", "values": ["A", "B", "C"]},
                   {"name": "hour", "values": list(range(24))},
                   {"name": "temp", "bounds": [-40, 60], "bins": 20}]}


@pytest.fixture
def schema():
    return Schema.from_json(OBJ)


def test_sizes_and_names_count_the_other_cell(schema):
    assert schema.names == ["site", "hour", "temp"]
    assert schema.sizes == [4, 25, 21]
    assert Schema.from_json(schema.to_json()).sizes == schema.sizes


def test_categorical_values_and_their_text_match_everything_else_is_other(schema):
    cells = schema.encode_column(0, ["A", "C", "B", "D", "", None, float("nan"), 1])
    assert cells.tolist() == [0, 2, 1, 3, 3, 3, 3, 3]
    # integers match any numerically equal input: ints, integral floats, number text ("07" and "7.0" are 7);
    # anything else is "other" (24)
    hours = schema.encode_column(1, [0, 23, "7", 7.0, np.int64(5), 24, -1, 7.5, "07", "7.0", "x", "1_0", None])
    assert hours.tolist() == [0, 23, 7, 7, 5, 24, 24, 24, 7, 7, 24, 24, 24]
    assert schema.encode_column(1, np.array([3, 30])).tolist() == [3, 24]


def test_binned_edges_and_out_of_range_values(schema):
    x = [-40, -35.0001, -35, 59.999, 60, -40.0001, 60.0001, float("nan"), "warm", "12.5", np.inf]
    assert schema.encode_column(2, x).tolist() == [0, 0, 1, 19, 19, 20, 20, 20, 20, 10, 20]


def test_decode_then_encode_is_the_identity_on_cells(schema):
    rng = np.random.default_rng(7)
    for i, k in enumerate(schema.sizes):
        cells = rng.integers(0, k, size=2000)
        cells[:k] = np.arange(k)   # every cell, "other" included
        values = schema.decode_column(i, cells, np.random.default_rng(1))
        assert np.array_equal(schema.encode_column(i, values), cells)


def test_decode_other_is_the_documented_sentinel_and_bins_are_uniform(schema):
    rng = np.random.default_rng(2)
    assert schema.decode_column(0, [0, 3], rng).tolist() == ["A", OTHER_CATEGORY]
    assert schema.decode_column(1, [23, 24], rng).tolist() == [23, OTHER_CATEGORY]
    t = schema.decode_column(2, np.full(20000, 4), rng)   # bin 4 is [-20, -15)
    assert t.min() >= -20 and t.max() < -15 and abs(t.mean() + 17.5) < 0.05
    assert math.isnan(schema.decode_column(2, [20], rng)[0])
    with pytest.raises(InputError, match="cells 0..3"):
        schema.decode_column(0, [4], rng)


@pytest.mark.parametrize("obj, words", [
    ({"cols": []}, 'one key, "columns"'),
    ({"columns": []}, "1..16 columns"),
    ({"columns": ["site"]}, "column 0 must be an object"),
    ({"columns": [{"values": [1]}]}, "column 0: name must be a string"),
    ({"columns": [{"name": "a", "values": [1]}, {"name": "a", "values": [2]}]}, "column 1: name 'a' is used twice"),
    ({"columns": [{"name": "a", "values": []}]}, "column 0 (a): values must list 1..4095"),
    ({"columns": [{"name": "a", "values": [1, "1"]}]}, "column 0 (a): values repeat"),
    ({"columns": [{"name": "a", "values": [True]}]}, "value True is not a string"),
    ({"columns": [{"name": "a", "values": [float("nan")]}]}, "value nan is not"),
    ({"columns": [{"name": "t", "bounds": [5, 5], "bins": 3}]}, "column 0 (t): bounds must be [lo, hi]"),
    ({"columns": [{"name": "t", "bounds": [0, 1], "bins": 0}]}, "column 0 (t): bins must be an integer in [1, 4095]"),
    ({"columns": [{"name": "t", "bounds": [0, 1], "bins": 2, "values": [1]}]}, 'column 0 (t) must have "values"'),
    ({"columns": [{"name": "t", "bins": 2}]}, "got keys bins, name"),
    ({"columns": [{"name": "t", "bounds": [1e15, 1e15 + 1], "bins": 100}]}, "narrower than a double's resolution"),
    ({"columns": [{"name": "a", "values": [1 << 31]}]}, "outside int32"),
    ({"columns": [{"name": "a", "values": ["v" * 65]}]}, "longer than 64"),
    ({"columns": [{"name": "c%d" % i, "values": list(range(4095))} for i in range(2)]}, "at most 4096"),
])
def test_schema_errors_name_the_column_and_field(obj, words):
    with pytest.raises(InputError) as e:
        Schema.from_json(obj)
    assert words in str(e.value)


def test_missing_values_go_to_other_and_never_match_a_value():
    """None, NaN, pandas.NA and NaT are "other" even where the schema has the
    strings "None", "nan", "<NA>" and "NaT" as values; those strings match."""
    sch = Schema.from_json({"columns": [{"name": "s", "values": ["None", "nan", "<NA>", "NaT", "x"]}]})
    missing = pd.Series([None, np.nan, pd.NA, pd.NaT, float("nan")], dtype=object)
    assert sch.encode_column(0, missing).tolist() == [5] * 5
    assert sch.encode_column(0, pd.array([None, "x"], dtype="string")).tolist() == [5, 4]
    assert sch.encode_column(0, ["None", "nan", "<NA>", "NaT"]).tolist() == [0, 1, 2, 3]


finite = st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True)


@st.composite
def binned(draw):
    """A binned column whose bins are wider than float resolution, with any
    magnitude of bounds (huge, tiny, subnormal)."""
    lo, hi = sorted((draw(finite), draw(finite)))
    k = draw(st.integers(1, 4095))
    try:
        return Schema.from_json({"columns": [{"name": "t", "bounds": [lo, hi], "bins": k}]})
    except InputError:
        return None


@settings(max_examples=300, deadline=None)
@given(binned(), st.integers(0, 2**32 - 1))
def test_binned_decode_and_encode_are_exact_inverses(sch, seed):
    """Every decoded number lies in its bin and encodes back to its cell, the
    bounds and the edges themselves included."""
    if sch is None:
        return
    k = sch.sizes[0] - 1
    cells = np.concatenate([np.arange(k + 1), np.random.default_rng(seed).integers(0, k + 1, 64)])
    x = sch.decode_column(0, cells, np.random.default_rng(seed))
    assert np.array_equal(sch.encode_column(0, x), cells)
    lo, hi = sch.columns[0]["bounds"]
    with np.errstate(over="ignore"):  # as the schema computes them
        edges = np.linspace(lo, hi, k + 1)
    assert sch.encode_column(0, edges).tolist() == list(range(k)) + [k - 1]
    with np.errstate(over="ignore"):  # past the largest double: inf, also "other"
        outside = [np.nextafter(lo, -np.inf), np.nextafter(hi, np.inf)]
    assert sch.encode_column(0, outside).tolist() == [k, k]


@pytest.mark.parametrize("bounds", [[0, 10 ** 400], [-(10 ** 400), 0], [0, 2 ** 1024]])
def test_bounds_beyond_a_double_are_refused_in_one_line(bounds):
    """An int bound beyond a double's range: InputError on the host,
    ConfigError on the device (it overflowed with a traceback)."""
    from edgesynth.agent.errors import ConfigError
    from edgesynth.agent.marginals.build import schema_shape
    obj = {"columns": [{"name": "a", "bounds": bounds, "bins": 3}]}
    with pytest.raises(InputError, match="two finite numbers"):
        Schema.from_json(obj)
    with pytest.raises(ConfigError, match="lo < hi and a finite span"):
        schema_shape(obj)


def test_huge_integer_readings_count_in_the_other_cell(schema):
    """A reading beyond a double's range is out of every binned domain: the
    "other" cell, not an OverflowError."""
    got = schema.encode_column(2, [10 ** 400, 5, -(10 ** 400)]).tolist()
    assert got == [20, 9, 20]
    assert schema.encode_column(1, [10 ** 400, 3]).tolist() == [24, 3]
