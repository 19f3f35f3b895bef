"""The level-uniform CDF tree on the host (docs/mechanisms/cdf.md).

The device keeps noisy node counts of a b-ary tree over K bins per channel;
the host reconstructs leaf counts by GLS, makes the CDF monotone (estimate)
and samples per channel (generator).
"""
from . import generator, plan, vector, wire

__all__ = ["KIND", "State", "Generator", "assemble", "build", "ingest", "generator", "plan", "vector", "wire"]

KIND = "cdf"
State = wire.CDFState
Generator = generator.CDFGenerator
assemble = generator.assemble_cdf
build = generator.build
ingest = vector.ingest
