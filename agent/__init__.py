"""edgesynth device agent: private-at-rest summaries of a local stream.

Runs unchanged on CPython and MicroPython. Import ``Agent`` and see
``agent.device`` for the API; docs/privacy.md for what the frame guarantees.
"""
from .device import Agent  # noqa: F401
from .errors import BudgetError, ConfigError, SealedError  # noqa: F401
