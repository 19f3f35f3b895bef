"""The mechanisms on the host, one package each, and the registry that names them.

Every package has the same parts, named as on the device (agent/<name>/) and
in the C core (agent/c/es_<name>.c):

- ``wire``: the state a frame carries, schema-checked, and how two merge;
- ``plan``: the public parameters for an epsilon and a RAM budget;
- ``vector``: numpy ingestion, the effect of the device's ``update`` per row;
- ``generator``: assembly from merged states and the saved generator file;
- its own host algorithms (privhp: growth; cdf: estimate; profile: invert;
  phdstream: mirror, tree, metric; marginals: schema, model, adapt, table).

Each package's ``__init__`` exposes ``KIND``, ``State``, ``Generator``,
``assemble`` (from releases), ``build`` (from a running merge, edgesynth.merge)
and ``ingest``; phdstream, a continual mechanism whose windows are replayed in
order and never summed, has no ``vector``/``ingest`` (its readings reach a
device through the agent). Adding a mechanism is a package here, one in
agent/ (named in agent.wire.MECHANISMS) and one line in _PACKAGES.
"""
from edgesynth.agent.wire import MECHANISMS
from edgesynth.errors import InputError, MergeError
from edgesynth.genfile import unpack
from edgesynth.merge import Merges

from . import cdf, marginals, phdstream, privhp, profile

_PACKAGES = {m.KIND: m for m in (privhp, cdf, profile, phdstream, marginals)}
# in agent.wire.MECHANISMS order: the kinds a frame may carry are the ones the agent names
REGISTRY = {kind: _PACKAGES[kind] for kind in MECHANISMS}


def load_generator(data, source="generator"):
    """The generator object saved in ``data`` (bytes), whatever its kind;
    InputError naming ``source`` when it is not a generator file."""
    m = unpack(data, source)
    kind = m.get("kind") if m is not None else None
    del m  # from_bytes decodes the file again: never hold two decoded copies
    for mech in REGISTRY.values():
        if mech.generator.FILE_KIND == kind:
            return mech.Generator.from_bytes(data, source)
    raise InputError("%s is not an edgesynth generator (assemble writes one)" % source)


def assemble(releases, mechanism=None, force_sum=False):
    """The generator of ``mechanism`` (default: the only kind present) from
    verified ``releases`` (any iterable, folded in one at a time: memory
    does not grow with their number); resends are de-duplicated and two
    frames for one window refused (a store's frames go through
    fleet.assembly instead). ``force_sum`` is the profile's --force-sum.
    The frames state which channels are integer."""
    merges = Merges()
    for rel in releases:
        merges.add(rel)
    return build(merges, mechanism, force_sum)


def build(merges, mechanism=None, force_sum=False):
    """The generator of ``mechanism`` (default: the only kind present) from
    the running merge ``merges`` (edgesynth.merge.Merges). Default with
    exactly privhp and cdf states over the same channels (names and bounds)
    in every release:
    the joined generator (privhp.join: the privhp generator raked to the
    CDFs and sampled by their shape inside a leaf)."""
    kinds = merges.kinds()
    # joined only when every release carries both (one combined config): a cdf
    # device beside a privhp device is two populations, not one to rake
    if mechanism is None and sorted(kinds) == ["cdf", "privhp"] \
            and all(merges.by_kind[k].count == merges.frames for k in kinds):
        joined = _joined(merges, force_sum)
        if joined is not None:
            return joined
    if mechanism is None:
        if len(kinds) != 1:
            raise MergeError("the releases carry several mechanisms (%s); choose one with --mechanism"
                             % ", ".join(kinds))
        mechanism = kinds[0]
    if mechanism not in kinds:
        raise MergeError("no %s state in the given releases (they carry %s)" % (mechanism, ", ".join(kinds)))
    return REGISTRY[mechanism].build(merges, merges.select(mechanism).result(), force_sum=force_sum)


def _joined(merges, force_sum):
    """The joined generator of privhp and cdf states over the same channels,
    or None when their channels differ (names, bounds or integer flags)."""
    p_state = merges.select("privhp").result()
    c_state = merges.select("cdf").result()
    same = list(p_state.names) == list(c_state.names) and list(p_state.integer) == list(c_state.integer) \
        and list(p_state.lo) == list(c_state.lo) and list(p_state.hi) == list(c_state.hi)
    if not same:
        return None
    cdf_gen = cdf.build(merges, c_state, force_sum=force_sum)
    cdf_meta = {k: cdf_gen.meta[k] for k in ("mechanism_epsilon", "config_id", "branching") if k in cdf_gen.meta}
    cdf_meta["bins"] = cdf_gen.K
    return privhp.generator.with_cdf(privhp.build(merges, p_state, force_sum=force_sum), cdf_gen.F, cdf_meta)
