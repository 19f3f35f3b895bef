"""Device-agent rules that the privacy argument relies on (docs/privacy.md)."""
from fractions import Fraction

import pytest

from edgesynth import agent
from edgesynth.agent.errors import ConfigError, SealedError
from edgesynth.firmware_shims.drbg import seeded_source
from edgesynth.mechanisms.privhp.plan import choose_depth


def test_sealing_cannot_be_bypassed(make_config):
    a = agent.Agent(make_config(), seed=b"seal-bypass-0000")
    up, mech_up = a.update, a.mechs[0].update   # bound before the release
    up((0.2, 0.3))
    frame = a.release()
    for f in (up, mech_up, a.update):
        with pytest.raises(SealedError):
            f((0.5, 0.5))
    assert a.release() == frame


def test_no_trace_of_the_last_reading_in_memory(make_config):
    a = agent.Agent(make_config(d=2, lo=[0, 0], hi=[1000, 1000]), seed=b"at-rest-00000000")
    a.update((987, 123))
    assert all(v == 0 for v in a.mechs[0].rem)


def test_noise_scale_is_capped(make_config):
    cfg = make_config(eps=Fraction(1, 10 ** 6), r=20)
    with pytest.raises(ConfigError, match="noise scale"):
        agent.Agent(cfg, seed=b"tiny-epsilon-000")


def test_short_seeds_do_not_collide():
    a, b = seeded_source(b"ab"), seeded_source(b"ab\x00")
    assert [a.below(256) for _ in range(8)] != [b.below(256) for _ in range(8)]


# (4096, 4.0): real-valued, no cap: the depth rule round(log2(1e9) - 2 - log2 2) = 27
@pytest.mark.parametrize("spans,r_want", [((4096, 4), 23), ((4, 4096), 24), ((1 << 20,), 20), ((4096, 4.0), 27)])
def test_depth_stops_where_every_integer_channel_reaches_one_unit(spans, r_want):
    """All-integer channels: the shallowest depth at which each is split to
    single units, so the widest is never split below one; a narrow channel
    does not cap the others, and a real-valued one lifts the cap."""
    d = len(spans)
    r = choose_depth(d, Fraction(1), 10 ** 9, [0 if isinstance(s, int) else 0.0 for s in spans], list(spans))
    assert r == r_want

    def bits(depth, i):
        return (depth - 1 - i) // d + 1 if depth > i else 0
    if all(isinstance(s, int) for s in spans):
        assert all(2 ** bits(r, i) >= s for i, s in enumerate(spans))
        assert any(2 ** bits(r - 1, i) < s for i, s in enumerate(spans))


def test_config_errors_name_the_field(make_config):
    cfg = make_config()
    cfg["mechanisms"][0]["w"] = 100
    with pytest.raises(ConfigError, match="w must be a power of two"):
        agent.Agent(cfg, seed=b"x" * 16)
    cfg = make_config()
    cfg["mechanisms"][0]["lo"] = [0.0, float("nan")]
    with pytest.raises(ConfigError, match="finite"):
        agent.Agent(cfg, seed=b"x" * 16)
    cfg = make_config()
    cfg["mechanisms"][0]["skecth"] = "cs"          # a misspelt optional key is not ignored
    with pytest.raises(ConfigError, match="no field 'skecth'"):
        agent.Agent(cfg, seed=b"x" * 16)


def test_agent_update_block_matches_per_reading_updates(make_config):
    cfg = make_config(d=2, lo=[0, 0], hi=[1023, 1023], j=2)
    cols = ([(37 * t) % 1024 for t in range(3000)], [(11 * t * t) % 1100 for t in range(3000)])
    a = agent.Agent(cfg, seed=b"block-vs-update0")
    b = agent.Agent(cfg, seed=b"block-vs-update0")
    for x in zip(*cols):
        a.update(x)
    assert b.update_block(cols) == 3000
    assert a.release() == b.release()
