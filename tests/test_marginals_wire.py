"""The marginals wire decoder and planner (host_tools/mechanisms/marginals/
wire.py, plan.py): device map -> Measurements, exact variances, strict
schema checks, merging, the exact budget split and the planner's refusals."""
import itertools
import math
import tracemalloc
from fractions import Fraction

import msgpack
import numpy as np
import pytest

from edgesynth.agent.marginals import Marginals
from edgesynth.agent.msgpack_out import Encoder
from edgesynth.errors import InputError, SchemaError
from edgesynth.firmware_shims.drbg import seeded_source
from edgesynth.mechanisms.marginals.plan import candidates, plan_marginals, split_sqrt
from edgesynth.mechanisms.marginals.schema import Schema
from edgesynth.mechanisms.marginals.wire import MarginalsState

SCHEMA = Schema.from_json({"columns": [{"name": "site", "values": ["A", "B", "C"]},
                                       {"name": "hour", "values": list(range(6))},
                                       {"name": "temp", "bounds": [0, 10], "bins": 4}]})


def device(spec, seed=b"wire", rows=(), factor=1):
    m = Marginals(spec, factor)
    m.draw_noise(seeded_source(seed))
    for r in rows:
        m.update(r)
    return m


def payload(m):
    """The decoded msgpack map the device writes for ``m``."""
    out = bytearray()
    enc = Encoder()
    enc.reset(lambda buf, n: out.extend(bytes(buf[:n])))
    m.prepare_release()
    m.encode(enc)
    return msgpack.unpackb(bytes(out), raw=False)


def planned(**kw):
    return plan_marginals(SCHEMA, Fraction(1), **kw)["mechanisms"][0]


def records(n, seed=0):
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, k, size=n) for k in SCHEMA.sizes], axis=1)


def dlap_var_by_pmf(b):
    """Variance of discrete Laplace of scale b summed from its pmf."""
    a = math.exp(-1 / b)
    x = np.arange(1, int(60 * b) + 60)
    return 2 * ((1 - a) / (1 + a)) * float(np.sum(x.astype(float) ** 2 * a ** x))


def test_measurements_carry_the_device_totals_groups_and_exact_variance():
    part = {(0, 2): [0, 0, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 5, 5, 5]}   # 4 x 5 cells of site x temp
    spec = planned(partitions=part)
    rows = [tuple(r) for r in records(300).tolist()]
    m = device(spec, rows=rows)
    state = MarginalsState.from_payload(payload(m), 1)
    ms = state.measurements()
    assert [x.cols for x in ms] == candidates(3)
    for w, x in enumerate(ms):
        x.check(SCHEMA.sizes)
        assert np.array_equal(x.y, np.array(m.tabs[w], dtype=float))
        g = part.get(x.cols)
        assert np.array_equal(x.groups, np.arange(len(x.groups)) if g is None else g)
        b = spec["q"] / spec["sigma"][w]
        assert x.var == pytest.approx(dlap_var_by_pmf(b), rel=1e-9)


def test_decoded_totals_minus_noise_are_the_true_group_counts():
    """End to end from a table: schema encode -> device -> frame map -> Measurements."""
    part = {(1, 2): [i % 7 for i in range(35)]}
    spec = planned(partitions=part)
    rng = np.random.default_rng(5)
    table = {"site": rng.choice(["A", "B", "C", "Z"], 500), "hour": rng.integers(0, 8, 500),
             "temp": rng.uniform(-2, 12, 500)}
    cells = np.stack([SCHEMA.encode_column(i, table[n]) for i, n in enumerate(SCHEMA.names)], axis=1)
    noise = MarginalsState.from_payload(payload(device(spec)), 1).measurements()
    got = MarginalsState.from_payload(payload(device(spec, rows=[tuple(r) for r in cells.tolist()])), 1)
    for x, z in zip(got.measurements(), noise):
        idx = np.ravel_multi_index(tuple(cells[:, c] for c in x.cols), tuple(SCHEMA.sizes[c] for c in x.cols))
        true = np.bincount(x.groups[idx], minlength=len(x.y))
        assert np.array_equal(x.y - z.y, true)
        assert x.group_sums(np.bincount(idx, minlength=len(x.groups))).tolist() == true.tolist()


def test_merge_adds_totals_and_variances():
    spec = planned()
    a = MarginalsState.from_payload(payload(device(spec, seed=b"a")), 1)
    b = MarginalsState.from_payload(payload(device(spec, seed=b"b")), 1)
    ya = [t.copy() for t in a.totals]
    a.accumulate(b)
    assert all(np.array_equal(s, p + q) for s, p, q in zip(a.totals, ya, b.totals))
    assert np.allclose(a.var, 2 * b.var) and a.frames == 2
    other = MarginalsState.from_payload(payload(device(planned(partitions={(0,): [0, 0, 1, 1]}))), 1)
    with pytest.raises(SchemaError, match="different configs"):
        a.accumulate(other)


def _broken(change):
    m = payload(device(planned(partitions={(0, 1): [i // 4 for i in range(28)]})))
    change(m)
    return m


@pytest.mark.parametrize("change, words", [
    (lambda m: m.pop("q"), "keys"),
    (lambda m: m.update(kind="cdf"), "kind must be"),
    (lambda m: m.update(budget=[1, 1]), "budget does not equal"),
    (lambda m: m.update(totals=m["totals"][:-4]), "totals must be a bin of"),
    (lambda m: m["cols"].__setitem__(3, [1, 0]), "cols[3] must list"),
    (lambda m: m["cols"].__setitem__(1, [0]), "cols[1] repeats"),
    (lambda m: m["groups"].__setitem__(3, b"\x00\x00" * 27 + b"\x09\x00"), "group ids must run over 0..9"),
    (lambda m: m["groups"].__setitem__(3, b"\x00\x00"), "nil or a bin of 56 bytes"),
    (lambda m: m.update(schema={"columns": []}), "marginals.schema: schema.columns must list 1..16"),
    (lambda m: m["schema"]["columns"][1].update(name=m["schema"]["columns"][0]["name"]), "is used twice"),
    (lambda m: m["schema"]["columns"][0].update(values=[1, "1"]), "values repeat"),
    (lambda m: m["schema"]["columns"][0].update(values=[1 << 31]), "outside int32"),
    (lambda m: m["schema"]["columns"][0].update(values=list(range(4000))), "groups[3] must be nil or a bin of 56014"),
    (lambda m: m.update(sigma=m["sigma"][:-1]), "sigma must list 6"),
    (lambda m: m.update(q=1 << 47, budget=[sum(m["sigma"]), 1 << 47]), "exceeds 2**22"),
])
def test_decode_is_strict(change, words):
    with pytest.raises(SchemaError) as e:
        MarginalsState.from_payload(_broken(change), 1)
    assert words in str(e.value)


def test_hostile_map_is_refused_before_it_allocates():
    """Nil groups claim prod(sizes) cells each: 60 marginals of 256 x 256 cells
    with no totals must be refused by the totals' length, not after building
    15 MiB of identity maps (memory bounded by the input's size)."""
    m = payload(device(planned()))
    cols = [list(c) for c in itertools.combinations(range(16), 2)][:60]
    m.update(schema={"columns": [{"name": "c%d" % i, "bounds": [0, 1], "bins": 255} for i in range(16)]},
             cols=cols, sigma=[1] * 60,
             budget=[60, m["q"]], groups=[None] * 60, totals=b"")
    tracemalloc.start()
    try:
        with pytest.raises(SchemaError, match="totals must be a bin"):
            MarginalsState.from_payload(m, 1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


@pytest.mark.parametrize("eps", [Fraction(1), Fraction(1, 3), Fraction(3, 10), Fraction(7, 1000), Fraction(3)])
def test_budget_split_is_exact_and_follows_sqrt_of_groups(eps):
    part = {(1, 2): [i % 3 for i in range(35)]}
    cfg = plan_marginals(SCHEMA, eps, partitions=part)
    m = cfg["mechanisms"][0]
    q, sigma = m["q"], m["sigma"]
    assert Fraction(sum(sigma), q) == eps == Fraction(*cfg["epsilon"])
    # sensitivity 1 per marginal over scale q / sigma_w, summed: the budget again, exactly
    assert sum(Fraction(1) / Fraction(q, s) for s in sigma) == eps
    groups = [math.prod(SCHEMA.sizes[i] for i in c) for c in m["cols"]]
    groups[-1] = 3
    ideal = [(sum(sigma) - len(sigma)) * math.sqrt(g) / sum(math.sqrt(h) for h in groups) for g in groups]
    assert all(abs(s - 1 - x) <= 1 + 1e-6 * x for s, x in zip(sigma, ideal))
    Marginals(m)   # the device accepts the planned entry


def test_split_sqrt_is_integer_exact():
    assert split_sqrt(10, [1, 4, 4]) == [2, 4, 4]
    assert sum(split_sqrt((1 << 20) + 5, [3, 7, 1000, 65536])) == (1 << 20) + 5
    with pytest.raises(InputError):
        split_sqrt(2, [1, 1, 1])


def test_planner_refusals_are_clear():
    with pytest.raises(InputError, match=r"needs 1\d\d\d bytes .*--ram gives 1000"):
        plan_marginals(SCHEMA, Fraction(1), ram=1000)
    wide = Schema.from_json({"columns": [{"name": "a", "bounds": [0, 1], "bins": 300},
                                         {"name": "b", "bounds": [0, 1], "bins": 300}]})
    with pytest.raises(InputError, match="the marginal of a x b has 90601 cells"):
        plan_marginals(wide, Fraction(1))
    with pytest.raises(InputError, match="noise scale above 2\\*\\*22"):
        plan_marginals(SCHEMA, Fraction(1, 10 ** 6))
    with pytest.raises(InputError, match="not measured"):
        plan_marginals(SCHEMA, Fraction(1), marginals=[(0,), (1,)], partitions={(2,): [0, 0, 0, 0, 0]})
    with pytest.raises(InputError, match="ids 0..G-1 each used"):
        plan_marginals(SCHEMA, Fraction(1), partitions={(2,): [0, 0, 2, 2, 2]})
    with pytest.raises(InputError, match="for the c or micropython runtime, not 'native'"):
        plan_marginals(SCHEMA, Fraction(1), runtime="native")
    cfg = plan_marginals(SCHEMA, Fraction(1), ram=65536)
    assert cfg["plan"]["counter_bytes"] == 4 * cfg["plan"]["group_totals"]


def test_first_slice_end_to_end_beats_independent_columns():
    """schema -> plan -> device -> map -> Measurements -> model fit -> sample:
    at eps = 1 on a correlated 3-column table the 2-way TV is far below that
    of independent columns drawn from the true 1-way marginals, and shrinks
    as eps grows."""
    from edgesynth.evaluation.table_metrics import tv
    from edgesynth.mechanisms.marginals.model import fit

    rng = np.random.default_rng(0)
    n = 5000
    site = rng.choice(["A", "B", "C"], n, p=[0.5, 0.3, 0.2])
    hour = np.array([{"A": 0, "B": 2, "C": 4}[s] for s in site]) + rng.integers(0, 2, n)
    temp = hour * 1.5 + rng.uniform(0, 2, n)
    cells = np.stack([SCHEMA.encode_column(0, site), SCHEMA.encode_column(1, hour),
                      SCHEMA.encode_column(2, temp)], axis=1)
    indep = np.stack([rng.choice(k, n, p=np.bincount(cells[:, i], minlength=k) / n)
                      for i, k in enumerate(SCHEMA.sizes)], axis=1)
    base = tv(cells, indep, SCHEMA.sizes, 2)[0]
    got = []
    for eps in (Fraction(1, 3), Fraction(1), Fraction(3)):
        spec = plan_marginals(SCHEMA, eps)["mechanisms"][0]
        state = MarginalsState.from_payload(payload(device(spec, rows=[tuple(r) for r in cells.tolist()])), 1)
        model = fit(SCHEMA.sizes, state.measurements(), seed=0)
        got.append(tv(cells, model.sample(n, np.random.default_rng(1)), SCHEMA.sizes, 2)[0])
    assert got[1] < base / 5, (got, base)
    assert got[2] < got[0]


def _objects(v):
    if isinstance(v, dict):
        return 1 + sum(1 + _objects(x) for x in v.values())
    if isinstance(v, list):
        return 1 + sum(_objects(x) for x in v)
    return 1


def test_max_objects_is_the_largest_legal_map():
    """256 three-way marginals of 15 two-cell columns, every one partitioned,
    and a schema of the most values (two categorical columns) and 14 binned
    columns."""
    from itertools import combinations

    from edgesynth.agent.marginals.build import MAX_VALUES
    from edgesynth.mechanisms.marginals.wire import MAX_OBJECTS

    cols = [list(c) for c in combinations(range(1, 16), 3)][:256]
    q = 1 << 20
    columns = [{"name": "big", "values": ["v%d" % i for i in range(MAX_VALUES - 1)]},
               {"name": "one", "values": [0]}]
    columns += [{"name": "c%d" % i, "bounds": [0, 1], "bins": 1} for i in range(14)]
    spec = {"kind": "marginals", "schema": {"columns": columns}, "cols": cols, "groups": [[0] * 4 + [1] * 4] * 256,
            "q": q, "sigma": [q // 256] * 256}
    m = payload(device(spec))
    assert _objects(m) == MAX_OBJECTS
    assert len(MarginalsState.from_payload(m, 1).measurements()) == 256


def test_measurement_check_refuses_a_column_outside_the_schema():
    from edgesynth.errors import InputError
    from edgesynth.mechanisms.marginals.measure import Measurement

    for cols in [(-1,), (-1, 0), (0, 3)]:
        m = Measurement.ungrouped(cols, np.zeros(9 if len(cols) == 2 else 3), 1.0)
        with pytest.raises(InputError, match="names column (-1|3) of a 3-column schema"):
            m.check([3, 3, 3])
    Measurement.ungrouped((0, 2), np.zeros(9), 1.0).check([3, 3, 3])


def test_parse_frame_of_a_large_ungrouped_frame_stays_within_the_documented_bound():
    """docs/wire-format.md: parse_frame's traced peak is at most 4 x frame
    bytes + 8 MiB. A 4 MiB frame of 16 ungrouped 2-way marginals of 65,536
    cells: the totals are views of one float64 array (copies took 8 MiB
    more) and the marginals of one size share one read-only identity map
    (one each took 4 MiB more)."""
    from edgesynth.agent import Agent
    from edgesynth.frames import parse_frame
    from edgesynth.ram import _no_noise
    schema = {"columns": [{"name": "c%d" % i, "bounds": [0, 1], "bins": 255} for i in range(16)]}
    cols = [list(c) for c in itertools.combinations(range(16), 2)][:16]
    spec = {"kind": "marginals", "schema": schema, "cols": cols, "q": 16, "sigma": [1] * 16}
    frame = bytes(Agent({"format": 1, "epsilon": [1, 1], "mechanisms": [spec]}, restore=_no_noise).release())
    assert len(frame) > 4 << 20
    tracemalloc.start()
    try:
        rel, _ = parse_frame(frame)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= 4 * len(frame) + (8 << 20)
    st = rel.mechs[0]
    assert [len(t) for t in st.totals] == [65536] * 16 and not st.groups[0].flags.writeable
    before = [t.copy() for t in st.totals]
    merged = st.copy()
    merged.accumulate(st)   # the views add in place into the copy's own arrays, not into st's
    assert all(np.array_equal(a, b) and np.array_equal(c, 2 * b) for a, b, c in zip(st.totals, before, merged.totals))
