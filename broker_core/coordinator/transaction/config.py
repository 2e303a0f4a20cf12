"""The transaction coordinator's settings, with Kafka's names and defaults, taken from the broker's configuration."""

from __future__ import annotations

from dataclasses import dataclass

from ...config import BrokerConfig

__all__ = ["TransactionConfig", "DEFAULT_TRANSACTION_STATE_LOG_PARTITIONS"]

#: Kafka's default ``transaction.state.log.num.partitions``.
DEFAULT_TRANSACTION_STATE_LOG_PARTITIONS = 50


@dataclass(frozen=True)
class TransactionConfig:
    """Kafka's TransactionConfig in one record; each field is the Kafka key with dots as underscores."""

    transaction_max_timeout_ms: int = 15 * 60_000
    transactional_id_expiration_ms: int = 7 * 24 * 3_600_000
    transaction_state_log_num_partitions: int = DEFAULT_TRANSACTION_STATE_LOG_PARTITIONS
    transaction_state_log_segment_bytes: int = 100 * 1024 * 1024
    transaction_state_log_load_buffer_size: int = 5 * 1024 * 1024
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if value < 1:
                raise ValueError(f"{name.replace('_', '.')} must be at least 1, not {value}")

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> TransactionConfig:
        return cls(
            transaction_max_timeout_ms=config.transaction_max_timeout_ms,
            transactional_id_expiration_ms=config.transactional_id_expiration_ms,
            transaction_state_log_num_partitions=config.transaction_state_log_num_partitions,
            transaction_state_log_segment_bytes=config.transaction_state_log_segment_bytes,
            transaction_state_log_load_buffer_size=config.transaction_state_log_load_buffer_size,
            transaction_abort_timed_out_transaction_cleanup_interval_ms=(
                config.transaction_abort_timed_out_transaction_cleanup_interval_ms),
            transaction_remove_expired_transaction_cleanup_interval_ms=(
                config.transaction_remove_expired_transaction_cleanup_interval_ms),
        )
