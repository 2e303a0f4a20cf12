"""The coordinator's settings, with Kafka's names and defaults, taken from the broker's configuration."""

from __future__ import annotations

from dataclasses import dataclass

from ...config import BrokerConfig
from ...offsets_topic import DEFAULT_OFFSETS_TOPIC_PARTITIONS

__all__ = ["GroupCoordinatorConfig", "NEW_MEMBER_JOIN_TIMEOUT_MS", "OFFSET_METADATA_MAX_BYTES"]

_MS_PER_MINUTE = 60_000
_INT_MAX = 2**31 - 1

#: Kafka's default ``offset.metadata.max.bytes``: the longest metadata string a commit may carry.
OFFSET_METADATA_MAX_BYTES = 4096

#: How long a new member's JoinGroup may stay parked before the member is dropped (Kafka's value).
#: A new member cannot heartbeat, and its client retries a JoinGroup that timed out, so without
#: this limit every retry would leave a defunct member in a long rebalance.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * _MS_PER_MINUTE


@dataclass(frozen=True)
class GroupCoordinatorConfig:
    """Kafka's GroupConfig and OffsetConfig in one record; each field is the Kafka key with dots as underscores."""

    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 30 * _MS_PER_MINUTE
    group_max_size: int = _INT_MAX
    group_initial_rebalance_delay_ms: int = 3000
    offsets_retention_minutes: int = 7 * 24 * 60
    offsets_retention_check_interval_ms: int = 10 * _MS_PER_MINUTE
    offsets_topic_num_partitions: int = DEFAULT_OFFSETS_TOPIC_PARTITIONS
    offset_metadata_max_bytes: int = OFFSET_METADATA_MAX_BYTES

    def __post_init__(self) -> None:
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            raise ValueError(f"group.min.session.timeout.ms={self.group_min_session_timeout_ms} is above "
                             f"group.max.session.timeout.ms={self.group_max_session_timeout_ms}")
        for name in ("group_max_size", "offsets_retention_minutes", "offsets_retention_check_interval_ms",
                     "offsets_topic_num_partitions"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name.replace('_', '.')} must be at least 1, not {getattr(self, name)}")
        if self.group_initial_rebalance_delay_ms < 0:
            raise ValueError(f"group.initial.rebalance.delay.ms must be >= 0, "
                             f"not {self.group_initial_rebalance_delay_ms}")

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * _MS_PER_MINUTE

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> GroupCoordinatorConfig:
        """The coordinator's part of a broker configuration.

        ``offset.metadata.max.bytes`` is not a BrokerConfig field yet; given in
        the broker's properties it arrives among the unknown ``extra`` keys.
        """
        metadata_max = config.extra.get("offset.metadata.max.bytes")
        return cls(
            group_min_session_timeout_ms=config.group_min_session_timeout_ms,
            group_max_session_timeout_ms=config.group_max_session_timeout_ms,
            group_max_size=config.group_max_size,
            group_initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            offsets_retention_minutes=config.offsets_retention_minutes,
            offsets_retention_check_interval_ms=config.offsets_retention_check_interval_ms,
            offsets_topic_num_partitions=config.offsets_topic_num_partitions,
            offset_metadata_max_bytes=OFFSET_METADATA_MAX_BYTES if metadata_max is None else int(metadata_max),
        )
