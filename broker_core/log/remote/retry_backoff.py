"""How long to wait before trying the remote tier again after failures in a row (Kafka's exponential retry
backoff, as ``remote.log.manager.task.retry.backoff.ms`` and ``.backoff.max.ms`` configure it).

The wait counts from when the failed attempt gave up, not from when it began: an unreachable endpoint takes
seconds to give up on, longer than the first waits."""

from __future__ import annotations


def retry_backoff_ms(failures: int, initial_ms: int, max_ms: int) -> int:
    """``initial_ms`` after the first failure in a row, twice as long after each one more, at most ``max_ms``."""
    return min(initial_ms * 2 ** (failures - 1), max_ms)
