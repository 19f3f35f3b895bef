"""Portable test runner: MicroPython unix port and CPython.

    micropython -X heapsize=64wK tests/mp/run.py test_agent_portable [more modules]
    python tests/mp/run.py test_agent_portable

Imports each module named on the command line, calls its ``test_*`` functions
in sorted name order, prints one PASS/FAIL line per test, ends with the plain
line ``N passed, N failed`` and exits with the number of failures. The module
search path comes from MICROPYPATH (MicroPython) or PYTHONPATH (CPython).
"""
import gc
import sys


def _print_exc(e):
    if hasattr(sys, "print_exception"):  # MicroPython
        sys.print_exception(e)
    else:
        import traceback
        traceback.print_exception(type(e), e, e.__traceback__)


def run_module(name):
    """Run one module's tests; return (passed, failed)."""
    passed = failed = 0
    try:
        mod = __import__(name)
    except Exception as e:  # an import error fails the module, not the run
        print("FAIL %s (import)" % name)
        _print_exc(e)
        return 0, 1
    names = sorted([n for n in dir(mod) if n.startswith("test_")])
    for n in names:
        fn = getattr(mod, n)
        if not callable(fn):
            continue
        gc.collect()
        try:
            fn()
        except Exception as e:
            failed += 1
            print("FAIL %s.%s" % (name, n))
            _print_exc(e)
        else:
            passed += 1
            print("PASS %s.%s" % (name, n))
    return passed, failed


def main(modules):
    passed = failed = 0
    for name in modules:
        p, f = run_module(name)
        passed += p
        failed += f
    print("%d passed, %d failed" % (passed, failed))
    return failed


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: run.py MODULE [MODULE ...]")
        sys.exit(2)
    sys.exit(min(main(sys.argv[1:]), 255))
