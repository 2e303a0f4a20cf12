"""A topic as a broker knows it: name, topic id, partition count and configuration overrides."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    topic_id: str
    partitions: int
    config: dict[str, str] = field(default_factory=dict)  # overrides of the broker defaults

    def to_json(self) -> dict:
        return {"name": self.name, "topic_id": self.topic_id, "partitions": self.partitions,
                "config": dict(sorted(self.config.items()))}

    @classmethod
    def from_json(cls, doc: dict) -> "TopicMetadata":
        return cls(doc["name"], doc["topic_id"], int(doc["partitions"]), {k: str(v) for k, v in doc["config"].items()})
