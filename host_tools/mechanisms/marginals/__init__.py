"""Partition-based private marginals on the host (docs/mechanisms/marginals.md).

The device keeps discrete-Laplace-noised group totals of public (possibly
partitioned) marginals of records over a public schema; the host fits a
graphical model to them (model), samples synthetic tables with the schema's
values (generator), and plans the device config (plan). Modules: schema
(public column domains), measure (one noisy marginal), wire (the frame's
state), vector (numpy ingestion), model, generator, plan.
"""
from . import generator, plan, vector, wire

__all__ = ["KIND", "State", "Generator", "assemble", "build", "ingest", "generator", "plan", "vector", "wire"]

KIND = "marginals"
State = wire.MarginalsState
Generator = generator.MarginalsGenerator
assemble = generator.assemble_marginals
build = generator.build
ingest = vector.ingest
