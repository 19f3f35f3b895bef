"""The private profile sketch on the host (docs/mechanisms/profile.md).

The device keeps discrete-Laplace-noised counters over a (sampled) domain of
ids; the host unfolds and inverts their histogram into the profile, how many
ids were seen exactly t times (invert), and saves the result (generator).
"""
from . import generator, plan, vector, wire

__all__ = ["KIND", "State", "Generator", "assemble", "build", "ingest", "generator", "plan", "vector", "wire"]

KIND = "profile"
State = wire.ProfileState
Generator = generator.ProfileResult
assemble = generator.assemble_profile
build = generator.build
ingest = vector.ingest
