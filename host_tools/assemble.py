"""From verified releases to a generator: de-duplicate, merge, grow.

Frames merge when their public configurations are identical. Each frame covers
its own device and epoch, so every event is in exactly one frame and the merged
state keeps the per-event epsilon (parallel composition); the noise variances
add and are recorded. Two *different* frames claiming the same (device, epoch)
would count one window twice with independent noise, so they are refused.
"""
import math
from fractions import Fraction

from host_tools.errors import MergeError
from host_tools.generator import Generator
from host_tools.growth import grow, leaf_count, privhp_host_need
from host_tools.plan import require_host_memory


def unique_releases(releases):
    """Drop byte-identical resends; refuse conflicting frames for one window."""
    seen, by_window, out = set(), {}, []
    for rel in releases:
        if rel.payload_digest in seen:
            continue
        seen.add(rel.payload_digest)
        window = (rel.device, rel.epoch)
        if window in by_window:
            raise MergeError("two different frames for device %r epoch %d (seq %d and %d); "
                             "a window may be released once" % (rel.device, rel.epoch,
                                                                by_window[window], rel.seq))
        by_window[window] = rel.seq
        out.append(rel)
    return out


def merge_states(releases, kind="privhp"):
    """Sum the ``kind`` states of all releases; returns (state, releases used)."""
    releases = unique_releases(releases)
    states = [m for rel in releases for m in rel.mechs if m.kind == kind]
    if not states:
        raise MergeError("no %s state in the given releases" % kind)
    if len(states) != len(releases):
        raise MergeError("a release holds several %s states; assemble cannot tell them apart" % kind)
    merged = states[0]
    for s in states[1:]:
        merged = merged.merged_with(s)
    return merged, releases


def assemble_privhp(releases):
    """Generator for the merged PrivHP state of ``releases``."""
    state, used = merge_states(releases, "privhp")
    require_host_memory(privhp_host_need(state.L, state.r, state.k, state.j, state.d),
                        "assembling a PrivHP state with r = %d, k = %d (%d leaves) over %d channel(s)"
                        % (state.r, state.k, leaf_count(state.L, state.r, state.k), state.d))
    eps = Fraction(used[0].eps[0], used[0].eps[1])
    mech_eps = Fraction(state.budget[0], state.budget[1])
    meta = {
        "mechanism": "privhp",
        "epsilon": str(eps),
        "mechanism_epsilon": str(mech_eps),
        "relation": used[0].relation,
        "privacy_unit": "one reading (event-level)",
        "devices": sorted({r.device for r in used}),
        "frames": len(used),
        "config_id": state.config_id(),
        "params": {"r": state.r, "k": state.k, "L": state.L, "w": state.w, "j": state.j,
                   "sketch": state.sketch},
        "noise_sd_root": math.sqrt(state.tree_var[0]),
        "noisy_clamped": state.clamp,
    }
    return Generator(state.names, state.lo, state.hi, grow(state), meta)
