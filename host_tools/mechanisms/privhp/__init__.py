"""PrivHP, the private hierarchical partition, on the host (docs/mechanisms/privhp.md).

The device keeps noisy counters of a complete tree down to level L and one
private sketch per deeper level; the host grows the tree from merged states
(growth), makes it consistent and samples leaf boxes (generator).
"""
from . import generator, plan, vector, wire

__all__ = ["KIND", "State", "Generator", "assemble", "build", "ingest", "generator", "plan", "vector", "wire"]

KIND = "privhp"
State = wire.PrivHPState
Generator = generator.Generator
assemble = generator.assemble_privhp
build = generator.build
ingest = vector.ingest
