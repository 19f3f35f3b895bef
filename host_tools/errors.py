"""The one error hierarchy of edgesynth: every exception a library function or
command raises on bad input, bad files or a failing store is an
EdgesynthError. The CLI prints its message on one line and exits with status
2; nothing here should ever surface as a traceback.

Errors of the device agent (edgesynth.agent.errors: ConfigError, SealedError,
...) are device code, which cannot import this module; the library converts
the ones that can reach it (an invalid config) into InputError at the
boundary, so callers catch EdgesynthError alone.
"""


class EdgesynthError(Exception):
    """Base class for every user-facing error."""


class InputError(EdgesynthError):
    """A value, option or input file is malformed (messages name options as
    the command line spells them: ``--ram`` is the library's ``ram=``)."""


class ColumnNotFound(InputError):
    """A data file has no column of the name asked for."""


class EvaluationInputError(InputError, ValueError):
    """Bad arrays or bounds given to an evaluation function: a ``ValueError``
    for array code and an InputError for everything else."""


class FrameError(EdgesynthError):
    """A release frame is malformed, unauthenticated or inconsistent."""


class TruncatedFrame(FrameError):
    """The bytes end before the frame does."""


class BadEnvelope(FrameError):
    """The envelope (magic, device id, lengths, tag) is malformed."""


class BadTag(FrameError):
    """The HMAC tag is missing or does not verify."""


class Refused(BadTag):
    """Raised by a ``key_for`` (e.g. Keyring.key_for) for a device whose
    frames are refused for good, such as one revoked in the keyring; parse_frame
    lets it through as the frame's error. The message may name host files (for
    local errors); ``public`` says why without them (a device's receipt),
    and is the message itself when not given (a message relabelled by a reader)."""

    def __init__(self, message, public=None):
        super().__init__(message)
        self.public = message if public is None else public

    def __reduce__(self):  # pickled by ingest's verify workers: two arguments, not self.args
        return type(self), (str(self), self.public)


class BadPayload(FrameError):
    """The payload is not valid msgpack within the decoding limits."""


class SchemaError(FrameError):
    """The payload decodes but violates the release schema."""


class MergeError(EdgesynthError):
    """Releases cannot be merged (different public configurations)."""


class InversionError(EdgesynthError):
    """The profile's noise matrix is not safely invertible for these parameters."""


class StoreError(EdgesynthError):
    """The store cannot be opened or read, or is not an edgesynth store."""


class StoreWriteError(StoreError):
    """A frame's transaction failed (disk full, I/O error, lock timeout): that
    frame is not stored; every frame committed before it still is."""


class IngestStopped(EdgesynthError):
    """The store could not take a frame; the message says what is safe and what to do."""
