"""The seglog broker: logs, the log manager, timers and purgatory, the embedded Broker."""

from .broker import Broker

__all__ = ["Broker"]
