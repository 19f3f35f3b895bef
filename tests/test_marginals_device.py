"""The marginals device state (agent/marginals/): noise at birth, exact
counting through public partitions, the "other" cell, sensitivity, spec
errors, and byte-identical state on the MicroPython unix port."""
import hashlib
import math
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from edgesynth.agent.errors import ConfigError, SealedError
from edgesynth.agent.marginals import Marginals
from edgesynth.agent.marginals.build import MAX_CELLS
from edgesynth.firmware_shims.drbg import seeded_source
from edgesynth.noise import dlap_variance
from tests.helpers import micropython_exe

REPO = Path(__file__).resolve().parents[1]
SIZES = [3, 5, 4]
COLS = [[0], [1], [2], [0, 1], [0, 2], [1, 2]]
PART = [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 4, 4]   # a public partition of the 3 x 4 cells of (0, 2)
# a categorical, a binned and a mixed-type column: 3, 5 and 4 cells ("other" included)
SCHEMA = {"columns": [{"name": "a", "values": ["x", "y"]}, {"name": "b", "bounds": [0, 4], "bins": 4},
                      {"name": "c", "values": [0, 1.5, "z"]}]}


def schema_of(sizes):
    """A schema of categorical integer columns with these cell counts."""
    return {"columns": [{"name": "x%d" % i, "values": list(range(s - 1))} for i, s in enumerate(sizes)]}


def spec(groups=None, sigma=None, q=1 << 20):
    s = {"kind": "marginals", "schema": SCHEMA, "cols": [list(c) for c in COLS],
         "q": q, "sigma": sigma or [q // 8] * 4 + [q // 4] * 2}
    if groups is not None:
        s["groups"] = groups
    return s


def grouped():
    return spec(groups=[None, None, None, None, PART, None])


def state(sp, seed=b"dev-seed", rows=(), factor=1):
    m = Marginals(sp, factor)
    m.draw_noise(seeded_source(seed))
    for r in rows:
        m.update(r)
    return m


def tabs(m):
    return [np.array(t, dtype=np.int64) for t in m.tabs]


def true_groups(sp, rows):
    """Per marginal, the group of every row, computed with numpy (other cell for out-of-range)."""
    x = np.array(rows, dtype=float)
    sizes = np.array(Marginals(sp).sizes)
    ok = (x >= 0) & (x < sizes)
    cells = np.where(ok, np.floor(np.nan_to_num(x, nan=-1)), sizes - 1).astype(np.int64)
    out = []
    groups = sp.get("groups") or [None] * len(sp["cols"])
    for c, g in zip(sp["cols"], groups):
        idx = np.ravel_multi_index(tuple(cells[:, i] for i in c), tuple(sizes[i] for i in c))
        out.append(idx if g is None else np.asarray(g)[idx])
    return out


def test_counts_exact_through_partitions_and_other_cell():
    sp = grouped()
    rng = np.random.default_rng(3)
    rows = [tuple(int(v) for v in r) for r in rng.integers(-1, [4, 6, 5], size=(400, 3))]
    rows += [(float("nan"), 2, 1), (1.0, 99, -7), (2, 4, 3)]
    noise = tabs(state(sp))
    counted = tabs(state(sp, rows=rows))
    for w, g in enumerate(true_groups(sp, rows)):
        expect = np.bincount(g, minlength=len(noise[w]))
        assert np.array_equal(counted[w] - noise[w], expect), w
        assert (counted[w] - noise[w]).sum() == len(rows)   # every record in every marginal: none dropped
    # column 1 (5 cells, the last its "other" cell): out-of-range indices and index 4 count in cell 4
    assert counted[1][4] - noise[1][4] == sum(1 for r in rows if not 0 <= r[1] < 4)


def test_partitioned_marginal_has_one_total_per_group():
    m = state(grouped())
    assert [len(t) for t in m.tabs] == [3, 5, 4, 15, 5, 20]
    assert m.counter_bytes() == 4 * 52


def test_sensitivity_one_record_moves_one_total_per_marginal_by_one():
    """Neighbours (one record added), same noise: each marginal's totals move
    by exactly 1 in one group, so the l1 change is the number of marginals."""
    for sp in (spec(), grouped()):
        rows = [(0, 1, 2), (2, 4, 0), (1, 1, 1)] * 5
        for extra in [(0, 0, 0), (2, 4, 3), (-1, 5, 9), (1, 3, 2)]:
            a = tabs(state(sp, rows=rows))
            b = tabs(state(sp, rows=rows + [extra]))
            diffs = [bb - aa for aa, bb in zip(a, b)]
            assert all(np.abs(dd).sum() == 1 and dd.min() == 0 for dd in diffs)
            assert sum(int(np.abs(dd).sum()) for dd in diffs) == len(COLS)


def test_budget_is_the_exact_sum_of_sensitivity_over_scale():
    """sum_w Delta_w / b_w with Delta_w = factor and b_w = factor * q / sigma_w
    equals the stated budget exactly, for both relations."""
    sp = grouped()
    for factor in (1, 2):
        m = Marginals(sp, factor)
        eps = sum(Fraction(factor) / Fraction(factor * m.q, s) for s in m.sigma)
        assert eps == Fraction(*m.budget()) == Fraction(sum(sp["sigma"]), sp["q"])


def test_noise_is_drawn_at_birth_reproducibly_with_the_stated_scale():
    q = 1 << 20
    sp = {"kind": "marginals", "schema": schema_of([64, 64]), "cols": [[0, 1]], "q": q, "sigma": [q // 3]}
    a, b, c = (tabs(state(sp, seed=s))[0] for s in (b"n1", b"n1", b"n2"))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    for factor in (1, 2):
        z = tabs(state(sp, seed=b"n3", factor=factor))[0]
        var = dlap_variance(factor * q, q // 3)   # scale 3 (6 for replace): variance about 17.5 (71.5)
        assert abs(z.mean()) < 4 * math.sqrt(var / z.size)
        assert abs(z.var() / var - 1) < 0.1        # 4096 draws: the sd of var/var_hat is about 0.04


def test_each_marginal_gets_its_own_scale():
    """Two marginals of different shares: each table's noise has the variance of
    its own scale factor*q/sigma_w, and those scales spend exactly budget()."""
    q = 1 << 20
    sp = {"kind": "marginals", "schema": schema_of([64, 64, 8]), "cols": [[0, 1], [2]], "q": q,
          "sigma": [q // 3, q // 12]}
    for factor in (1, 2):
        m = state(sp, seed=b"n4", factor=factor)
        spent = Fraction(0)
        for z, sigma in zip(tabs(m), sp["sigma"]):
            var = dlap_variance(factor * q, sigma)
            assert abs(z.var() / var - 1) < 4 * math.sqrt(2 / z.size) + 0.05  # sd of var_hat/var ~ sqrt(2/n)
            spent += Fraction(factor, 1) / Fraction(factor * q, sigma)     # sensitivity / scale
        assert spent == Fraction(*m.budget())


def test_sealed_state_refuses_updates():
    m = state(spec())
    m.sealed = True
    with pytest.raises(SealedError):
        m.update((0, 0, 0))


@pytest.mark.parametrize("change, words", [
    ({"colz": [[0]]}, "no field 'colz'"),
    ({"schema": {"columns": []}}, "schema.columns must list 1..16"),
    ({"schema": {"columns": [{"name": "a", "values": []}]}}, "columns[0].values must list 1..4095"),
    ({"schema": {"columns": [{"name": "a", "values": [1]}, {"name": "a", "values": [2]}]}},
     "columns[1].name must be a new string"),
    ({"schema": {"columns": [{"name": "a", "values": [1, "1"]}]}}, "values repeat '1'"),
    ({"schema": {"columns": [{"name": "a", "values": [2.0, 2]}]}}, "values repeat 2"),
    ({"schema": {"columns": [{"name": "a", "values": [1 << 31]}]}}, "outside int32"),
    ({"schema": {"columns": [{"name": "a", "values": [float("nan")]}]}}, "is not finite"),
    ({"schema": {"columns": [{"name": "a", "values": [True]}]}}, "must be strings, integers or finite"),
    ({"schema": {"columns": [{"name": "a", "values": ["v" * 65]}]}}, "a string must have 1..64 characters"),
    ({"schema": {"columns": [{"name": "a", "values": ["x", ""]}]}}, "a string must have 1..64 characters"),
    ({"schema": {"columns": [{"name": "a", "bounds": [1, 1], "bins": 2}]}}, "lo < hi"),
    ({"schema": {"columns": [{"name": "a", "bounds": [-1e308, 1e308], "bins": 2}]}}, "finite span"),
    ({"schema": {"columns": [{"name": "a", "bounds": [0, float("inf")], "bins": 2}]}}, "must be finite"),
    ({"schema": {"columns": [{"name": "a", "bounds": [0, 1], "bins": 4096}]}}, "bins must be an integer in"),
    ({"schema": {"columns": [{"name": "a", "bounds": [0, 1]}]}}, 'must hold "name" and "values"'),
    ({"schema": {"columns": [{"name": "a" * 65, "values": [1]}]}}, "name must be a new string of 1..64"),
    ({"schema": {"columns": [{"name": "x%d" % i, "values": list(range(4095))} for i in range(2)]}},
     "more than 4096 values"),
    ({"schema": {"columns": [], "extra": 1}}, 'schema must be {"columns"'),
    ({"cols": [[1, 0]]}, "cols[0] must list increasing"),
    ({"cols": [[0], [0]], "sigma": [1, 1]}, "cols[1] repeats marginal 0"),
    ({"cols": [[0, 1, 2, 0]]}, "cols[0] must list 1..3"),
    ({"cols": [[3]]}, "cols[0] must list increasing column indices in [0, 3)"),
    ({"sigma": [1, 2]}, "sigma must list 6"),
    ({"groups": [None]}, "groups must list 6 entries"),
    ({"groups": [None, None, None, None, PART[:-1], None]}, "groups[4] must list one group id per cell (12)"),
    ({"groups": [None, None, None, None, [0] * 11 + [2], None]}, "groups[4]: group 1 has no cell"),
    ({"groups": [None, None, None, None, [0] * 11 + [12], None]}, "groups[4] must hold integers in [0, 12)"),
])
def test_spec_errors_name_the_field(change, words):
    sp = spec()
    sp.update(change)
    with pytest.raises(ConfigError) as e:
        Marginals(sp)
    assert words in str(e.value)


def test_too_many_cells_and_too_small_budget_are_refused():
    big = {"kind": "marginals", "schema": schema_of([300, 300]), "cols": [[0, 1]], "q": 1, "sigma": [1]}
    with pytest.raises(ConfigError, match="more than %d" % MAX_CELLS):
        Marginals(big)
    tiny = {"kind": "marginals", "schema": schema_of([2]), "cols": [[0]], "q": 1 << 30, "sigma": [1]}
    with pytest.raises(ConfigError, match="exceeds 2\\*\\*22"):
        state(tiny)


def _vector(cmd, env_key):
    env = dict(os.environ)
    env[env_key] = str(REPO) + (":.frozen" if env_key == "MICROPYPATH" else "")
    r = subprocess.run(cmd + [str(REPO / "tests" / "mp" / "marginals_vector.py")], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


# sha256 of tests/mp/marginals_vector.py's output: the state map is a wire format,
# a change to its bytes (order of draws, keys, encoding) must be deliberate
GOLDEN = "e26d7452f09bee7151b8a925b994c7a11aa55e05d6ef140d0d42f9be028d12d9"


def test_golden_state_map():
    out = _vector([sys.executable], "PYTHONPATH")
    assert hashlib.sha256(out.encode()).hexdigest() == GOLDEN


def test_micropython_state_equals_cpython_byte_for_byte():
    """The same spec, seed and records encode to the same bytes on the
    MicroPython unix port (updates under heap_lock: no allocation) as on CPython."""
    exe = micropython_exe()
    cp = _vector([sys.executable], "PYTHONPATH")
    mp = _vector([exe, "-X", "heapsize=256wK"], "MICROPYPATH")
    assert len(cp) > 200 and mp == cp


def _released_first_total(records, seeds):
    """Total 0 of a partitioned marginal (cells 0, 1 -> group 0; 2, 3 -> group 1), scale 1, per seed."""
    sp = {"kind": "marginals", "schema": schema_of([4]), "cols": [[0]], "groups": [[0, 0, 1, 1]], "q": 1,
          "sigma": [1]}
    out = np.empty(len(seeds), dtype=np.int64)
    for k, seed in enumerate(seeds):
        out[k] = state(sp, seed=seed, rows=records).tabs[0][0]
    return out


def test_empirical_dp_audit_one_record_added():
    """Frames of D and of D plus one record (its cell shares a group with D's
    record), over independent seeds: the empirical privacy loss at every
    well-sampled output value stays within eps = 1, and the same audit sees
    the loss of two records added (about 2), so it has the power to catch a
    mechanism whose noise is too small for its stated budget."""
    n = 15000
    d = [(1,), (3,), (3,)]
    y0 = _released_first_total(d, [b"D%d" % k for k in range(n)])
    y1 = _released_first_total(d + [(0,)], [b"E%d" % k for k in range(n)])
    y2 = _released_first_total(d + [(0,), (0,)], [b"F%d" % k for k in range(n)])

    def loss(a, b):
        worst = 0.0
        for v in range(-10, 12):
            na, nb = int(np.sum(a == v)), int(np.sum(b == v))
            if min(na, nb) >= 400:   # log-ratio standard error <= sqrt(2/400) = 0.07
                worst = max(worst, abs(math.log(na / nb)) - 4 * math.sqrt(1 / na + 1 / nb))
        return worst

    assert loss(y0, y1) <= 1.0
    assert loss(y0, y2) > 1.0


def test_schema_bytes_are_canonical_msgpack():
    """The schema the frame carries (and the C core gets pre-encoded): keys
    sorted, bounds float64 even when the config wrote ints, values as given."""
    import msgpack

    from edgesynth.agent.marginals.release import schema_bytes

    want = {"columns": [{"name": "a", "values": ["x", "y"]}, {"bins": 4, "bounds": [0.0, 4.0], "name": "b"},
                        {"name": "c", "values": [0, 1.5, "z"]}]}
    got = schema_bytes(SCHEMA)
    assert got == msgpack.packb(want, use_bin_type=True)
    assert msgpack.unpackb(got)["columns"][1]["bounds"] == [0.0, 4.0] and b"\xcb" + bytes(8) in got


def _shared_column_configs():
    """A marginals config whose column "temp" a cdf config of the same device also reads, and one that does not."""
    from edgesynth.mechanisms.cdf.plan import plan_cdf
    from edgesynth.mechanisms.marginals.plan import plan_marginals
    from edgesynth.mechanisms.marginals.schema import Schema
    s = Schema.from_json({"columns": [{"name": "temp", "bounds": [0, 100], "bins": 4},
                                      {"name": "site", "values": ["A", "B"]}]})
    m = plan_marginals(s, Fraction(1, 2))
    return m, plan_cdf([0.0], [100.0], Fraction(1, 2), 16, names=["temp"]), \
        plan_cdf([0.0], [100.0], Fraction(1, 2), 16, names=["raw"])


def test_a_marginals_column_read_by_another_mechanism_is_refused():
    """A marginals column holds cell indices: a cdf reading the same channel
    would count cell numbers as temperatures. combine refuses (InputError),
    and the device refuses the same config assembled by hand (ConfigError);
    a cdf on another channel is accepted by both."""
    from edgesynth.agent import Agent
    from edgesynth.config import combine
    from edgesynth.errors import InputError
    m, shared, apart = _shared_column_configs()
    with pytest.raises(InputError, match="channel 'temp' is read by mechanism 0 \\(marginals\\) and mechanism 1"):
        combine([m, shared])
    by_hand = {"format": 1, "epsilon": [1, 1], "mechanisms": m["mechanisms"] + shared["mechanisms"]}
    for order in (by_hand["mechanisms"], by_hand["mechanisms"][::-1]):
        with pytest.raises(ConfigError, match="'temp': a marginals column, also read by"):
            Agent(dict(by_hand, mechanisms=order), seed=b"s")
    ok = combine([m, apart])
    a = Agent({k: v for k, v in ok.items() if k != "plan"}, seed=b"s")
    assert a.inputs == ["temp", "site", "raw"]


# values whose texts collide in every way the host's rule knows: 1 == 1.0 == "1",
# 1.5 == "1.5", 1e20 == "100000000000000000000"; and near misses ("1.0", "01", ".5", "1e20")
RULE_POOL = [1, 1.0, "1", "1.0", "01", -0.0, 0, "0", "-0", 1.5, "1.5", ".5", 0.5, "0.5", 1e20,
             "100000000000000000000", "1e20", 100000000000000000000.5, 2 ** 31 - 1, float(2 ** 31 - 1),
             "2147483647", -(2 ** 31), "-2147483648", 0.1, "0.1", "x", "nan", 7, "7",
             # floats whose MicroPython repr is not CPython's shortest text, with that text
             -731271.5117751976, "-731271.5117751976", 694867.4738744653, "694867.4738744653",
             # other spellings float() reads on both runtimes; a non-ASCII digit is no number
             "1e0", " 7", "7_0", 70, "\u0661"]


def _rule_cases():
    rng = np.random.default_rng(18)
    cases = [[v] + [w] for v in RULE_POOL for w in RULE_POOL]
    cases += [[RULE_POOL[j] for j in rng.choice(len(RULE_POOL), size=4, replace=False)] for _ in range(300)]
    return cases


def test_values_are_distinct_by_the_hosts_text_rule():
    """The device's distinctness check (numbers compared as numbers, no text
    built per value) refuses exactly the value lists the host's rule
    (schema.repeats) refuses."""
    from edgesynth.mechanisms.marginals.schema import repeats
    for vals in _rule_cases():
        sp = {"kind": "marginals", "schema": {"columns": [{"name": "a", "values": vals}]}, "cols": [[0]],
              "q": 1, "sigma": [1]}
        host_distinct = not repeats(vals)
        try:
            Marginals(sp)
            device_distinct = True
        except ConfigError as e:
            assert "values repeat" in str(e)
            device_distinct = False
        assert device_distinct == host_distinct, vals


def test_micropython_refuses_the_same_repeated_values():
    exe = micropython_exe()
    import json
    cases = _rule_cases()
    script = ("import json, sys\nfrom agent.errors import ConfigError\n"
              "from agent.marginals.build import _check_values\n"
              "for vals in json.loads(sys.stdin.read()):\n"
              "    try:\n        _check_values(vals, 'a')\n        print(1)\n"
              "    except ConfigError:\n        print(0)\n")
    env = dict(os.environ, MICROPYPATH=str(REPO) + ":.frozen")
    r = subprocess.run([exe, "-c", script], input=json.dumps(cases), cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    from edgesynth.mechanisms.marginals.schema import repeats
    # JSON has no -0.0 vs 0.0 distinction problem: both sides read the same JSON numbers
    want = [int(not repeats(vals)) for vals in json.loads(json.dumps(cases))]
    assert [int(x) for x in r.stdout.split()] == want


def test_micropython_refuses_a_bound_beyond_a_double_like_cpython():
    """float() of a huge int overflows on CPython and is inf on MicroPython:
    both refuse it with the same one-line ConfigError."""
    exe = micropython_exe()
    from edgesynth.agent.marginals.build import schema_shape
    script = ("from agent.errors import ConfigError\nfrom agent.marginals.build import schema_shape\n"
              "for b in ([0, 10 ** 400], [-(2 ** 1024), 0]):\n"
              "    try:\n        schema_shape({'columns': [{'name': 'a', 'bounds': b, 'bins': 3}]})\n"
              "    except ConfigError as e:\n        print(e)\n")
    env = dict(os.environ, MICROPYPATH=str(REPO) + ":.frozen")
    r = subprocess.run([exe, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    want = []
    for b in ([0, 10 ** 400], [-(2 ** 1024), 0]):
        with pytest.raises(ConfigError) as e:
            schema_shape({"columns": [{"name": "a", "bounds": b, "bins": 3}]})
        want.append(str(e.value))
    assert r.returncode == 0 and r.stdout.splitlines() == want, r.stderr
