"""``max.connections``: how many client connections the broker holds at once (Kafka's ConnectionQuotas).

The acceptor takes a slot before accepting and the processor gives it back
when the connection closes. At the limit the acceptor stops accepting, as
Kafka's does: new clients wait in the listen backlog until a slot frees
(or give up by their own connect timeout) instead of being refused.
"""

from __future__ import annotations

import threading


class ConnectionQuotas:
    """A counter of open connections with a ceiling."""

    def __init__(self, max_connections: int) -> None:
        if max_connections < 0:
            raise ValueError(f"ConnectionQuotas: max_connections must be >= 0, got {max_connections}")
        self.max_connections = max_connections
        self._count = 0
        self._changed = threading.Condition()

    @property
    def count(self) -> int:
        with self._changed:
            return self._count

    def wait_for_slot(self, timeout_s: float) -> bool:
        """Block until a connection may be accepted; False if none freed within ``timeout_s``."""
        with self._changed:
            return self._changed.wait_for(lambda: self._count < self.max_connections, timeout_s)

    def inc(self) -> bool:
        """Take a slot for an accepted connection; False (nothing taken) when the broker is full."""
        with self._changed:
            if self._count >= self.max_connections:
                return False
            self._count += 1
            return True

    def dec(self) -> None:
        """Give back the slot of a closed connection."""
        with self._changed:
            if self._count <= 0:
                raise AssertionError("ConnectionQuotas: more connections closed than accepted")
            self._count -= 1
            self._changed.notify_all()
