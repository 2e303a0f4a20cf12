"""Loopback ports for the tests' servers: from this worker's share, below the ephemeral range, and never
the same port twice before a server could bind the first."""

from __future__ import annotations

import random

from testbed.processes import SINGLE_PORTS, free_port, port_free, worker_share


class Scripted(random.Random):
    """Chooses the given ports in order, each twice: a draw that took a port would take it again."""

    def __init__(self, ports: list[int]) -> None:
        super().__init__(0)
        self.queue = [p for port in ports for p in (port, port)]

    def choice(self, seq):
        return self.queue.pop(0)


def test_two_draws_before_either_port_is_bound_give_two_ports():
    share = worker_share(SINGLE_PORTS)
    candidates = [port for port in share[:200] if port_free(port)][:40]
    rng = Scripted(candidates)
    first, second = free_port(rng), free_port(rng)
    assert first != second
    assert {first, second} <= set(candidates)
    assert all(port in share and port < 32768 for port in (first, second))
