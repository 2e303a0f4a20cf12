"""Reading a broker's metrics listener over HTTP as Prometheus does: ``get`` one path, ``scrape`` /metrics into
samples parsed by ``prometheus_client``'s own parser."""

from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

TIMEOUT_S = 10


@dataclass(frozen=True)
class Reply:
    status: int
    content_type: str
    body: str


def get(url: str, headers: dict[str, str] | None = None) -> Reply:
    """One GET; error statuses are replies too."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return Reply(response.status, response.headers.get("Content-Type", ""), response.read().decode())
    except urllib.error.HTTPError as exc:
        return Reply(exc.code, exc.headers.get("Content-Type", ""), exc.read().decode())


class Samples:
    """The samples of one scrape, looked up by sample name and labels."""

    def __init__(self, text: str) -> None:
        self.families = {family.name: family for family in text_string_to_metric_families(text)}
        self._samples = [sample for family in self.families.values() for sample in family.samples]

    def all(self, name: str, **labels: str) -> list:
        return [s for s in self._samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]

    def value(self, name: str, **labels: str) -> float:
        """The one sample of ``name`` with ``labels`` (others may carry more labels)."""
        found = self.all(name, **labels)
        assert len(found) == 1, f"{name}{labels}: {len(found)} samples: {found}"
        return found[0].value

    def total(self, name: str, **labels: str) -> float:
        return sum(s.value for s in self.all(name, **labels))


def scrape(base_url: str) -> Samples:
    reply = get(base_url + "/metrics")
    assert reply.status == 200, reply
    return Samples(reply.body)
