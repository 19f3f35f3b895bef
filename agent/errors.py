"""Exceptions raised by the device agent."""


class ConfigError(ValueError):
    """The public device configuration is invalid; the message names the field."""


class SealedError(RuntimeError):
    """The state was released; updating it would reuse noise on changed data."""


class BudgetError(RuntimeError):
    """A release would spend more privacy budget than the device may."""
