"""Shared fixtures: small PrivHP configs built with the real planner budget code."""
import os
import sys
from fractions import Fraction

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from edgesynth import agent  # noqa: E402
from edgesynth.budget import privhp_budget  # noqa: E402
from edgesynth.fleet.keys import load, new_key  # noqa: E402


def privhp_config(d=2, r=12, k=16, w=64, j=1, sketch="cms", eps=Fraction(1), lo=None, hi=None,
                  clamp_share=Fraction(1, 50), relation="add-remove", hash_seed="test-seed"):
    """A device config with an exact budget split, for tests."""
    lo = lo if lo is not None else [0.0] * d
    hi = hi if hi is not None else [1.0] * d
    q, sigma, clamp_p = privhp_budget(eps, d, k, r, j, clamp_share)
    return {"format": 1, "epsilon": [eps.numerator, eps.denominator], "relation": relation,
            "mechanisms": [{"kind": "privhp", "names": ["x%d" % i for i in range(d)], "lo": lo, "hi": hi,
                            "r": r, "k": k, "w": w, "j": j, "sketch": sketch, "hash_seed": hash_seed,
                            "q": q, "sigma": sigma, "clamp_p": clamp_p}]}


@pytest.fixture
def make_config():
    return privhp_config


@pytest.fixture
def env(tmp_path, make_config):
    """(tmp dir, keyring path, keyring, frame(dev, epoch, seq, ...) -> tagged frame bytes)
    for devices "a" and "b": the store and ingest tests' world."""
    ring = str(tmp_path / "ring.json")
    for dev in ("a", "b"):
        new_key(ring, dev)
    keys = load(ring)
    cfg = make_config(d=1, r=4, k=16, w=4, j=1)

    def frame(dev, epoch, seq, seed=b"s", n=10, cfg=cfg):
        a = agent.Agent(cfg, seed=b"%s-%d-%d-%s" % (dev.encode(), epoch, seq, seed), device_id=dev,
                        epoch=epoch, seq=seq, key=keys.require(dev))
        for i in range(n):
            a.update((i / n,))
        return bytes(a.release())

    return tmp_path, ring, keys, frame
