"""Exceptions raised by the device agent."""


class ConfigError(ValueError):
    """The public device configuration is invalid; the message names the field."""


class SealedError(RuntimeError):
    """The state was released; updating it would reuse noise on changed data."""


SEALED = "state was released; start a new epoch with fresh noise"  # SealedError's message, everywhere


class BudgetError(RuntimeError):
    """A release would spend more privacy budget than the device may."""


class StateError(Exception):
    """The persisted state is missing, stale, forged or damaged: the device must not run."""


class ReadingError(ValueError):
    """One reading is malformed (wrong type, count or op); nothing of it was stored."""
