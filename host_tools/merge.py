"""Merging verified releases of one configuration: de-duplicate resends, refuse conflicts, sum states.

Frames merge when their public configurations are identical. Each frame covers
its own device and epoch, so every event is in exactly one frame and the merged
state keeps the per-event epsilon (parallel composition); the noise variances
add and are recorded. Two *different* frames claiming the same (device, epoch)
would count one window twice with independent noise, so they are refused.
"""

from edgesynth.errors import MergeError


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


def merge_states(releases, kind):
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




def refuse_force_sum(force_sum, kind):
    """--force-sum sums profile sketches of the same ids; other kinds refuse it."""
    if force_sum:
        raise MergeError("--force-sum applies to profile sketches, not to %s states" % kind)
