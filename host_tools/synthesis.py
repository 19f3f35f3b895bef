"""From release frames to synthetic data: read and verify frames, assemble a
generator, save and load it, sample rows (``edgesynth assemble``, ``sample``,
``inspect``; docs/api.md).
"""
import os

import numpy as np

from edgesynth.data.tables import to_frame
from edgesynth.data.writers import write_table
from edgesynth.describe import describe
from edgesynth.errors import FrameError, InputError
from edgesynth.filekind import check as check_kind
from edgesynth.fleet.assembly import assemble_store
from edgesynth.fleet.keys import Keyring
from edgesynth.fleet.keys import load as load_keyring
from edgesynth.frames import Release, iter_frames, stream_frames
from edgesynth.mechanisms import REGISTRY, load_generator
from edgesynth.mechanisms import assemble as assemble_any
from edgesynth.mechanisms.marginals.table import write_tables
from edgesynth.outputs import write_bytes
from edgesynth.simulation import device_key
from edgesynth.stdio import STDIN, is_stdio, read_input, read_once
from edgesynth.stdio import label as path_label

SAMPLE_BLOCK = 1 << 20  # rows drawn per call: bounds memory for any n; the CLI writes block by block
MAX_SAMPLE = 10 ** 9    # rows one sample may ask for


def frame_keys(key=None, keyring=None):
    """``(key_for, require_tag)`` for reading frames: one key (bytes or hex)
    for every frame, or each frame's key looked up in ``keyring`` (a path or
    Keyring) by its envelope's device id; (None, False) without either."""
    if key is not None and keyring is not None:
        raise InputError("pass --key or --keyring, not both")
    if keyring is not None:
        ring = keyring if isinstance(keyring, Keyring) else load_keyring(keyring)
        return ring.key_for, True
    if key is not None:
        k = device_key(key, None, None)
        return (lambda device: k), True
    return None, False


def _bytes_frames(buf, label, key_for, require_tag):
    n = 0
    try:
        for rel in iter_frames(bytes(buf), key_for, require_tag):
            n += 1
            yield rel
    except FrameError as e:
        raise type(e)("%sframe %d: %s" % (label, n, e))
    if not n:
        raise FrameError("%sno frame in an empty byte string" % label)


def read_frames(source, key=None, keyring=None):
    """Every release in ``source``, verified and decoded, as a list of Release.

    source: a frame file's path ("-": stdin, at most once), bytes holding
        one or several frames back to back, a Release, or a list of these.
    key: HMAC key (bytes or hex) every frame must be tagged with; keyring (a
        path or es.load_keyring(...)): each frame must verify under its
        device's key. Without either, tags are not checked.

    Raises a FrameError subclass naming the file (or list item) and frame,
    or InputError naming the kind of a file that holds no frames (a
    generator, a device config, ...) and the command that takes it.
    """
    return list(stream_releases(source, key, keyring))


def stream_releases(source, key=None, keyring=None):
    """read_frames one release at a time: a file is read frame by frame, so
    assembling holds one frame, not the list."""
    key_for, require_tag = frame_keys(key, keyring)
    items = source if isinstance(source, (list, tuple)) else [source]
    read_once(items)
    for i, item in enumerate(items):
        label = "" if items is not source else "frames[%d]: " % i
        if isinstance(item, Release):
            yield item
        elif isinstance(item, (bytes, bytearray, memoryview)):
            yield from _bytes_frames(item, label, key_for, require_tag)
        elif is_stdio(item):
            data = read_input(item, "frames")  # read whole: a wrong kind of file is then named from its bytes
            try:
                yield from _bytes_frames(data, STDIN + ": ", key_for, require_tag)
            except FrameError:
                check_kind(item, "frames", data)
                raise
        elif isinstance(item, (str, os.PathLike)):
            try:
                yield from stream_frames(os.fspath(item), key_for=key_for, require_tag=require_tag)
            except FrameError:
                check_kind(os.fspath(item), "frames")  # another edgesynth file: say which and what takes it
                raise
        else:
            raise InputError("%sa frame source is a path, bytes or a Release, got %s" % (label, type(item).__name__))


class Generator:
    """A generator of synthetic rows assembled from released frames.

    Sampling is post-processing: any number of rows costs no further
    privacy. ``kind`` is the mechanism ("privhp", "cdf", "profile",
    "phdstream", "marginals"; a marginals generator is ``tabular``: its rows
    are tables with its schema's values, see tables),
    ``names`` the column names of its rows, ``model`` the mechanism's own
    object (with the array sampler ``model.sample(n, rng)``). A profile's
    rows are per-id counts drawn from the estimated profile (one column,
    "count"), not readings. A phdstream generator is a stream: one
    synthetic snapshot per step (``steps``), sampled one step at a time
    (``step=K``; ``n`` defaults to the step's released population) or all
    steps at once (sample_steps, write_steps).
    """

    def __init__(self, model, revoked_left_out=None):
        self.model = model
        self.revoked_left_out = revoked_left_out  # es.assemble(store=..., keyring=...): frames left out
        self.kind = next((k for k, m in REGISTRY.items() if isinstance(model, m.Generator)), None)
        if self.kind is None:
            raise InputError("not a generator of a known mechanism: %s" % type(model).__name__)

    @property
    def names(self):
        return list(self.model.names)

    @property
    def integer(self):
        """One bool per column: True where the values are whole numbers (the
        channels the plan declared integer, as the frames state them, and a
        profile's counts)."""
        return list(self.model.integer)

    def __repr__(self):
        return "<edgesynth.Generator %s over %s>" % (self.kind, ", ".join(self.names))

    def summary(self):
        """JSON-ready description (what `edgesynth assemble --json` prints);
        after es.assemble(store=..., keyring=...), ``revoked_frames_left_out``
        counts the stored frames of devices revoked in the keyring."""
        summary = self.model.summary()
        if self.revoked_left_out is not None:
            summary = {**summary, "revoked_frames_left_out": self.revoked_left_out}
        return summary

    def to_bytes(self):
        """The generator file's bytes (msgpack)."""
        return self.model.to_bytes()

    @classmethod
    def from_bytes(cls, data, source="generator"):
        """The generator saved in ``data`` (bytes), whatever its kind."""
        return cls(load_generator(bytes(data), source))

    def save(self, path):
        """Write the generator file to ``path`` (replaced atomically), or to
        stdout for "-" (not a terminal); es.load reads it."""
        write_bytes(os.fspath(path), self.to_bytes(), what="a generator")

    @property
    def steps(self):
        """The step numbers a stream generator (phdstream) holds, sorted;
        None for the other kinds."""
        return list(self.model.steps) if hasattr(self.model, "steps") else None

    def population(self, step):
        """A stream generator's released population at ``step``: the sum of
        ceil(G) over the step's positive leaves, summed over the devices'
        streams (the default number of rows of that step). InputError for
        a generator of another kind."""
        step = self._step(step)
        if step is None:
            raise InputError("a population is a stream generator's (phdstream), not a %s one's" % self.kind)
        return self.model.population(step)

    def populations(self):
        """A stream generator's {step: released population} for every step;
        None for the other kinds."""
        return self.model.populations() if self.steps is not None else None

    def _step(self, step):
        """``step`` checked against the kind: required by a stream generator
        (an int; the model refuses one it does not hold), refused by the others."""
        steps = self.steps
        if steps is None:
            if step is not None:
                raise InputError("a step applies to a stream generator (phdstream), not to a %s one" % self.kind)
            return None
        if step is None:
            raise InputError("a phdstream generator samples one step at a time: give the step (--step K) or "
                             "sample every step (--all-steps)")
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)):
            raise InputError("a step is an integer, got %r" % (step,))
        return int(step)  # one the model holds: it says which it holds otherwise

    def blocks(self, n, seed=None, step=None):
        """``n`` rows (0..10**9) as float64 arrays of at most 2**20 rows each,
        drawn in order from ``numpy.random.default_rng(seed)`` (seed: None, an
        int >= 0 or a numpy Generator). The same seed gives the same rows.
        A stream generator draws the snapshot of ``step`` (required), and
        ``n`` None means its released population; a marginals generator's
        rows are int64 cell indices, ``n`` None its estimated number of
        records. A bad ``n``, ``seed`` or
        ``step`` is refused here, before anything is drawn or any output file
        opened."""
        step = self._step(step)
        if step is None:
            n = self._rows(n)
        if not (n is None and step is not None) and (
                isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 0 <= n <= MAX_SAMPLE):
            raise InputError("the number of rows must be an integer in [0, %d], got %r" % (MAX_SAMPLE, n))
        rng = _rng(seed)
        if step is not None:
            return self.model.blocks(None if n is None else int(n), rng, step)
        return self._draw(int(n), rng)

    def _rows(self, n):
        """``n``, or a table generator's (marginals) estimated number of records for None."""
        if n is None and self.tabular:
            est = self.model.default_rows()
            if est > MAX_SAMPLE:  # said here: "rows must be in [0, 10**9]" would name an n nobody passed
                raise InputError("the generator estimates %d records, more than the %d one sample draws; "
                                 "pass the number of rows (-n)" % (est, MAX_SAMPLE))
            return est
        return n

    @property
    def tabular(self):
        """True for a generator of tables over a public schema (marginals):
        its rows hold the schema's values (text, integers, numbers; "other"
        missing), not float readings."""
        return hasattr(self.model, "table")

    def tables(self, n=None, seed=None):
        """A table generator's ``n`` records (None: its estimated number) as
        pandas DataFrames of at most 2**20 rows, drawn in order from
        ``numpy.random.default_rng(seed)``: the blocks ``sample`` and ``write``
        give for the same seed."""
        if not self.tabular:
            raise InputError("tables of schema values come from a marginals generator, not a %s one" % self.kind)
        n = self._rows(n)
        self.blocks(n, seed)  # checks n and seed before anything is drawn
        rng = _rng(seed)
        return (self.model.table(min(SAMPLE_BLOCK, n - start), rng) for start in range(0, n, SAMPLE_BLOCK))

    def _draw(self, n, rng):
        for start in range(0, n, SAMPLE_BLOCK):
            yield self.model.sample(min(SAMPLE_BLOCK, n - start), rng)

    def sample_array(self, n=None, seed=None, step=None):
        """``n`` synthetic rows as a float64 array of shape (n, len(names))
        (a stream generator: of ``step``; see blocks)."""
        parts = list(self.blocks(n, seed, step))
        return np.concatenate(parts) if parts else np.empty((0, len(self.names)))

    def sample(self, n=None, seed=None, step=None):
        """``n`` synthetic rows as a pandas DataFrame with columns ``names``
        (the rows `edgesynth sample -n N --seed S` writes, to the last bit);
        integer columns (``integer``) as int64. A stream generator samples
        ``step`` (`sample --step K`), ``n`` None: its released population.
        A marginals generator's rows hold the schema's values ("other" is a
        missing value), ``n`` None: its estimate of the number of records."""
        if self.tabular:
            import pandas  # a marginals table's blocks are DataFrames already

            parts = list(self.tables(n, seed))
            return pandas.concat(parts, ignore_index=True) if parts else self.model.table(0, _rng(seed))
        return self._frame(self.sample_array(n, seed, step), self.names, self.integer)

    @staticmethod
    def _frame(rows, names, integer):
        frame = to_frame(rows, names)
        for name, whole in zip(names, integer):
            if whole:
                frame[name] = frame[name].astype(np.int64)
        return frame

    def write(self, dest, n=None, seed=None, progress=None, step=None):
        """Write ``n`` synthetic rows (the rows of ``blocks(n, seed, step)``)
        to ``dest``: a path, Parquet if it ends in ``.parquet`` and CSV
        otherwise, replaced atomically, or "-" for CSV on stdout; integer
        columns (``integer``) as integers. Memory does not grow with ``n``.
        ``progress(rows)`` is called after each block of at most 2**20 rows.
        Returns the number of rows written. A marginals generator writes its
        tables (the schema's values, "other" as an empty cell or null)."""
        if self.tabular and step is None:
            return write_tables(dest, self.model.schema, self.tables(n, seed), progress=progress)
        return write_table(dest, self.names, self.blocks(n, seed, step), integer=self.integer, progress=progress)

    def step_blocks(self, seed=None):
        """Every step of a stream generator, in step order, each with its
        released population of rows: int64 blocks (the box is integer) whose
        first column is the step (the columns ``["step"] + names``), drawn in order from one
        ``numpy.random.default_rng(seed)``. The same seed gives the same
        rows; step K's rows are not those of ``sample(step=K, seed=...)``
        (one generator runs through all steps)."""
        if self.steps is None:
            raise InputError("every step (--all-steps) applies to a stream generator (phdstream), not to a %s one"
                             % self.kind)
        if self.model.misaligned:  # refused before any row is drawn or file opened
            self.model.cells(min(self.model.misaligned))  # raises: the step and its streams' epochs
        rng = _rng(seed)
        return self._step_rows(rng)

    def _step_rows(self, rng):
        for step in self.steps:
            for block in self.model.blocks(None, rng, step):
                # int64 throughout: a step (< 2**32) and the integer box's values stay exact
                yield np.concatenate([np.full((block.shape[0], 1), step, np.int64), block.astype(np.int64)], axis=1)

    def sample_steps(self, seed=None):
        """Every step's snapshot (step_blocks) as one pandas DataFrame with
        the columns ``["step"] + names``, all int64."""
        parts = list(self.step_blocks(seed))
        rows = np.concatenate(parts) if parts else np.empty((0, 1 + len(self.names)), np.int64)
        return self._frame(rows, ["step"] + self.names, [True] * (1 + len(self.names)))

    def write_steps(self, dest, seed=None, progress=None):
        """Write every step's snapshot (step_blocks) to ``dest`` as write()
        does, with a first column ``step``; returns the number of rows."""
        return write_table(dest, ["step"] + self.names, self.step_blocks(seed),
                           integer=[True] + self.integer, progress=progress)


def _rng(seed):
    try:
        return np.random.default_rng(seed)
    except (TypeError, ValueError) as e:
        raise InputError("seed must be None, an int >= 0 or a numpy Generator (%s)" % e)


def assemble(frames=None, *, key=None, keyring=None, store=None, devices=None, config_id=None, mechanism=None,
             force_sum=False, workers=None, cluster=None):
    """Verify release frames, merge those of one configuration and build a Generator.

    frames: frame bytes (one or several frames back to back), Release
        objects, frame file paths, or a list of them (see read_frames, with
        ``key``/``keyring``).
    store: instead of frames, an ingest store (a SQLite path, a
        postgresql:// URL, or an open store from es.connect_store: es.Store
        or a PostgreSQL store), whose frames were verified when stored;
        ``devices`` (list of ids) and ``config_id`` select among them. Its
        frames are streamed: memory does not grow with their number (except
        for profile, whose merge keeps every frame's sketch).
        Several configurations only as marginals windows of several plans
        (the first stored frame of each carries marginals; at most 64).
    workers: with ``store``, merge on a local Dask cluster of this many
        processes (1..1024); cluster: or on the running dask.distributed
        scheduler at this address ("tcp://host:port"), whose workers open
        the store themselves. Needs edgesynth[cluster]; same result.
    keyring: with ``store``, a path or Keyring whose revoked devices' stored
        frames are left out, counted in summary()["revoked_frames_left_out"]
        (revocation refuses new frames; the store keeps those stored before).
    mechanism: which mechanism's states to assemble when frames carry
        several ("privhp", "cdf", "profile"; default: the only one present).
    force_sum: profile only, sum sketches of the same ids anyway (the error
        grows as kappa**k).

    The channels the plan declared integer (es.plan's ``integer``) are
    integer in the generator too: the frames state them (their bounds travel
    as integers), and their synthetic values are whole numbers, uniform over
    the integers of a cell (Generator.integer).

    Raises MergeError when frames of different configurations are given.
    """
    given = frames is not None and not (isinstance(frames, (list, tuple)) and not frames)
    if given == (store is not None):
        raise InputError("give frame files or --store, not both and not neither")
    if (devices or config_id or workers is not None or cluster is not None) and store is None:
        raise InputError("--device, --config-hash, --workers and --cluster apply to a --store")
    if store is not None:
        ring = keyring if keyring is None or isinstance(keyring, Keyring) else load_keyring(keyring)
        model, left_out = assemble_store(store, devices, config_id, mechanism, force_sum, workers, cluster,
                                         ring.revoked() if ring is not None else ())
        return Generator(model, left_out if ring is not None else None)
    return Generator(assemble_any(stream_releases(frames, key, keyring), mechanism, force_sum))


def load(path):
    """The Generator saved at ``path`` (by gen.save or `edgesynth assemble
    -o`); "-" reads it from stdin."""
    path = os.fspath(path)
    data = read_input(path, "a generator")
    try:
        return Generator(load_generator(data, path_label(path)))
    except InputError:
        check_kind(path, "generator", data)  # another edgesynth file: say which and what takes it
        raise


def inspect(path, key=None):
    """JSON-ready description of a frame file, generator file or device
    config at ``path`` ("-": stdin); ``key`` (bytes or hex) verifies tagged frames."""
    return describe(os.fspath(path), device_key(key, None, None))
