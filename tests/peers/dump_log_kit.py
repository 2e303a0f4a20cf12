"""Reading what ``kafka-dump-log.sh`` (Kafka's DumpLogSegments) and ``seglog dump`` print: the
same lines, one ``Dumping <file>`` section per file, a line per batch and, with
``--print-data-log``, a ``| offset: …`` line per record. Keys and values are taken as the
tools print them (text), so the records written for these tests are ASCII without spaces."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from jvm.apache_kafka import run_tool

_RECORD = re.compile(r"^\| offset: (?P<offset>-?\d+) (?:CreateTime|LogAppendTime|NoTimestampType): (?P<ts>-?\d+) "
                     r"keySize: (?P<key_size>-?\d+) valueSize: (?P<value_size>-?\d+) sequence: -?\d+ "
                     r"headerKeys: \[(?P<headers>[^\]]*)\](?: key: (?P<key>\S*))?(?: payload: (?P<payload>.*))?$")
_BATCH = re.compile(r"^baseOffset: (?P<base>-?\d+) lastOffset: (?P<last>-?\d+) count: (?P<count>\d+) .*"
                    r"isTransactional: (?P<txn>\w+) isControl: (?P<control>\w+) .*compresscodec: (?P<codec>\w+) "
                    r"crc: \d+ isvalid: (?P<valid>\w+)")


@dataclass(frozen=True)
class DumpedRecord:
    offset: int
    timestamp: int
    key: str | None
    value: str | None
    header_keys: tuple[str, ...]


@dataclass
class DumpedBatch:
    base_offset: int
    last_offset: int
    count: int
    codec: str
    is_control: bool
    is_valid: bool
    records: list[DumpedRecord] = field(default_factory=list)


@dataclass
class DumpedFile:
    path: str
    lines: list[str] = field(default_factory=list)
    batches: list[DumpedBatch] = field(default_factory=list)

    @property
    def records(self) -> list[DumpedRecord]:
        return [r for b in self.batches if not b.is_control for r in b.records]


def parse_dump(output: str) -> dict[str, DumpedFile]:
    """The tool's standard output by file dumped."""
    files: dict[str, DumpedFile] = {}
    current: DumpedFile | None = None
    for line in output.splitlines():
        if line.startswith("Dumping "):
            current = files.setdefault(line[len("Dumping "):].strip(), DumpedFile(line[len("Dumping "):].strip()))
            continue
        if current is None:
            continue
        current.lines.append(line)
        batch = _BATCH.match(line)
        if batch:
            current.batches.append(DumpedBatch(int(batch["base"]), int(batch["last"]), int(batch["count"]),
                                               batch["codec"], batch["control"] == "true", batch["valid"] == "true"))
            continue
        record = _RECORD.match(line)
        if record and current.batches:
            current.batches[-1].records.append(DumpedRecord(
                int(record["offset"]), int(record["ts"]),
                None if int(record["key_size"]) < 0 else record["key"] or "",
                None if int(record["value_size"]) < 0 else record["payload"] or "",
                tuple(k for k in record["headers"].split(",") if k)))
    return files


def kafka_dump_log(files: list[str], *flags: str) -> tuple[dict[str, DumpedFile], str]:
    """``kafka-dump-log.sh --files …`` with ``flags``, in one JVM: the parsed output and standard
    error; fails on a non-zero exit."""
    done = run_tool("kafka-dump-log.sh", *flags, "--files", ",".join(str(f) for f in files), timeout=180)
    assert done.returncode == 0, f"kafka-dump-log.sh {' '.join(flags)} exited {done.returncode}: {done.stderr[-3000:]}"
    return parse_dump(done.stdout), done.stderr


def as_text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("ascii")
