"""Errors the host tools raise on bad input. The CLI prints their message on one
line and exits with status 2; nothing here should ever surface as a traceback."""


class EdgesynthError(Exception):
    """Base class for every user-facing error."""


class InputError(EdgesynthError):
    """A command-line value or input file is malformed."""


class FrameError(EdgesynthError):
    """A release frame is malformed, unauthenticated or inconsistent."""


class TruncatedFrame(FrameError):
    """The bytes end before the frame does."""


class BadEnvelope(FrameError):
    """The envelope (magic, device id, lengths, tag) is malformed."""


class BadTag(FrameError):
    """The HMAC tag is missing or does not verify."""


class BadPayload(FrameError):
    """The payload is not valid msgpack within the decoding limits."""


class SchemaError(FrameError):
    """The payload decodes but violates the release schema."""


class MergeError(EdgesynthError):
    """Releases cannot be merged (different public configurations)."""
