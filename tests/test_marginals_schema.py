"""The marginals schema (host_tools/mechanisms/marginals/schema.py): public
domains, the reserved "other" cell, round trips, and clear errors."""
import math

import numpy as np
import pytest

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
    # integers match as ints, integral floats and as CSV text; anything else is "other" (24)
    hours = schema.encode_column(1, [0, 23, "7", 7.0, np.int64(5), 24, -1, 7.5, "07", "x", None])
    assert hours.tolist() == [0, 23, 7, 7, 5, 24, 24, 24, 24, 24, 24]
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
])
def test_schema_errors_name_the_column_and_field(obj, words):
    with pytest.raises(InputError) as e:
        Schema.from_json(obj)
    assert words in str(e.value)
