"""The portable device tests (tests/mp) as ordinary pytest cases under CPython.

Each ``test_*`` function of a portable module becomes one parametrized case, so
failures show up by name with pytest's assertion rewriting. The same functions
run under MicroPython through tests/test_micropython.py.
"""
import importlib
import sys
from pathlib import Path

import pytest

MP_DIR = Path(__file__).resolve().parent / "mp"
REPO = MP_DIR.parents[1]
for _p in (str(MP_DIR), str(REPO)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

MODULES = ("test_agent_portable", "test_profile_cdf_portable")
for _m in MODULES:
    if _m not in sys.modules:  # pytest may already have collected (and rewritten) it
        pytest.register_assert_rewrite(_m)

CASES = []
for _m in MODULES:
    _mod = importlib.import_module(_m)
    for _name in sorted(dir(_mod)):
        if _name.startswith("test_") and callable(getattr(_mod, _name)):
            CASES.append((_m, _name))


def test_portable_modules_collected():
    assert len(CASES) >= 10, CASES


@pytest.mark.parametrize("module,name", CASES, ids=["%s.%s" % c for c in CASES])
def test_portable(module, name):
    getattr(importlib.import_module(module), name)()
