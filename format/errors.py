"""Errors raised by the storage format.

Every error that comes from reading bytes carries where they came from: the
file (or ``None`` for an in-memory buffer) and the byte position of the batch
or entry at fault, so an operator can find the damage with ``seglog dump``.
"""

from __future__ import annotations


class FormatError(Exception):
    """Base class of every error raised by ``format``."""


class CorruptRecordError(FormatError):
    """Bytes that fail validation: bad magic, CRC mismatch, bad lengths, truncation.

    Kafka's name for this is CorruptRecordException (error code 2).
    """

    def __init__(self, reason: str, *, path: str | None = None, position: int | None = None):
        self.reason = reason
        self.path = path
        self.position = position
        super().__init__(self._describe())

    def _describe(self) -> str:
        where = []
        if self.path is not None:
            where.append(str(self.path))
        if self.position is not None:
            where.append(f"position {self.position}")
        return f"{': '.join(where)}: {self.reason}" if where else self.reason

    def located(self, path: str | None, base_position: int) -> "CorruptRecordError":
        """The same error, re-anchored at a file and an absolute position."""
        position = base_position + (self.position or 0)
        return type(self)(self.reason, path=path if path is not None else self.path, position=position)


class InvalidRecordError(FormatError):
    """A well-formed batch that breaks a rule (Kafka's InvalidRecordException)."""


class UnsupportedCompressionError(FormatError):
    """A compression codec id outside Kafka's 0..4."""


class CorruptIndexError(FormatError):
    """An index file that fails its sanity check (Kafka's CorruptIndexException)."""

    def __init__(self, reason: str, *, path: str | None = None):
        self.reason = reason
        self.path = path
        super().__init__(f"{path}: {reason}" if path else reason)


class InvalidOffsetError(FormatError):
    """An index append that does not move forward (Kafka's InvalidOffsetException)."""


class IndexFullError(FormatError):
    """An append to an index that has no room left."""


class InvalidTopicError(FormatError):
    """A topic name that breaks Kafka's naming rules (InvalidTopicException)."""


class CheckpointError(FormatError):
    """A checkpoint file that cannot be parsed."""
