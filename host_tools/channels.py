"""A config's channel names, and how the columns of a data file or table map
onto them (``--columns``; docs/cli.md).

One rule for every config: the names a config was planned with are its
channels and never change, so a device's config id, and which frames merge,
do not depend on how a data file names its columns. ``--columns`` only says
which data column feeds which channel: by position (``temp,humid``: temp
feeds the first channel, humid the second) or by name (``temp=a,humid=b``:
FILE=CHANNEL, every channel exactly once). Without it, the data's columns
named like the channels are read.
"""
from collections.abc import Mapping

from edgesynth.errors import InputError


def spec_names(m):
    """The channels one mechanism spec reads, in order: its "names", or a
    marginals spec's schema column names (that spec carries the schema
    instead); [] where the spec is malformed (the agent refuses it)."""
    if m.get("kind") == "marginals":
        schema = m.get("schema")
        cols = schema.get("columns") if isinstance(schema, dict) else None
        return [c.get("name") for c in cols if isinstance(c, dict)] if isinstance(cols, list) else []
    names = m.get("names")
    return names if isinstance(names, list) else []


def channel_names(cfg):
    """The channels a device of ``cfg`` reads, in reading order: its one
    mechanism's names, or the inputs of a combined config (each mechanism's
    names, first seen first)."""
    if cfg.get("inputs"):
        return list(cfg["inputs"])
    out = []
    for i, m in enumerate(cfg["mechanisms"]):
        names = spec_names(m)
        if len(set(map(str, names))) != len(names):
            raise InputError("mechanism %d (%s) of the config names a channel twice (%s); plan it with "
                             "distinct --names" % (i, m.get("kind"), ", ".join(map(str, names))))
        out.extend(n for n in names if n not in out)
    return out


def parse_columns(text):
    """``--columns`` as written: "temp,humid" -> ["temp", "humid"] (by
    position) or "temp=a,humid=b" -> {"temp": "a", "humid": "b"} (FILE=CHANNEL).
    A name holding "," or "=" needs the list or dict form of the library."""
    items = [c.strip() for c in str(text).split(",") if c.strip()]
    if not items:
        raise InputError("--columns needs at least one column name")
    pairs = [tuple(s.strip() for s in c.split("=", 1)) for c in items]
    mapped = [len(p) == 2 for p in pairs]
    if not any(mapped):
        _no_twice([c for c, in pairs])
        return [c for c, in pairs]
    if not all(mapped) or any(not a or not b for a, b in pairs):
        raise InputError("--columns mixes FILE=CHANNEL with plain names (or leaves one side empty); "
                         "write every item as FILE=CHANNEL, or none")
    _no_twice([a for a, _ in pairs])
    return dict(pairs)


def _no_twice(cols):
    for i, c in enumerate(cols):
        if c in cols[:i]:
            raise InputError("--columns names column %r twice" % c)


def column_map(cfg, columns=None):
    """``[(data column, channel), ...]``: which data column feeds each
    channel of ``cfg``, in the order ``columns`` gives them.

    columns: None (the data's columns named like the channels), a list (by
    position: columns[i] feeds channel i), a dict {data column: channel}
    naming every channel exactly once, or a string as --columns spells
    either. One InputError naming the channels expected otherwise.
    """
    chans = channel_names(cfg)
    expected = "the config's channels are %s" % ", ".join(chans)
    if columns is None:
        return [(c, c) for c in chans]
    if isinstance(columns, str):
        columns = parse_columns(columns)
    if isinstance(columns, Mapping):
        pairs = [(str(a), str(b)) for a, b in columns.items()]
    else:
        cols = [str(c) for c in columns]
        _no_twice(cols)
        if len(cols) != len(chans):
            raise InputError("--columns gives %d column(s) for %d channel(s): %s (one column per channel in "
                             "order, or FILE=CHANNEL)" % (len(cols), len(chans), expected))
        return list(zip(cols, chans))
    fed = {}
    for col, ch in pairs:
        if ch not in chans:
            raise InputError("--columns maps %r onto %r, which is not a channel: %s" % (col, ch, expected))
        if ch in fed:
            raise InputError("--columns feeds channel %r twice (from %r and %r): %s" % (ch, fed[ch], col, expected))
        fed[ch] = col
    unfed = [c for c in chans if c not in fed]
    if unfed:
        raise InputError("--columns feeds no column to channel %s: %s" % (", ".join(map(repr, unfed)), expected))
    return pairs
