"""The privacy budget split is exact: sum(sigma) + clamp = epsilon * q as integers."""
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgesynth import agent
from edgesynth.agent.errors import ConfigError
from edgesynth.budget import level_weights, parse_epsilon, privhp_budget
from edgesynth.errors import InputError


@settings(max_examples=200, deadline=None)
@given(num=st.integers(1, 10 ** 6), den=st.integers(1, 10 ** 6), d=st.integers(1, 4),
       kb=st.integers(0, 12), r=st.integers(4, 29), j=st.integers(1, 5),
       share=st.sampled_from([Fraction(0), Fraction(1, 50), Fraction(1, 3)]),
       uniform=st.booleans())
def test_split_adds_up_to_epsilon_exactly(num, den, d, kb, r, j, share, uniform):
    eps = Fraction(num, den)
    if eps > 100:
        return
    q, sigma, clamp_p = privhp_budget(eps, d, 1 << kb, r, j, share, uniform)
    assert len(sigma) == r + 1 and all(s >= 1 for s in sigma)
    assert Fraction(sum(sigma) + clamp_p, q) == eps


def test_matches_eq23_worked_example():
    # the PrivHP paper's Eq. (23) worked out: d=2, k=64, r=16, eps=1, j=1 -> Q = 2**20 and these shares
    q, sigma, clamp_p = privhp_budget(Fraction(1), 2, 64, 16, 1, Fraction(0))
    expected = [38052, 38052, 53813, 53813, 76104, 76104, 107627, 107627, 107627, 76104, 76104,
                53813, 53813, 38052, 38052, 26906, 26906]
    assert q == 1 << 20 and clamp_p == 0
    assert all(abs(a - b) <= 1 for a, b in zip(sigma, expected))
    w = level_weights(2, 64, 16)
    assert w[0] == 1.0 and w[7] == pytest.approx(8 ** 0.5)


def test_agent_rejects_a_split_that_does_not_add_up(make_config):
    cfg = make_config()
    cfg["mechanisms"][0]["sigma"][3] += 1
    with pytest.raises(ConfigError, match="add up"):
        agent.Agent(cfg, seed=b"s" * 16)


@pytest.mark.parametrize("text,value", [("1", Fraction(1)), ("0.5", Fraction(1, 2)), ("1/3", Fraction(1, 3)),
                                        ("1e-1", Fraction(1, 10))])
def test_parse_epsilon(text, value):
    assert parse_epsilon(text) == value


@pytest.mark.parametrize("text", ["0", "-1", "abc", "1/0", "1000", "0.0000001"])
def test_parse_epsilon_rejects(text):
    with pytest.raises(InputError):
        parse_epsilon(text)
