"""``edgesynth plan --mechanism profile``: the public parameters of a profile
sketch over dense ids [LO, HI) with per-id cap U, and what to expect of it."""
import math
import os

from agent.profile_build import MAX_CAP, MAX_ID, MAX_IDS, MAX_SAMPLE_BITS
from host_tools.errors import InputError
from host_tools.plan import device_config
from host_tools.profile_invert import truncation

DEFAULT_NAME = "id"


def parse_domain(text):
    """'LO:HI' -> (lo, hi): integer ids lo <= id < hi."""
    try:
        lo, hi = (int(x) for x in str(text).split(":"))
    except ValueError:
        raise InputError("--domain must look like LO:HI with integer ids, got %r" % text)
    if not 0 <= lo < hi <= MAX_ID + 1:
        raise InputError("--domain needs 0 <= LO < HI <= 2**29, got %r" % text)
    if hi - lo > MAX_IDS:
        raise InputError("--domain holds %d ids; a device holds at most %d counters" % (hi - lo, MAX_IDS))
    return lo, hi


def plan_profile(lo, hi, cap, eps, names=None, relation="add-remove", sample_bits=None, sample_seed=None):
    """Public device config (JSON-ready dict) for a profile sketch.

    With ``sample_bits`` B the ids are hashed ids from [0, 2**B) and [lo, hi)
    is the range of their keyed permutation that this device counts: a
    sample of (hi - lo) / 2**B of the universe (``sample_seed``: public,
    default random).
    """
    if not 1 <= cap <= MAX_CAP:
        raise InputError("--cap must be in [1, %d]" % MAX_CAP)
    names = names or [DEFAULT_NAME]
    if len(names) != 1:
        raise InputError("a profile reads one id column; %d names given" % len(names))
    d = hi - lo
    factor = 2 if relation == "replace" else 1
    alpha = math.exp(-float(eps) / factor)
    kappa = ((1 + alpha) / (1 - alpha)) ** 2
    mech = {"kind": "profile", "names": list(names), "lo": lo, "hi": hi, "cap": cap,
            "q": eps.denominator, "p": eps.numerator}
    if sample_bits is not None:
        if sample_bits % 2 or not 2 <= sample_bits <= MAX_SAMPLE_BITS or hi > 1 << sample_bits:
            raise InputError("--sample-bits must be even, 2..%d, with HI <= 2**bits" % MAX_SAMPLE_BITS)
        seed = sample_seed or os.urandom(8).hex()
        if not 0 < len(seed) <= 64:
            raise InputError("--sample-seed must have 1..64 characters")
        mech["sample"] = {"bits": sample_bits, "seed": seed}
    return device_config(eps, relation, mech, {
        "mechanism": "profile",
        "ids": d,
        "sample_fraction": d / 2 ** sample_bits if sample_bits else None,
        "counter_bytes": 4 * d,
        "kappa": kappa,
        "tau": truncation(d, alpha),
        "expected_error_scale_l2": kappa / math.sqrt(d),
        "note": "error ~ kappa/sqrt(d); size d from simulation, the worst-case bounds are 10-30x loose",
        "epsilon": str(eps),
    })
