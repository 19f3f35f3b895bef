"""Merging verified releases of one configuration: de-duplicate resends, refuse conflicts, sum states.

Frames merge when their public configurations are identical. Each frame covers
its own device and epoch, so every event is in exactly one frame and the merged
state keeps the per-event epsilon (parallel composition); the noise variances
add and are recorded. Two *different* frames claiming the same (device, epoch)
would count one window twice with independent noise, so they are refused.

The merge is a running fold (Merge, Merges): a release is added and can be
dropped, so memory holds one merged state per mechanism kind (a profile keeps
its sketches: each is unfolded on its own) and the sorted device ids, whatever
the number of frames. Partial merges of disjoint frames combine (``absorb``,
the Dask tree reduction) into the same bytes as one fold over all frames.

A continual mechanism's states (phdstream: ``stream`` set) are windows of a
stream, never summed: each is kept with its frame's device and epoch, and
the mechanism replays them in epoch order.

A kind whose State sets ``plans`` (marginals: windows planned from the model
of earlier ones) also combines releases of *different* configurations: one
summed state per configuration id, at most MAX_PLANS of them, returned in
config id order (the same whatever the frames' order); its generator fits
them together. Every other kind refuses a second configuration.
"""
from fractions import Fraction

import numpy as np

from edgesynth.errors import MergeError

FOLD_BLOCK = 4096  # copies added per numpy call in repeated_sum: 32 KiB per variance entry
MAX_PLANS = 64  # configurations of a plans kind kept side by side: memory is one summed state per plan


def repeated_sum(v, n):
    """``v + v + ... + v`` (``n`` >= 1 copies of a float64 array) added left
    to right, the order in which n single-frame merges add them; ``n * v``
    may differ in the last bit. Memory bounded by FOLD_BLOCK copies."""
    acc = np.array(v, dtype=np.float64)
    left = n - 1
    while left:
        k = min(left, FOLD_BLOCK)
        block = np.empty((k + 1,) + acc.shape)
        block[0] = acc
        block[1:] = v
        acc = np.add.accumulate(block, axis=0)[-1]  # accumulate adds strictly in order (no pairwise sum)
        left -= k
    return acc


class Merge:
    """The running merge of the ``kind`` states of releases of one configuration.

    ``state``: the summed state (kinds whose State has ``accumulate``), or for
    a profile ``states``, its sketches in arrival order, and for a stream kind
    (phdstream) ``states`` of (device, epoch, state), in arrival order. ``config``: their
    configuration id (computed once per release). A plans kind (State.plans:
    marginals) keeps instead ``plans``, {config id: the Merge of that
    configuration's states}. A fault (several states of the kind in one
    release, another configuration, too many plans) is kept in ``error`` and
    raised only if this kind is the one assembled (``result``).
    """

    def __init__(self, kind):
        self.kind = kind
        self.sums = None     # whether the states add up (State.accumulate), known from the first
        self.state, self.states, self.config, self.error = None, [], None, None
        self.plans = {}      # plans kind: config id -> Merge of that config
        # a plan's Merge: its first epoch and its frames per device (one frame
        # per device and epoch: memory grows with devices, not frames)
        self.first, self.per_device = None, {}
        self.count = 0       # releases that carried a state of this kind
        self._owned = False  # state's arrays are ours to add into (the first one is the caller's)

    def add(self, states, rel=None):
        """Fold in one release's states of this kind (a list: one expected);
        ``rel`` the Release they came from (a stream kind needs its device
        and epoch)."""
        if self.error is not None:
            return
        if len(states) != 1:
            self._fail("a release holds several %s states; assemble cannot tell them apart" % self.kind)
            return
        s = states[0]
        config = s.config_id()
        if getattr(s, "plans", False):
            part = self._plan(config)
            if part is not None:
                part.count += 1
                part._fold(s)
                if rel is not None:
                    part._window(rel.device, rel.epoch, 1)
                self.count += 1
            return
        if self.config is None:
            self.config = config
        elif config != self.config:
            self._fail("%s states of different public configurations cannot be combined (%s vs %s)"
                       % (self.kind, self.config, config))
            return
        if getattr(s, "stream", False):
            if rel is None:
                raise MergeError("%s windows are replayed in epoch order per device, never summed: "
                                 "fold them with their releases" % self.kind)
            self.count += 1
            self.sums = False
            self.states.append((rel.device, rel.epoch, s))
            return
        self.count += 1
        self._fold(s)

    def _fold(self, s):
        if self.sums is None:
            self.sums = hasattr(s, "accumulate")
        if not self.sums:
            self.states.append(s)
        elif self.state is None:
            self.state = s
        else:
            if not self._owned:
                self.state, self._owned = self.state.copy(), True
            self.state.accumulate(s)

    def _plan(self, config):
        """The Merge of configuration ``config`` (a new one for a new
        config), None after failing when MAX_PLANS are already kept."""
        part = self.plans.get(config)
        if part is None:
            if len(self.plans) >= MAX_PLANS:
                self._fail("%s frames of more than %d plans (configurations) cannot be assembled together; "
                           "assemble the windows of fewer plans" % (self.kind, MAX_PLANS))
                return None
            part = self.plans[config] = Merge(self.kind)
            part.config = config
        return part

    def _fail(self, message):
        self.error = MergeError(message)
        self.state, self.states, self.plans = None, [], {}

    def absorb(self, other):
        """Add the merge of other, disjoint releases (those after ours)."""
        if self.error is None and other.error is not None:
            self._fail(str(other.error))
        if self.error is not None or other.count == 0:
            return
        if other.plans:
            for config, theirs in sorted(other.plans.items()):
                part = self._plan(config)
                if part is None:
                    return
                part.absorb(theirs)  # copy on write: theirs is not changed
            self.count += other.count
            return
        if self.config is not None and other.config != self.config:
            self._fail("%s states of different public configurations cannot be combined (%s vs %s)"
                       % (self.kind, self.config, other.config))
            return
        self.config = other.config
        self.count += other.count
        for device, n in other.per_device.items():
            self._window(device, other.first, n)
        if other.sums:
            self._fold(other.state)
        else:
            self.sums = False
            self.states.extend(other.states)

    def _window(self, device, epoch, frames):
        """Count ``frames`` of ``device`` under this plan, from ``epoch`` on."""
        self.first = epoch if self.first is None else min(self.first, epoch)
        self.per_device[device] = self.per_device.get(device, 0) + frames

    def plan_windows(self):
        """A plans kind's (first epoch, windows) per plan, in config id order
        (as ``result``): when the plan's windows began and how many there
        were, the most frames one device released under it (each device
        numbers its own epochs, and a device releases one frame per window),
        from public frame headers; (None, 0) for states without releases."""
        return [(p.first, max(p.per_device.values())) if p.per_device else (None, 0)
                for p in (self.plans[c] for c in sorted(self.plans))]

    def result(self):
        """The summed state (or a profile's list of sketches, or a plans
        kind's summed states in config id order); MergeError if a fault was seen."""
        if self.error is not None:
            raise self.error
        if self.plans:
            return [self.plans[c].state for c in sorted(self.plans)]
        return self.state if self.sums else self.states


class Merges:
    """The running merge of every mechanism kind in a stream of releases.

    ``unique``: drop byte-identical resends and refuse two different frames
    for one (device, epoch) (frame files); a store already guarantees both,
    so its stream needs no per-frame memory. Records what a generator's
    metadata states: the largest ``eps`` of a release (each event is in one
    release: that is what any event spent), the first release's
    ``relation``, the ``frames`` merged and the sorted ``devices``.
    """

    def __init__(self, unique=True):
        self.by_kind = {}
        self.frames = 0
        self.eps = self.relation = None
        self.devices = []        # sorted while releases come in device order (a store's)
        self._sorted = True
        self._seen, self._windows = (set(), {}) if unique else (None, None)

    def add(self, rel):
        """Fold in one verified Release."""
        if self._seen is not None:
            digest = rel.payload_digest
            if digest in self._seen:
                return
            window = (rel.device, rel.epoch)
            if window in self._windows:
                raise MergeError("two different frames for device %r epoch %d (seq %d and %d); "
                                 "a window may be released once" % (rel.device, rel.epoch,
                                                                    self._windows[window], rel.seq))
            self._seen.add(digest)
            self._windows[window] = rel.seq
        if self.frames == 0:
            self.eps, self.relation = rel.eps, rel.relation
        self._eps(rel.eps)
        self.frames += 1
        self._device(rel.device)
        for kind in {m.kind for m in rel.mechs}:
            if kind not in self.by_kind:
                self.by_kind[kind] = Merge(kind)
            self.by_kind[kind].add([m for m in rel.mechs if m.kind == kind], rel)

    def _eps(self, eps):
        if Fraction(*eps) > Fraction(*self.eps):
            self.eps = eps

    def _device(self, device):
        if self.devices and device <= self.devices[-1]:
            if device == self.devices[-1]:
                return
            self._sorted = False
        self.devices.append(device)

    def absorb(self, other):
        """Add the merge of other releases, disjoint from ours and after them
        in store order (a partition of higher device ids)."""
        if other.frames == 0:
            return
        if self.frames == 0:
            self.eps, self.relation = other.eps, other.relation
        self._eps(other.eps)
        self.frames += other.frames
        for device in other.devices:
            self._device(device)
        self._sorted = self._sorted and other._sorted
        for kind, m in other.by_kind.items():
            if kind not in self.by_kind:
                self.by_kind[kind] = Merge(kind)
            self.by_kind[kind].absorb(m)

    def kinds(self):
        """Sorted mechanism kinds seen."""
        return sorted(self.by_kind)

    def sorted_devices(self):
        return self.devices if self._sorted else sorted(set(self.devices))

    def select(self, kind):
        """The Merge of ``kind`` once every release carried it (MergeError otherwise)."""
        m = self.by_kind.get(kind)
        if m is None:
            raise MergeError("no %s state in the given releases" % kind)
        m.result()
        if m.count != self.frames:
            raise MergeError("%d of %d releases carry no %s state; assemble one mechanism's releases"
                             % (self.frames - m.count, self.frames, kind))
        return m


def merge_releases(releases, kind):
    """(Merges, the summed ``kind`` state or a profile's sketch list) of ``releases``, de-duplicated."""
    merges = Merges()
    for rel in releases:
        merges.add(rel)
    return merges, merges.select(kind).result()


def refuse_force_sum(force_sum, kind):
    """--force-sum sums profile sketches of the same ids; other kinds refuse it."""
    if force_sum:
        raise MergeError("--force-sum applies to profile sketches, not to %s states" % kind)
