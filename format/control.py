"""Control records: the transaction markers (and other control types) Kafka
writes in batches whose control flag is set.

    key:   version int16 (0), type int16
    value: version int16 (0), coordinatorEpoch int32   (for ABORT / COMMIT)
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from .errors import CorruptRecordError

_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")
CURRENT_CONTROL_KEY_VERSION = 0
CURRENT_END_TXN_MARKER_VERSION = 0


class ControlRecordType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6
    UNKNOWN = -1

    @classmethod
    def parse_key(cls, key: bytes | None) -> "ControlRecordType":
        if key is None or len(key) < _KEY.size:
            raise CorruptRecordError(f"control record key of {0 if key is None else len(key)} bytes is too short")
        version, type_id = _KEY.unpack_from(key)
        if version < 0:
            raise CorruptRecordError(f"invalid control record key version {version}")
        try:
            return cls(type_id)
        except ValueError:
            return cls.UNKNOWN

    def key_bytes(self) -> bytes:
        return _KEY.pack(CURRENT_CONTROL_KEY_VERSION, int(self))


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    """An ABORT or COMMIT marker and the coordinator epoch that wrote it."""

    control_type: ControlRecordType
    coordinator_epoch: int

    def __post_init__(self) -> None:
        if self.control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            raise ValueError(f"an end transaction marker is ABORT or COMMIT, not {self.control_type.name}")

    def key_bytes(self) -> bytes:
        return self.control_type.key_bytes()

    def value_bytes(self) -> bytes:
        return _END_TXN_VALUE.pack(CURRENT_END_TXN_MARKER_VERSION, self.coordinator_epoch)

    @classmethod
    def from_record(cls, key: bytes | None, value: bytes | None) -> "EndTransactionMarker":
        control_type = ControlRecordType.parse_key(key)
        if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            raise CorruptRecordError(f"control record of type {control_type.name} is not a transaction marker")
        if value is None or len(value) < _END_TXN_VALUE.size:
            raise CorruptRecordError("transaction marker value is too short")
        version, coordinator_epoch = _END_TXN_VALUE.unpack_from(value)
        if version < 0:
            raise CorruptRecordError(f"invalid transaction marker version {version}")
        return cls(control_type, coordinator_epoch)
