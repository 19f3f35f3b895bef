"""Entropy health: broken platform sources stop the DRBG, so no noise, no agent, no frame."""
import itertools
import os

import pytest

import edgesynth.firmware_shims.drbg as drbg
import edgesynth.firmware_shims.entropy as entropy
from edgesynth import agent
from edgesynth.agent.ledger import Device, provision
from edgesynth.firmware_shims.drbg import EntropyError, HmacDrbg, platform_source
from edgesynth.firmware_shims.entropy import gather, health_check


def _cycle(pattern):
    it = itertools.cycle(pattern)
    return lambda n: bytes(next(it) for _ in range(n))


def _raises(exc):
    def src(n):
        raise exc
    return src


BROKEN = {
    "stuck at zero": lambda n: bytes(n),
    "stuck at 0xff": lambda n: b"\xff" * n,
    "three values": _cycle([1, 200, 3, 3, 200, 1, 1, 3]),
    "period 2": _cycle([0x5A, 0xA5]),
    "period 4": _cycle([1, 2, 3, 250]),
    "period 8": _cycle([9, 8, 7, 6, 5, 4, 3, 77]),
    "counter": _cycle(range(256)),
    "stride 37": _cycle([(37 * i) & 255 for i in range(256)]),
    "same block every call": (lambda first: lambda n: first[:n])(os.urandom(64)),
    "short reads": lambda n: os.urandom(n - 1),
    "returns None": lambda n: None,
    "raises OSError": _raises(OSError(5, "EIO")),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_sources_fail_closed(name):
    with pytest.raises(EntropyError):
        gather(BROKEN[name])
    with pytest.raises(EntropyError):
        platform_source(BROKEN[name])


def test_healthy_source_passes_and_blocks_differ():
    e1, n1 = gather()
    e2, n2 = gather()
    assert len(e1) == entropy.ENTROPY_BYTES and e1 != e2 and n1 != n2
    for _ in range(2000):       # false alarms on a good source: probability < 1e-14 each
        health_check(os.urandom(16))


def test_repeat_of_previous_block_is_caught():
    b = os.urandom(16)
    health_check(b)
    with pytest.raises(EntropyError, match="same block twice"):
        health_check(b, b)


def test_agent_and_device_refuse_to_exist_without_healthy_entropy(monkeypatch, make_config, tmp_path):
    monkeypatch.setattr(entropy, "_urandom", BROKEN["period 4"])
    with pytest.raises(EntropyError):
        agent.Agent(make_config())
    cfg = make_config()
    cfg["device"] = {"lifetime_epsilon": [5, 1]}
    state = tmp_path / "state.bin"
    provision(cfg, str(state), "gw", bytes(32))   # the genesis record: no window, no noise yet
    genesis = state.read_bytes()
    with pytest.raises(EntropyError):
        Device(cfg, str(state), "gw", bytes(32))
    assert state.read_bytes() == genesis          # nothing persisted, nothing to release
    monkeypatch.setattr(entropy, "_urandom", None)   # a port without os.urandom
    with pytest.raises(EntropyError, match="no entropy source"):
        agent.Agent(make_config())
    monkeypatch.setattr(entropy, "_urandom", os.urandom)
    assert len(agent.Agent(make_config()).release()) > 0


def test_drbg_refuses_short_seed_and_after_reseed_interval(monkeypatch):
    with pytest.raises(EntropyError):
        HmacDrbg(b"x" * 15)
    monkeypatch.setattr(drbg, "RESEED_INTERVAL", 3)
    g = HmacDrbg(os.urandom(32))
    outs = [g.generate(32) for _ in range(3)]
    assert len(set(outs)) == 3
    with pytest.raises(EntropyError, match="reseed"):
        g.generate(32)
