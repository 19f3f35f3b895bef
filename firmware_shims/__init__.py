"""Platform shims for the edgesynth device agent.

Everything that differs between a microcontroller and a host lives here so that
``agent/`` stays portable: hashing primitives (HMAC-SHA256), the entropy source
and the deterministic random bit generator that feeds the noise sampler.

This package runs on CPython and MicroPython alike and never imports ``agent``.
"""


class EntropyError(Exception):
    """The entropy source failed a health check; no noise may be drawn."""
