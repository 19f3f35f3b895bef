"""Assembling the frames of an ingest store, streamed: on this process or on Dask.

The store yields its frames one at a time in (device, epoch) order
(Store.frames); each is decoded again (the database is only as trusted as its
disk) and folded into a running merge (edgesynth.merge.Merges), then dropped:
memory holds one merged state and the device ids, whatever the number of
frames (but a profile's merge keeps every frame's sketch: they concatenate).
The store already keeps one frame per (device, epoch) and never
returns conflicts, so no per-frame de-duplication is needed.

With ``workers`` (a local Dask cluster of that many processes) or ``cluster``
(the address of a running dask.distributed scheduler) the store is cut into
device ranges of about equal frame counts (Store.device_ranges); each Dask
task opens the store itself from its path or URL, streams its range into a
partial merge, and adjacent partial merges are combined pairwise (a tree
reduction) in device order, which gives the bytes of the single-process fold
(integer counters add exactly; noise variances are re-summed frame by frame,
merge.repeated_sum). Dask moves the partial merges between processes with its
own serialization (pickle, numpy buffers without copies): the workers run
edgesynth's code, so they are as trusted as this process.

A selection of several configurations is refused, except marginals windows
of several plans (a kind whose State sets ``plans``, edgesynth.merge): when
the first stored frame of every configuration carries such a kind, each
configuration's frames are merged on their own (locally or as Dask parts)
and combined into one Merges, as a fold over the same frame files would.
"""
import logging
import os

from edgesynth.errors import EdgesynthError, FrameError, InputError, StoreError
from edgesynth.fleet.backends import connect
from edgesynth.fleet.pgstore import is_url
from edgesynth.frames import parse_frame
from edgesynth.mechanisms import build
from edgesynth.merge import MAX_PLANS, Merges

PARTS_PER_WORKER = 2  # device ranges per worker thread: a slow range does not hold the others idle
CLUSTER_TIMEOUT_S = 30


def merge_frames(store, devices=None, config_id=None, device_range=None, exclude=frozenset()):
    """The running merge (Merges) of an open store's selected frames, streamed,
    leaving out the frames of the devices in ``exclude`` (ids; the store does
    not even read them). A stored frame that does not decode is a StoreError
    naming the store and where the frame is (the store holds only frames that
    decoded when stored)."""
    merges = Merges(unique=False)
    rel = None
    for i, raw in enumerate(store.frames(devices, config_id, device_range, exclude)):
        try:
            rel = parse_frame(raw)[0]
        except FrameError as e:
            # the frame's own device id is in the bytes that failed: say where it is instead
            where = ("after device %r epoch %d" % (rel.device, rel.epoch) if rel is not None else
                     "the first" + (" from device %r" % device_range[0] if device_range and device_range[0]
                                    else ""))
            raise StoreError("%s: stored frame %d of the selection (%s, in device order): %s (the store is "
                             "damaged)" % (store.path, i + 1, where, e)) from e
        merges.add(rel)
    return merges


def assemble_store(store, devices=None, config_id=None, mechanism=None, force_sum=False, workers=None,
                   cluster=None, exclude=()):
    """The generator model (edgesynth.mechanisms) of the frames of ``store``
    (an open store, or a path or URL that edgesynth.fleet.backends.connect opens)
    of ``devices`` (ids) and ``config_id``; the selected frames must have one
    configuration, or be marginals windows of up to MAX_PLANS plans
    (selected_configs). ``workers`` (1..1024) or ``cluster`` ("tcp://host:port"):
    merge on Dask (module docstring); the result is the same. The frames of
    the devices in ``exclude`` (ids, e.g. those revoked in a keyring) are left
    out before anything else: they are never read, and their configurations
    do not count (a revoked device's frames of another configuration do not
    make the selection ambiguous). Returns (model, number of frames of the
    selection, in any configuration unless ``config_id`` is given, left out)."""
    if workers is not None and cluster is not None:
        raise InputError("give --workers (a local Dask cluster) or --cluster (a running one), not both")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or
                                not 1 <= workers <= 1024):
        raise InputError("workers must be an integer in [1, 1024], got %r" % (workers,))
    devices = list(devices) if devices else None
    exclude = frozenset(exclude).intersection(devices) if devices else frozenset(exclude)
    own = not hasattr(store, "frames")
    st = connect(os.fspath(store)) if own else store
    try:
        left_out = st.count(sorted(exclude), config_id) if exclude else 0
        if left_out and not st.config_ids(devices, exclude=exclude):
            raise InputError("%s: every selected stored frame (%d) is of a device revoked in the keyring"
                             % (st.path, left_out))
        config_ids = selected_configs(st, devices, config_id, mechanism, exclude)
        if workers is None and cluster is None:
            merges = Merges(unique=False)
            for cid in config_ids:  # each plan's frames on their own: disjoint, so absorb is the fold
                merges.absorb(merge_frames(st, devices, cid, exclude=exclude))
        else:
            merges = _dask_merge(st, devices, config_ids, workers, cluster, exclude)
    finally:
        if own:
            st.close()
    return build(merges, mechanism, force_sum), left_out


def selected_configs(st, devices, config_id, mechanism, exclude):
    """The configuration ids to merge (sorted): the selection's one
    configuration (Store.single_config), or several when the first stored
    frame of each carries a plans kind (marginals) they share, ``mechanism``
    if given; at most MAX_PLANS of them (InputError beyond). Decodes at most
    MAX_PLANS + 1 frames, one per configuration; any other selection of
    several configurations keeps single_config's refusal."""
    ids = st.config_ids(devices, exclude=exclude)
    if config_id or len(ids) < 2:
        return [st.single_config(devices, config_id, exclude=exclude)]
    shared = None
    for cid in ids[:MAX_PLANS + 1]:
        frames = st.frames(devices, cid, exclude=exclude)
        try:
            raw = next(frames)
        finally:
            frames.close()
        try:
            mechs = parse_frame(raw)[0].mechs
        except FrameError as e:
            raise StoreError("%s: the first stored frame of configuration %s: %s (the store is damaged)"
                             % (st.path, cid, e)) from e
        kinds = {m.kind for m in mechs if getattr(m, "plans", False) and mechanism in (None, m.kind)}
        shared = kinds if shared is None else shared & kinds
        if not shared:
            return [st.single_config(devices, exclude=exclude)]  # raises: several configurations
    if len(ids) > MAX_PLANS:
        raise InputError("%s: the selected frames have %d configurations; %s windows of at most %d plans "
                         "assemble together: choose fewer devices or one with --config-hash"
                         % (st.path, len(ids), ", ".join(sorted(shared)), MAX_PLANS))
    return ids


def _target(st):
    """What a Dask task opens: the store's URL as given (``target``: a
    PostgreSQL store's ``path`` hides the password), or its path made
    absolute (a local cluster's processes share this host's files)."""
    target = getattr(st, "target", st.path)
    return target if is_url(target) else os.path.abspath(target)


def _merge_part(target, devices, config_id, device_range, exclude):
    """A Dask task: open the store and merge one device range of it."""
    with connect(target) as st:
        return merge_frames(st, devices, config_id, device_range, exclude)


def _combine(left, right):
    """A Dask task: the merge of two adjacent ranges (``left``'s devices
    first), a new Merges: Dask may hand the same inputs to a retried task."""
    merged = Merges(unique=False)
    merged.absorb(left)  # Merge folds copy on write: neither input is changed
    merged.absorb(right)
    return merged


def _dask_merge(st, devices, config_ids, workers, cluster, exclude):
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise InputError("--workers and --cluster run the merge on Dask, which is not installed: "
                         "pip install 'edgesynth[cluster]'")
    local = None
    try:
        if cluster is None:
            # the scheduler's HTTP server on a free local port: a fixed one collides with any other cluster
            # and worker logs silenced below CRITICAL: a task's error is reported once, as one line, below
            local = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                 dashboard_address="127.0.0.1:0", silence_logs=logging.CRITICAL)
            client = Client(local)
        else:
            client = Client(cluster, timeout=CLUSTER_TIMEOUT_S)
    except (OSError, TimeoutError, ValueError) as e:
        if local is not None:
            local.close()
        raise InputError("cannot reach the Dask scheduler %s (%s)" % (cluster or "", e))
    try:
        threads = max(1, sum(client.nthreads().values()))
        target = _target(st)
        # each configuration's own device ranges, one after the other: plans are merged apart anyway
        parts = [client.submit(_merge_part, target, devices, cid, r, exclude, pure=False)
                 for cid in config_ids for r in st.device_ranges(PARTS_PER_WORKER * threads, cid, exclude)]
        while len(parts) > 1:  # pairwise, adjacent: device order is kept
            paired = [client.submit(_combine, a, b, pure=False) for a, b in zip(parts[::2], parts[1::2])]
            parts = paired + parts[len(paired) * 2:]
        try:
            return parts[0].result()
        except EdgesynthError:
            raise  # a task's own error (a damaged store, a bad selection) as raised
        except Exception as e:  # KilledWorker, CancelledError, a worker without edgesynth...
            raise InputError("the Dask merge failed: %s: %s" % (type(e).__name__, " ".join(str(e).split()))) from e
    finally:
        client.close()
        if local is not None:
            local.close()
