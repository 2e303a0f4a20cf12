"""The seglog broker: logs, the log manager, timers and purgatory, the embedded Broker."""

__all__ = ["Broker"]


def __getattr__(name: str):
    # Imported on first use: readers that need only a corner of the package (Spark's Python workers
    # importing the connector, which uses the clock and the client) do not pay for the whole broker.
    if name == "Broker":
        from .broker import Broker

        return Broker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
