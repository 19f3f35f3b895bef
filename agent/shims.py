"""The agent's one door to the platform seam (``firmware_shims``).

On a board the bundle holds two top-level packages, ``agent`` and
``firmware_shims``; installed on a host they are ``edgesynth.agent`` and
``edgesynth.firmware_shims``. This module is the only place that knows which:
every agent module reaches a shim through ``shim(name)``. A shim module is
imported on first use, so a device only pays heap for the shims it uses.
"""
import sys

try:
    from .. import firmware_shims  # installed: edgesynth.firmware_shims
except (ImportError, ValueError):  # a board's bundle or a source tree (MicroPython < 1.16 raised ValueError)
    import firmware_shims


def load(full):
    """The module of dotted name ``full``, imported on first use.

    Code that ``bundle --emit native`` compiles to machine code must import
    through this: MicroPython resolves a relative import inside a native
    function against the caller's package, not the function's own.
    """
    mod = sys.modules.get(full)
    if mod is None:
        __import__(full)
        mod = sys.modules[full]
    return mod


def shim(name):
    """The module ``firmware_shims.<name>`` ("drbg", "fs", "hmac256", ...)."""
    return load(firmware_shims.__name__ + "." + name)
