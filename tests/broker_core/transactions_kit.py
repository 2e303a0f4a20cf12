"""Writing committed, aborted and open transactions through a ``Broker`` (embedded, or a running
server's), and what read_committed and read_uncommitted readers must then see."""

from __future__ import annotations

from dataclasses import dataclass, field

from broker_core import Broker


@dataclass
class TransactionalWriter:
    """Transactional and plain batches to one partition; remembers every data record's offset and fate."""

    broker: Broker
    topic: str
    partition: int = 0
    compression: str = "none"
    sequences: dict[int, int] = field(default_factory=dict)
    pending: dict[int, list[tuple[int, str]]] = field(default_factory=dict)  # producer id -> its open records
    records: list[tuple[int, str, str]] = field(default_factory=list)  # (offset, value, fate)

    def plain(self, *values: str) -> None:
        written = self.broker.produce(self.topic, [(b"k", v.encode()) for v in values], partition=self.partition,
                                      compression=self.compression)
        self.records.extend((m.offset, v, "plain") for m, v in zip(written, values))

    def send(self, producer_id: int, *values: str) -> None:
        """One transactional batch of ``producer_id`` (its transaction begins with the first)."""
        written = self.broker.produce(self.topic, [(b"k", v.encode()) for v in values], partition=self.partition,
                                      compression=self.compression, producer_id=producer_id, producer_epoch=0,
                                      base_sequence=self.sequences.get(producer_id, 0), transactional=True)
        self.sequences[producer_id] = self.sequences.get(producer_id, 0) + len(values)
        self.pending.setdefault(producer_id, []).extend((m.offset, v) for m, v in zip(written, values))

    def end(self, producer_id: int, commit: bool) -> None:
        self.broker.append_control_marker(self.topic, self.partition, producer_id, 0, 0, commit)
        fate = "committed" if commit else "aborted"
        self.records.extend((o, v, fate) for o, v in self.pending.pop(producer_id))

    @property
    def last_stable_offset(self) -> int:
        firsts = [records[0][0] for records in self.pending.values() if records]
        end = self.broker.list_offsets(self.topic, self.partition, "latest").offset
        return min(firsts, default=end)

    def values(self, *fates: str, below: int | None = None) -> list[str]:
        """The values of ``fates`` (open: still pending), in offset order, below offset ``below``."""
        found = [(o, v, f) for o, v, f in self.records]
        found += [(o, v, "open") for records in self.pending.values() for o, v in records]
        return [v for o, v, f in sorted(found) if f in fates and (below is None or o < below)]

    def committed_values(self) -> list[str]:
        """What a read_committed reader sees: plain and committed records below the last stable offset."""
        return self.values("plain", "committed", below=self.last_stable_offset)

    def data_values(self) -> list[str]:
        """What a read_uncommitted reader sees: every data record, no control record."""
        return self.values("plain", "committed", "aborted", "open")


def write_mixed_transactions(writer: TransactionalWriter, rounds: int = 3) -> TransactionalWriter:
    """Committed and aborted transactions interleaved with each other and with plain records, an
    aborted one of ``rounds`` batches, and one left open, followed by records (a committed
    transaction among them) that read_committed readers must not see until it ends."""
    tag = f"{writer.topic}-{writer.partition}"
    writer.plain(f"{tag}-plain-a", f"{tag}-plain-b")
    for n in range(rounds):
        writer.send(1, f"{tag}-committed-1-{n}", f"{tag}-committed-1-{n}x")
        writer.send(2, f"{tag}-aborted-2-{n}")
        writer.plain(f"{tag}-plain-{n}")
    writer.end(1, commit=True)
    writer.end(2, commit=False)
    for n in range(rounds):
        writer.send(3, *(f"{tag}-aborted-3-{n}-{i}" for i in range(3)))
    writer.end(3, commit=False)
    writer.send(4, f"{tag}-committed-4")
    writer.end(4, commit=True)
    writer.send(5, f"{tag}-open-5")
    writer.plain(f"{tag}-after-open")
    writer.send(6, f"{tag}-committed-6-after-open")
    writer.end(6, commit=True)
    return writer
