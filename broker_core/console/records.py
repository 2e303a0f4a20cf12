"""The record browser: one page of a partition's records from an offset, or from the first offset at or
after a timestamp (found through the time index), with keys, header values and values rendered as text,
JSON or hex. A page is one bounded fetch: never more than ``PAGE_MAX_BYTES`` read, ``MAX_PAGE_RECORDS``
shown."""

from __future__ import annotations

import json
from dataclasses import dataclass

from format.record import Record
from format.record_batch import iter_batches

from ..broker import Broker
from ..errors import InvalidRequestError

MAX_PAGE_RECORDS = 100
PAGE_MAX_BYTES = 256 * 1024
FORMATS = ("text", "json", "hex")


@dataclass(frozen=True)
class RenderedRecord:
    offset: int
    timestamp: int
    key: str | None
    value: str | None
    headers: tuple[tuple[str, str | None], ...]
    value_size: int  # bytes; -1 for a null value (a tombstone)


@dataclass(frozen=True)
class RecordPage:
    topic: str
    partition: int
    format: str
    start_offset: int  # the offset asked for, or the one the timestamp led to
    next_offset: int  # where the next page starts
    log_start_offset: int
    high_watermark: int
    records: tuple[RenderedRecord, ...]


def render(data: bytes | None, fmt: str) -> str | None:
    """``data`` as ``fmt`` shows it: text (UTF-8, undecodable bytes replaced), JSON (pretty-printed, as text
    when it is not JSON) or hex."""
    if data is None:
        return None
    if fmt == "hex":
        return data.hex(" ")
    text = data.decode("utf-8", errors="replace")
    if fmt == "json":
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            return text
    return text


def _rendered(record: Record, fmt: str) -> RenderedRecord:
    return RenderedRecord(record.offset, record.timestamp, render(record.key, fmt), render(record.value, fmt),
                          tuple((h.key, render(h.value, fmt)) for h in record.headers),
                          -1 if record.value is None else len(record.value))


def _last_offset(batches: bytes) -> int:
    """The last offset of the last batch (a control batch or a compacted gap included)."""
    last = -1
    for batch in iter_batches(batches):
        last = batch.header.last_offset
    return last


def read_page(broker: Broker, topic: str, partition: int, *, offset: int | None = None,
              timestamp: int | None = None, limit: int = 20, fmt: str = "text") -> RecordPage:
    """Records of ``topic``-``partition`` from ``offset`` (the log start offset when neither is given) or
    from the first at or after ``timestamp``, at most ``limit`` of them."""
    if fmt not in FORMATS:
        raise InvalidRequestError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
    if not 1 <= limit <= MAX_PAGE_RECORDS:
        raise InvalidRequestError(f"limit {limit} is outside 1..{MAX_PAGE_RECORDS}")
    if timestamp is not None:
        found = broker.list_offsets(topic, partition, timestamp)
        start = found.offset if found is not None else broker.list_offsets(topic, partition, "latest").offset
    elif offset is not None:
        start = offset
    else:
        start = broker.list_offsets(topic, partition, "earliest").offset
    records: list[Record] = []
    position, budget = start, PAGE_MAX_BYTES
    while True:  # a fetch stops at a segment's end: the page may go on in the next segment
        fetched = broker.fetch(topic, partition, position, budget)
        records.extend(fetched.decoded(from_offset=position)[:limit - len(records)])
        budget -= len(fetched.records)
        if not fetched.records or len(records) >= limit or budget <= 0:
            break
        position = _last_offset(fetched.records) + 1
        if position >= fetched.high_watermark:
            break
    next_offset = records[-1].offset + 1 if records else start
    return RecordPage(topic, partition, fmt, start, next_offset, fetched.log_start_offset, fetched.high_watermark,
                      tuple(_rendered(r, fmt) for r in records))
