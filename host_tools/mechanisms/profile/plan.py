"""``edgesynth plan --mechanism profile``: the public parameters of a profile
sketch over dense ids [LO, HI) with per-id cap U, and what to expect of it.

With a RAM budget the device needs hi - lo int32 counters plus the runtime's
charge (ram.heap_need). Dense ids fix the counters, so a domain that
does not fit is refused. Hashed ids (``sample_bits``) count a sampled range
[lo, hi) of their permutation; when it is not given, the planner takes
[0, n) with the largest n that fits (largest_sample): more counters sample
more of the universe and lower the error (~ kappa / sqrt(n)).
"""
import math
import os

from edgesynth.agent.profile.build import MAX_CAP, MAX_ID, MAX_IDS, MAX_SAMPLE_BITS
from edgesynth.config import device_config
from edgesynth.errors import InputError
from edgesynth.mechanisms.profile.invert import inversion_need, profile_what, truncation
from edgesynth.ram import heap_need, ram_notes, require_fit, require_host_memory

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


def plan_profile(lo, hi, cap, eps, names=None, relation="add-remove", sample_bits=None, sample_seed=None,
                 ram=None, runtime="micropython"):
    """Public device config (JSON-ready dict) for a profile sketch.

    With ``sample_bits`` B the ids are hashed ids from [0, 2**B) and [lo, hi)
    is the range of their keyed permutation that this device counts: a
    sample of (hi - lo) / 2**B of the universe (``sample_seed``: public,
    default random). ``ram`` (bytes, optional): refuse a state that does not
    fit on the ``runtime``; with ``sample_bits`` and ``lo``, ``hi`` None,
    count [0, n) with the largest n that fits.
    """
    if not 1 <= cap <= MAX_CAP:
        raise InputError("--cap must be in [1, %d]" % MAX_CAP)
    names = names or [DEFAULT_NAME]
    if len(names) != 1:
        raise InputError("a profile reads one id column; %d names given" % len(names))
    if sample_bits is not None and (sample_bits % 2 or not 2 <= sample_bits <= MAX_SAMPLE_BITS):
        raise InputError("--sample-bits must be even, 2..%d" % MAX_SAMPLE_BITS)
    if lo is None:
        if sample_bits is None or ram is None:
            raise InputError("--mechanism profile needs --domain (or --sample-bits with --ram to choose it)")
        lo, hi = 0, largest_sample(sample_bits, ram, runtime)
    if sample_bits is not None and hi > 1 << sample_bits:
        raise InputError("--domain HI (%d) must be at most 2**--sample-bits (%d)" % (hi, 1 << sample_bits))
    d = hi - lo
    need = heap_need(4 * d, runtime, "profile")
    require_fit(ram, need, 4 * d, runtime, "a profile over %d ids" % d)
    factor = 2 if relation == "replace" else 1
    alpha = math.exp(-float(eps) / factor)
    require_host_memory(inversion_need(d, alpha, cap), "assembling " + profile_what(d, cap, eps, alpha))
    kappa = ((1 + alpha) / (1 - alpha)) ** 2
    mech = {"kind": "profile", "names": list(names), "lo": lo, "hi": hi, "cap": cap,
            "q": eps.denominator, "p": eps.numerator}
    if sample_bits is not None:
        seed = sample_seed or os.urandom(8).hex()
        if not 0 < len(seed) <= 64:
            raise InputError("--hash-seed (the sample's seed) must have 1..64 characters")
        mech["sample"] = {"bits": sample_bits, "seed": seed}
    return device_config(eps, relation, mech, {
        "mechanism": "profile",
        "ids": d,
        "sample_fraction": d / 2 ** sample_bits if sample_bits else None,
        **ram_notes(ram, 4 * d, need, runtime),
        "kappa": kappa,
        "tau": truncation(d, alpha),
        "expected_error_scale_l2": kappa / math.sqrt(d),
        "note": "error ~ kappa/sqrt(d); size d from simulation, the worst-case bounds are 10-30x loose",
        "epsilon": str(eps),
    })


def largest_sample(sample_bits, ram, runtime):
    """Largest n in [1, min(2**sample_bits, MAX_IDS)] whose n counters fit
    ``ram`` bytes on ``runtime`` (bisection: the need grows with n). Raises
    InputError when one counter does not fit."""
    lo, hi = 0, min(1 << sample_bits, MAX_IDS)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if heap_need(4 * mid, runtime, "profile") <= ram:
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:
        raise InputError("a %d-byte budget cannot hold one profile counter on the %s runtime: it needs %d bytes"
                         % (ram, runtime, heap_need(4, runtime, "profile")))
    return lo
