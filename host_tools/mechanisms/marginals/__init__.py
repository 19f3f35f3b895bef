"""Partition-based private marginals on the host (docs/mechanisms/marginals.md):
first slice, not yet registered as a mechanism. Modules: schema (public
column domains), measure (one noisy, possibly partitioned marginal), model
(the graphical-model fit and sampling)."""
