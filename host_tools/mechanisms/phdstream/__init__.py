"""PHDStream on the host (docs/mechanisms/phdstream.md, "Host algorithms"):
post-processing of the device's per-window releases. ``wire`` decodes a
payload (a frame's phdstream entry: State), ``mirror`` rebuilds the
device's union tree from them, ``tree`` holds the consistent extension
Ext_T and the sampler over an explicit tree, ``generator`` the stream
generator (per step, every device's leaves of T(t)) that ``assemble``
builds and ``sample`` draws from, ``metric`` the paper's range-query
evaluation. Readings reach a device through the agent (a continual
mechanism), so there is no vectorised ``ingest``.
"""
from . import generator, metric, mirror, tree, wire

__all__ = ["KIND", "State", "Generator", "Mirror", "assemble", "build", "decode", "generator", "metric", "mirror",
           "tree", "wire"]

KIND = "phdstream"
State = wire.PHDStreamState
Generator = generator.Generator
Mirror = mirror.Mirror
assemble = generator.assemble_phdstream
build = generator.build
decode = wire.decode
