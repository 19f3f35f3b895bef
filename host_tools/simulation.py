"""Running the device agent over recorded readings on this machine
(``edgesynth simulate``; docs/api.md).

The runtimes (edgesynth.runtimes) run the agent; this module takes the
readings as a DataFrame, a dict of columns or a 2-D array, the seed and key
as the command line or Python gives them, and the public release schedule
of a device that releases one frame per time window (docs/trust.md §3).
"""
import datetime
import math
import operator
import os

import numpy as np

from edgesynth.agent.errors import BudgetError, ConfigError, ReadingError, SealedError
from edgesynth.ccore import core_events
from edgesynth.channels import channel_names, column_map
from edgesynth.config import load_config
from edgesynth.data.tables import column_names, complete_rows, numeric, pick
from edgesynth.errors import InputError
from edgesynth.fleet.broker import as_connection
from edgesynth.fleet.ingest import shown
from edgesynth.fleet.keys import Keyring
from edgesynth.fleet.keys import load as load_keyring
from edgesynth.fleet.publish import Published, Sent, publish
from edgesynth.mechanisms.marginals.table import encode, load_schema
from edgesynth.ram import parse_size
from edgesynth.runtimes.simulate import DEFAULT_HEAP, clamped_fraction, continual, publish_blocks, simulate_stream
from edgesynth.runtimes.simulate import simulate as run_one
from edgesynth.runtimes.windows import Schedule, window_blocks
from edgesynth.runtimes.windows import parse_time as _parse_time
from edgesynth.runtimes.windows import simulate_windows as run_windows

MAX_U32 = 2 ** 32 - 1


def _config(cfg):
    if isinstance(cfg, (str, os.PathLike)):
        return load_config(cfg)
    if not isinstance(cfg, dict) or not isinstance(cfg.get("mechanisms"), list):
        raise InputError("not an edgesynth device config (es.plan returns one)")
    return cfg


def _readings(cfg, data, columns, missing="skip"):
    """(x, channels, kept): the readings as a float64 (n, d) array whose
    columns are the config's channels in reading order, fed as ``columns``
    maps them (edgesynth.channels.column_map), and the mask of ``data``'s
    rows kept: a row with a missing value is left out or, with ``missing=
    "error"``, refused (edgesynth.data.tables). An array has no column
    names: its columns are the mapping's data columns in the order given,
    by default the channels in order."""
    pairs = column_map(cfg, columns)
    chans = channel_names(cfg)
    given = column_names(data)
    schema = _table_schema(cfg)
    if schema is not None:
        return _records(schema, data, pairs, chans, given, missing)
    if given is None:
        x, names = numeric(data, None, "data")
        if x.shape[1] != len(chans):
            raise InputError("data has %d columns for the config's %d channel(s) (%s)"
                             % (x.shape[1], len(chans), ", ".join(chans)))
    else:
        absent = [c for c, _ in pairs if c not in given]
        if absent:
            raise InputError("data has no column %r (its columns: %s); the config's channels are %s: map "
                             "data columns onto them with --columns" % (absent[0], ", ".join(given), ", ".join(chans)))
        x, names = numeric(data, [c for c, _ in pairs], "data")
    kept = complete_rows(x, names, "data", missing)
    at = {ch: i for i, (_, ch) in enumerate(pairs)}
    return x[kept][:, [at[ch] for ch in chans]], chans, kept


def _table_schema(cfg):
    """The public Schema of a config's marginals mechanism, or None."""
    if not any(isinstance(m, dict) and m.get("kind") == "marginals" for m in cfg["mechanisms"]):
        return None
    return load_schema(cfg)


def _records(schema, data, pairs, chans, given, missing):
    """_readings for a config with a marginals mechanism: its schema's
    columns encoded to cell indices (any values: text, numbers; an unknown
    or missing value is the "other" cell, never skipped: Schema.encode_column),
    the other channels read as numbers (a missing one skips or refuses its
    row as ``missing`` says)."""
    if given is None:  # an array's columns are the mapping's data columns, in order
        x, _ = numeric(data, None, "data")
        if x.shape[1] != len(pairs):
            raise InputError("data has %d columns for the config's %d channel(s) (%s)"
                             % (x.shape[1], len(pairs), ", ".join(chans)))
        data = {c: x[:, i] for i, (c, _) in enumerate(pairs)}
        given = [c for c, _ in pairs]
    fed = {ch: c for c, ch in pairs}
    absent = [c for c, _ in pairs if c not in given]
    if absent:
        raise InputError("data has no column %r (its columns: %s); the config's channels are %s: map "
                         "data columns onto them with --columns" % (absent[0], ", ".join(given), ", ".join(chans)))
    cells = encode(schema, data, [fed[n] for n in schema.names]).astype(np.float64)
    at = {n: i for i, n in enumerate(schema.names)}
    others = [ch for ch in chans if ch not in at]
    num = numeric(data, [fed[ch] for ch in others], "data")[0] if others else np.empty((len(cells), 0))
    x = np.column_stack([cells[:, at[ch]] if ch in at else num[:, others.index(ch)] for ch in chans])
    kept = complete_rows(x, chans, "data", missing)
    return x[kept], chans, kept


# The op column's spellings (case-insensitive, stripped): an insertion or a deletion.
OPS = {"+1": 1, "1": 1, "insert": 1, "-1": -1, "delete": -1}


def parse_op(cell):
    """+1 (insert) or -1 (delete) of one op cell: the number 1 or -1, or the
    text "+1", "1", "-1", "insert" or "delete" (any case). ValueError naming
    the accepted forms otherwise (the CSV reader adds the line)."""
    if isinstance(cell, str):
        v = OPS.get(cell.strip().lower())
        if v is not None:
            return v
    elif not isinstance(cell, bool) and isinstance(cell, (int, float, np.integer, np.floating)) and cell in (1, -1):
        return int(cell)
    raise ValueError("op %r is not +1/-1 or insert/delete" % (cell,))


def _op_name(cfg):
    """The op column of a phdstream config's readings: its spec's "op" (default "op")."""
    return cfg["mechanisms"][0].get("op", "op")


def _missing_cell(v):
    """A missing op cell: None, NaN or pandas.NA (as tables reads channel values)."""
    return v is None or (isinstance(v, (float, np.floating)) and math.isnan(v)) or type(v).__name__ == "NAType"


def _with_ops(cfg, data, x, cols, kept, op, columns, missing):
    """A continual config's events: ``x`` with the op column (+1/-1 per
    kept row, from ``op``: None for all inserts, a column of ``data``, or one
    value per row of ``data``) appended, as int32 (ccore.core_events: every
    runtime takes the same integers), their column names and the mask of
    ``data``'s rows kept. A row whose op is missing is skipped or refused
    like a missing channel value (``missing``); a value that is not an
    integer within int32, or an op that is not +1/-1, is an InputError
    naming the row. Other configs: (x, cols, kept) unchanged; ``op`` must
    then be None."""
    if not continual(cfg):
        if op is not None:
            raise InputError("--op-column applies to a phdstream config (the op of each event); this config "
                             "holds %s" % ", ".join(str(m.get("kind")) for m in cfg["mechanisms"]))
        return x, cols, kept
    rows = np.flatnonzero(kept)
    if op is None:
        ops = np.ones(rows.size)
    else:
        if isinstance(op, str):
            if op in [c for c, _ in column_map(cfg, columns)]:
                raise InputError("--op-column %r is also in --columns" % op)
            op = pick(data, op, "data")
        if isinstance(op, np.ndarray) and op.dtype.kind in "iuf":  # a numeric column: checked at once
            if op.shape != kept.shape:
                raise InputError("op has %d values for %d readings" % (op.size, kept.size))
            ops = op[rows].astype(np.float64)
        else:  # text or mixed values, one by one
            values = list(op)
            if len(values) != kept.size:
                raise InputError("op has %d values for %d readings" % (len(values), kept.size))
            ops = np.empty(rows.size)
            for j, i in enumerate(rows):
                try:
                    ops[j] = np.nan if _missing_cell(values[i]) else parse_op(values[i])
                except ValueError as e:
                    raise InputError("reading %d: %s" % (i, e))
        absent = np.isnan(ops)
        if absent.any():
            if missing == "error":
                raise InputError("data: row %d, column %r: missing value" % (rows[absent][0], _op_name(cfg)))
            kept = kept.copy()
            kept[rows[absent]] = False
            rows, x, ops = rows[~absent], x[~absent], ops[~absent]
    try:
        events = core_events(np.column_stack([x, ops]), names=rows)
    except ValueError as e:
        raise InputError(str(e))
    return events, list(cols) + [_op_name(cfg)], kept


def _hex(text, what):
    try:
        b = bytes.fromhex(text)
    except ValueError:
        raise InputError("%s must be hexadecimal" % what)
    if not b:
        raise InputError("%s is empty" % what)
    return b


def seed_bytes(seed):
    """The agent's seed from None (fresh entropy), bytes, a hex string (as
    ``--seed``) or an int in [0, 2**64) (8 bytes, big-endian)."""
    if seed is None:
        return None
    if isinstance(seed, str):
        return _hex(seed, "--seed")
    if isinstance(seed, (bytes, bytearray)):
        if not seed:
            raise InputError("--seed is empty")
        return bytes(seed)
    try:
        s = operator.index(seed)
    except TypeError:
        raise InputError("a seed is None, bytes, a hex string or an int, got %r" % (seed,))
    if not 0 <= s < 2 ** 64:
        raise InputError("an int seed must be in [0, 2**64), got %d" % s)
    return s.to_bytes(8, "big")


def device_key(key, keyring, device_id):
    """The HMAC key of ``key`` (bytes or hex) or of ``device_id`` in
    ``keyring`` (a path or Keyring), at most one of them, or None."""
    if key is not None and keyring is not None:
        raise InputError("pass --key or --keyring, not both")
    if keyring is not None:
        ring = keyring if isinstance(keyring, Keyring) else load_keyring(keyring)
        return ring.require(device_id)
    if key is None:
        return None
    if isinstance(key, str):
        return _hex(key, "--key")
    if not isinstance(key, (bytes, bytearray)) or not key:
        raise InputError("key must be non-empty bytes or a hex string, got %s" % type(key).__name__)
    return bytes(key)


def _u32(value, what):
    try:
        v = operator.index(value)
    except TypeError:
        raise InputError("%s must be an integer, got %r" % (what, value))
    if not 0 <= v <= MAX_U32:
        raise InputError("%s must be in [0, 2**32 - 1], got %d" % (what, v))
    return v


def _seconds(value, what):
    """Unix seconds of a number, a datetime (naive means UTC) or a string
    ``parse_time`` reads."""
    if isinstance(value, str):
        try:
            return _parse_time(value)
        except ValueError as e:
            raise InputError("%s: %s" % (what, e))
    if isinstance(value, np.datetime64):
        return value.astype("datetime64[ns]").astype(np.int64) / 1e9
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        return value.timestamp()
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError("%s: %r is not a time (Unix seconds, ISO 8601 or a datetime)" % (what, value))
    if not math.isfinite(v):
        raise InputError("%s: %r is not a finite time" % (what, value))
    return v


def _times(times, n):
    """Unix seconds (float64, shape (n,)) of ``times``: numbers, datetime64,
    datetimes or strings."""
    t = np.asarray(times)
    if t.ndim != 1 or t.size != n:
        raise InputError("times has %d values for %d readings" % (t.size, n))
    if t.dtype.kind == "M":
        return t.astype("datetime64[ns]").astype(np.int64) / 1e9
    if t.dtype.kind in "iuf":
        t = t.astype(np.float64)
        if not np.all(np.isfinite(t)):
            raise InputError("times holds a value that is not a finite time")
        return t
    return np.array([_seconds(v, "times[%d]" % i) for i, v in enumerate(t)], dtype=np.float64)


def window_schedule(window, start, end):
    """The public release schedule: every window of ``window`` seconds (a
    positive int) on the grid anchored at the Unix epoch that meets [start,
    end). ``start``/``end``: Unix seconds, ISO 8601 strings ("2010-01-01T00:00Z";
    no offset means UTC) or datetimes, fixed before any data.
    ``schedule.check(t)`` refuses a time outside it."""
    try:
        window = operator.index(window)
    except TypeError:
        raise InputError("--window must be a positive whole number of seconds, got %r" % (window,))
    return Schedule(window, _seconds(start, "--start"), _seconds(end, "--end"))


def outside_fraction(cfg, data, columns=None, missing="skip"):
    """Fraction (0..1) of the rows of ``data`` with a value outside the
    config's bounds: the device clamps them into the edge cells (a notice,
    not an error; 0 for a profile, which has no bounds)."""
    cfg = _config(cfg)
    if not cfg["mechanisms"] or "lo" not in cfg["mechanisms"][0]:
        return 0.0
    x, _, _ = _readings(cfg, data, columns, missing)
    return clamped_fraction(x, cfg)


def _run(call):
    """``call()``, with the agent's own errors turned into InputError."""
    try:
        return call()
    except (ConfigError, SealedError, BudgetError) as e:
        raise InputError("invalid device config: %s" % e)
    except ReadingError as e:
        raise InputError("a reading the device refuses: %s" % e)


def simulate(cfg, data, seed=None, *, runtime="cpython", columns=None, device_id="device", epoch=0, seq=0,
             key=None, keyring=None, heap=DEFAULT_HEAP, cpu="cortex-m4", window=None, start=None, end=None,
             times=None, op=None, missing="skip", progress=None):
    """The frame bytes a device of ``cfg`` releases after reading ``data``.

    cfg: a config dict (es.plan) or the path of a config file.
    data: a DataFrame or dict of columns, its columns named like the
        config's channels read (or those ``columns`` maps onto them), or an
        array of shape (n, d) whose columns are the channels in order.
        Readings outside the bounds are clamped.
    seed: None draws fresh entropy (private). bytes, a hex string (as
        ``--seed``) or an int in [0, 2**64) make the noise reproducible: NOT
        private, for tests and simulation only.
    runtime: "cpython" (the agent's code per reading), "numpy" (vectorised,
        the same bytes), "micropython" (the unix port with a heap of ``heap``
        bytes, int or "32K"), "native" (the C core through cffi) or "qemu"
        (the C core on an emulated Cortex-M, ``cpu`` "cortex-m4" or
        "cortex-m0plus").
    columns: which data columns feed the channels: a list (by position:
        columns[i] feeds channel i), a dict {data column: channel} naming
        every channel once, or a string as --columns ("temp,humid",
        "temp=a,humid=b"). With an array, they name its columns in the order
        given. The channel names never change: frames carry the config's
        names (and config id) whatever the data's columns are called.
    device_id: name carried in the frame (1..64 bytes). epoch, seq: the
        release's numbers, 0..2**32-1.
    key: HMAC key (bytes or hex) to tag the frame; or keyring (a path or
        es.load_keyring(...)) holding ``device_id``'s key.
    window, start, end, times: release on a public clock instead, one frame
        per window (see simulate_windows); the result is the frames back to
        back and ``epoch`` must stay 0.
    op: a phdstream config's event signs (see simulate_windows); without a
        window its whole stream is one window: one step, one frame.
    missing: a row with a missing value (NaN, None, pandas.NA) in a column
        fed, or a missing op, is skipped ("skip"; es.read(data) counts them)
        or an InputError ("error"). Skipping depends on that row only: event-level safe.
        A marginals config's schema columns take any values (text, numbers),
        mapped to cell indices by its schema before the runtime sees them; a
        value outside the domain or missing is the column's "other" cell, so
        ``missing`` applies only to other mechanisms' channels.
    progress: optional callable given the number of readings consumed.

    Returns bytes: one frame, or with ``window`` every window's frame.
    """
    timed = (window, start, end, times)
    if any(v is not None for v in timed):
        if epoch:
            raise InputError("--epoch is the window index with --window; leave it out")
        frames = simulate_windows(cfg, data, times, window, start, end, seed, runtime=runtime, columns=columns,
                                  device_id=device_id, seq=seq, key=key, keyring=keyring, heap=heap, cpu=cpu,
                                  op=op, missing=missing, progress=progress)
        return b"".join(f for _, f in frames)
    cfg = _config(cfg)
    x, cols, kept = _readings(cfg, data, columns, missing)
    x, cols, kept = _with_ops(cfg, data, x, cols, kept, op, columns, missing)
    run = dict(runtime=runtime, seed=seed_bytes(seed), device_id=device_id, key=device_key(key, keyring, device_id),
               heap=parse_size(heap, "--heap"), cpu=cpu, progress=progress)
    epoch, seq = _u32(epoch, "--epoch"), _u32(seq, "--seq")
    if continual(cfg):  # the whole stream is one window: one step, one frame
        return bytes(_run(lambda: simulate_stream(cfg, [(epoch, seq, x)], cols, **run))[0][1])
    return bytes(_run(lambda: run_one(cfg, x, cols, epoch=epoch, seq=seq, **run)))  # the agent releases a bytearray


def simulate_windows(cfg, data, times, window, start, end, seed=None, *, runtime="cpython", columns=None,
                     device_id="device", seq=0, key=None, keyring=None, heap=DEFAULT_HEAP, cpu="cortex-m4",
                     op=None, missing="skip", progress=None):
    """Frames ``[(epoch, bytes), ...]`` of a device that releases one frame
    per public time window, in time order (docs/trust.md §3).

    A reading at time t belongs to window floor(t / window) on a grid
    anchored at the Unix epoch; every window that meets [start, end) is a
    fresh agent with fresh noise and one frame, empty or not, whose epoch is
    the window index. Nothing about the schedule is read off the data.

    times: each reading's time, as Unix seconds, datetime64, datetimes or ISO
        8601 strings, or the name of a column of ``data`` holding them. A
        reading outside [start, end) is refused; a row skipped for a missing
        value takes its time with it.
    window: seconds per window, a positive int. start, end: see
        window_schedule.
    seed: as in simulate; window e is then seeded from (seed, e), so frames
        are reproducible and NOT private.
    seq: sequence number of the first window's frame; it counts up.
    op: a phdstream config only: each event's sign, +1 (insert) or -1
        (delete): the name of a column of ``data`` or one value per row,
        each the number 1 or -1 or the text "+1", "-1", "insert" or
        "delete" (any case); anything else is an InputError naming the row.
        None: every reading is an insertion. A phdstream config runs as ONE
        agent over the whole schedule, one step and one frame per window,
        seeded with ``seed`` itself (docs/mechanisms/phdstream.md).
    Other arguments as in simulate.
    """
    cfg, schedule, x, t, cols = _timed(cfg, data, times, window, start, end, columns, missing, op)
    run = dict(runtime=runtime, device_id=device_id, key=device_key(key, keyring, device_id),
               heap=parse_size(heap, "--heap"), cpu=cpu)
    frames = _run(lambda: run_windows(cfg, x, t, cols, schedule, seed=seed_bytes(seed),
                                      first_seq=_u32(seq, "--seq"), progress=progress, **run))
    return [(e, bytes(f)) for e, f in frames]


def _timed(cfg, data, times, window, start, end, columns, missing, op=None):
    """(cfg, schedule, readings (with a phdstream config's op column), their
    times, channels) of a windowed simulation, checked."""
    if window is None or start is None or end is None or times is None:
        raise InputError("--window, --start, --end and the readings' times go together")
    cfg = _config(cfg)
    schedule = window_schedule(window, start, end)
    x, cols, kept = _readings(cfg, data, columns, missing)
    if isinstance(times, str) and times == op:
        raise InputError("--time-column and --op-column name the same column %r" % op)
    x, cols, kept = _with_ops(cfg, data, x, cols, kept, op, columns, missing)
    if isinstance(times, str):
        if times in [c for c, _ in column_map(cfg, columns)]:
            raise InputError("--time-column %r is also in --columns" % times)
        times = pick(data, times, "data")
    t = _times(times, kept.size)[kept]
    bad = np.flatnonzero(~((t >= schedule.start) & (t < schedule.end)))
    if bad.size:
        try:
            schedule.check(float(t[bad[0]]))
        except ValueError as e:
            raise InputError("reading %d: %s" % (np.flatnonzero(kept)[bad[0]], e))
    return cfg, schedule, x, t, cols


def simulate_publish(cfg, data, broker, seed=None, *, timeout=30.0, on_receipt=None, name="simulate",
                     runtime="cpython",
                     columns=None, device_id="device", epoch=0, seq=0, key=None, keyring=None, heap=DEFAULT_HEAP,
                     cpu="cortex-m4", window=None, start=None, end=None, times=None, op=None, missing="skip",
                     progress=None):
    """Simulate as es.simulate does and publish the frames to an MQTT
    broker, waiting up to ``timeout`` seconds for the gateway's receipts
    (docs/transport.md).

    broker: ``mqtt://HOST[:PORT]``, or an es.publish-style Connection
        (fleet.broker.Connection; TLS and users: host runtimes only).
    runtime "micropython": the device publishes each window's frame itself
        as it is released, through its own MQTT code (agent/transport/mqtt.py
        with umqtt.simple, fetched once from PyPI and cached:
        edgesynth.runtimes.umqtt) on the unix port, keeps it in its outbox
        until the receipt, and flushes the outbox at the end; ``heap`` is
        the agent's, the transport's measured heap is added. Other runtimes:
        the frames are published from this host (es.publish) after the run.
    on_receipt: called with each frame's Sent as its final receipt arrives.
    name: the frames' labels are "NAME frame I" (micropython runtime; the
        host's publisher labels them "<frames 0> frame I").
    Other arguments as es.simulate (``window``, ``start``, ``end``,
    ``times``: one frame per window; ``op``: a phdstream config's event
    signs, host runtimes only).

    Returns an es.publish Published: ``frames`` (Sent, in window order; their
    ``raw`` bytes are the frames, as es.simulate gives them for the same
    seed), ``ok`` iff every frame was stored or a duplicate, ``missing``.
    """
    conn = as_connection(broker)
    opts = dict(runtime=runtime, columns=columns, device_id=device_id, seq=seq, key=key, keyring=keyring, heap=heap,
                cpu=cpu, op=op, missing=missing, progress=progress)
    if runtime == "micropython" and continual(_config(cfg)):
        raise InputError("a phdstream device does not publish through its own MQTT code yet; publish from the "
                         "host (another --runtime)")
    if runtime != "micropython":
        if window is None and start is None and end is None and times is None:
            frames = [simulate(cfg, data, seed, epoch=epoch, **opts)]
        else:
            frames = [f for _, f in simulate_windows(cfg, data, times, window, start, end, seed, **opts)]
        return publish(b"".join(frames), conn, timeout, on_receipt=on_receipt)
    if window is None and start is None and end is None and times is None:
        cfg = _config(cfg)
        x, cols, _ = _readings(cfg, data, columns, missing)
        blocks = [(_u32(epoch, "--epoch"), _u32(seq, "--seq"), seed_bytes(seed), x)]
    else:
        if epoch:
            raise InputError("--epoch is the window index with --window; leave it out")
        cfg, schedule, x, t, cols = _timed(cfg, data, times, window, start, end, columns, missing)
        blocks = window_blocks(x, t, schedule, seed_bytes(seed), _u32(seq, "--seq"))
    sent = []

    def on_sent(i, raw):
        sent.append(Sent("%s frame %d" % (shown(name), i), _Frame(device_id, blocks[i][0], raw)))
        if progress:
            progress(len(blocks[i][3]))

    def on_device_receipt(i, result, reason):
        if result == "retry":  # not final: the device publishes it again
            return
        sent[i].receipt = {"epoch": sent[i].epoch, "seq": blocks[i][1], "sha256": sent[i].sha256,
                           "result": result, "reason": reason}
        if on_receipt:
            on_receipt(sent[i])
    _run(lambda: publish_blocks(cfg, blocks, cols, conn, parse_size(heap, "--heap"), device_id,
                                device_key(key, keyring, device_id), timeout, on_sent, on_device_receipt))
    return Published(sent)


class _Frame:
    """What fleet.publish.Sent reads of a Release: device, epoch, raw."""

    def __init__(self, device, epoch, raw):
        self.device, self.epoch, self.raw = device, epoch, raw


def parse_time(text):
    """Seconds since the Unix epoch (float) of ``text``: Unix seconds or ISO
    8601 (no offset means UTC); InputError naming the accepted forms."""
    try:
        return _parse_time(text)
    except ValueError as e:
        raise InputError(str(e))
