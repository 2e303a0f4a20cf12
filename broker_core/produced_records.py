"""What a producer hands the embedded broker and what it gets back: records in the forms
``produce`` accepts, and where each landed (the Java client's ``RecordMetadata``)."""

from __future__ import annotations

from dataclasses import dataclass

from format.record import SimpleRecord

__all__ = ["RecordMetadata", "as_record"]


@dataclass(frozen=True)
class RecordMetadata:
    """Where a produced record landed (the Java client's RecordMetadata)."""

    topic: str
    partition: int
    offset: int
    timestamp: int


def as_record(item) -> SimpleRecord:
    """A ``SimpleRecord`` as given, bytes (or None) as a value without key, or a (key, value) pair."""
    if isinstance(item, SimpleRecord):
        return item
    if isinstance(item, (bytes, bytearray, memoryview)) or item is None:
        return SimpleRecord(None if item is None else bytes(item))
    if isinstance(item, tuple) and len(item) == 2:
        key, value = item
        return SimpleRecord(value, key)
    raise TypeError(f"cannot produce {type(item).__name__}: give SimpleRecord, bytes or (key, value)")
