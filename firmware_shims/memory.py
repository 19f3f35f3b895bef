"""Heap management for small devices: unload code once its phase is over.

The agent's construction code (validation, hash derivation, the noise sampler,
the DRBG) runs once; its bytecode would otherwise stay on the heap for the
device's whole life. On MicroPython ``unload`` drops such modules so the
garbage collector can reclaim them; a later import loads them again. On
CPython it does nothing: module objects are cheap there, and reloading would
create new exception classes that callers could no longer catch.
"""
import gc
import sys

MICROPYTHON = sys.implementation.name == "micropython"


def unload(names):
    """Forget the modules ``names`` (dotted) and collect, on MicroPython only."""
    if not MICROPYTHON:
        return
    for name in names:
        if name in sys.modules:
            del sys.modules[name]
        dot = name.rfind(".")
        if dot > 0:
            parent = sys.modules.get(name[:dot])
            if parent is not None and hasattr(parent, name[dot + 1:]):
                delattr(parent, name[dot + 1:])
    gc.collect()


def heap_free():
    """Free heap bytes (MicroPython), or None where the runtime cannot say."""
    return gc.mem_free() if hasattr(gc, "mem_free") else None
