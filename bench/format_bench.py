"""Benchmarks of the storage format on one core: Arrow decoding, batch encoding, offset lookup.

Figures, each against kafka-python in the same run on the same bytes where a
peer exists (absolute rates drift on shared machines; ratios hold better):

* decoding to Arrow (``format.arrow.decode_to_arrow``) in records/s, reading a
  log in ~4 MiB chunks of whole batches as a Spark task reads a segment;
  the peer is kafka-python's ``MemoryRecords`` / ``DefaultRecordBatch``,
  checking each batch's CRC (the consumer's ``check.crcs`` default) and
  touching key, value, offset and timestamp of every record;
* encoding batches (``format.record_batch.build_batch``) in records/s; the peer
  is kafka-python's ``DefaultRecordBatchBuilder``;
* offset lookup latency in a 1 GiB segment (``segment.bytes`` default) at the
  default ``index.interval.bytes`` of 4096: ``LogSegment.translate_offset``
  and ``OffsetIndex.lookup`` alone. No peer.

Records are 100-byte JSON-like values with 10-byte keys. Batches hold 135
records (what fills Kafka's default ``batch.size`` of 16384 bytes) or 1000.

Run ``python bench/format_bench.py`` (``make bench``); ``--quick`` for a smoke
run, ``--markdown`` for rows to paste into BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import kafka
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from format.arrow import decode_to_arrow
from format.compression import CompressionType
from format.record import SimpleRecord
from format.record_batch import build_batch, iter_batches, set_base_offset
from format.segment import LogSegment

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (GIB, VALUE_SIZE, Environment, Timing, argument_parser, date_and_command,  # noqa: E402
                          environment, event_record, log, pinning, print_environment, print_header,
                          print_markdown_header, print_markdown_row, rate, scratch_directory, short_of_disk, timed)

# The most such records a batch of Kafka's default batch.size (16384 bytes) holds.
DEFAULT_BATCH_RECORDS = 135
LARGE_BATCH_RECORDS = 1000
CHUNK_BYTES = 4 * 1024 * 1024
INDEX_INTERVAL_BYTES = 4096
BASE_TIMESTAMP = 1_795_000_000_000
# kafka-python's codec ids in the batch attributes (none, lz4).
KAFKA_PYTHON_CODEC = {CompressionType.NONE: 0, CompressionType.LZ4: 3}
TOPIC = "bench"


@dataclass(frozen=True)
class RateRow:
    """One throughput figure: seglog, and kafka-python where it has a peer."""

    figure: str
    seglog: Timing
    peer: Timing | None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        return None if self.peer is None else self.seglog.best_rate / self.peer.best_rate


@dataclass(frozen=True)
class LatencyRow:
    figure: str
    p50_us: float
    p99_us: float
    mean_us: float
    samples: int


# --- environment ------------------------------------------------------------------


def format_environment(pinned: str) -> Environment:
    return environment([
        ("pinned", pinned),
        ("libraries", f"numpy {np.__version__}, pyarrow {pa.__version__}, kafka-python {kafka.__version__}"),
    ], with_memory=False)


# --- input ------------------------------------------------------------------------


def make_records(count: int, seed: int = 42) -> list[SimpleRecord]:
    """Records as an application might produce: small JSON events padded to 100 bytes.

    Compressible the way real events are (shared field names, varying values),
    so lz4 has realistic work, unlike with constant or random bytes.
    """
    rng = random.Random(seed)
    return [event_record(rng, BASE_TIMESTAMP + i, ts_field=True) for i in range(count)]


def groups_of(records: Sequence[SimpleRecord], size: int) -> list[Sequence[SimpleRecord]]:
    return [records[i:i + size] for i in range(0, len(records), size)]


def encode_log(groups: Sequence[Sequence[SimpleRecord]], codec: CompressionType) -> list[bytes]:
    batches, offset = [], 0
    for group in groups:
        batches.append(build_batch(group, base_offset=offset, compression=codec))
        offset += len(group)
    return batches


def chunk(batches: Sequence[bytes], chunk_bytes: int = CHUNK_BYTES) -> list[bytes]:
    """Whole batches laid end to end, in chunks of at most ``chunk_bytes`` (one batch if bigger)."""
    chunks, current, size = [], [], 0
    for batch in batches:
        if current and size + len(batch) > chunk_bytes:
            chunks.append(b"".join(current))
            current, size = [], 0
        current.append(batch)
        size += len(batch)
    if current:
        chunks.append(b"".join(current))
    return chunks


# --- measuring ----------------------------------------------------------------------


def measure(run: Callable[[], int], expected_records: int, runs: int) -> Timing:
    """Time ``run`` (which returns how many records it handled) after one warm-up run."""
    got = run()
    if got != expected_records:
        raise AssertionError(f"benchmark handled {got} records, expected {expected_records}")
    return Timing(expected_records, tuple(timed(run)[0] for _ in range(runs)))


def seglog_decode(chunks: Sequence[bytes]) -> int:
    rows = 0
    for data in chunks:
        rows += decode_to_arrow(data, topic=TOPIC, partition=0).num_rows
    return rows


def kafka_python_decode(chunks: Sequence[bytes]) -> int:
    """What a kafka-python consumer does per fetched chunk, with its check.crcs default."""
    count = 0
    for data in chunks:
        records = MemoryRecords(data)
        while (batch := records.next_batch()) is not None:
            if not batch.validate_crc():
                raise AssertionError(f"kafka-python: CRC mismatch in batch at offset {batch.base_offset}")
            for record in batch:
                key, value, offset, timestamp = record.key, record.value, record.offset, record.timestamp
                count += 1
    return count


def seglog_encode(groups: Sequence[Sequence[SimpleRecord]], codec: CompressionType) -> int:
    count = 0
    for group in groups:
        build_batch(group, base_offset=count, compression=codec)
        count += len(group)
    return count


def kafka_python_encode(groups: Sequence[Sequence[SimpleRecord]], codec: CompressionType) -> int:
    count = 0
    for group in groups:
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=KAFKA_PYTHON_CODEC[codec],
                                            is_transactional=False, producer_id=-1, producer_epoch=-1,
                                            base_sequence=-1, batch_size=1 << 30)
        for delta, r in enumerate(group):
            if builder.append(delta, timestamp=r.timestamp, key=r.key, value=r.value, headers=[]) is None:
                raise AssertionError("kafka-python: batch builder refused a record")
        builder.build()
        count += len(group)
    return count


def check_same_records(chunks: Sequence[bytes], sample: Sequence[SimpleRecord]) -> None:
    """Both decoders must agree with the input before their speeds mean anything."""
    table = decode_to_arrow(chunks[0], topic=TOPIC, partition=0)
    values, keys = table.column("value"), table.column("key")
    batch = MemoryRecords(chunks[0]).next_batch()
    for i, theirs in zip(range(len(sample)), batch):
        r = sample[i]
        assert values[i].as_py() == r.value == theirs.value, f"record {i}: values differ"
        assert keys[i].as_py() == r.key == theirs.key, f"record {i}: keys differ"
        assert table.column("offset")[i].as_py() == i == theirs.offset, f"record {i}: offsets differ"


def cases(records: Sequence[SimpleRecord],
          what: str) -> Iterator[tuple[str, int, list[Sequence[SimpleRecord]], CompressionType]]:
    """Each figure of ``what``: its name, records per batch, ``records`` in groups of that many, and codec."""
    for per_batch in (DEFAULT_BATCH_RECORDS, LARGE_BATCH_RECORDS):
        groups = groups_of(records, per_batch)
        for codec in (CompressionType.NONE, CompressionType.LZ4):
            yield f"{what}, {per_batch} rec/batch, {codec.name.lower()}", per_batch, groups, codec


def decode_figures(records: list[SimpleRecord], peer_records: int, runs: int, log) -> list[RateRow]:
    rows = []
    for name, per_batch, groups, codec in cases(records, "decode to Arrow"):
        log(f"  {name}: building input")
        batches = encode_log(groups, codec)
        chunks = chunk(batches)
        check_same_records(chunks, records[:per_batch])
        total = len(records)
        log_bytes = sum(map(len, batches))
        # kafka-python is slow: time it on the first batches holding >= peer_records records.
        peer_batches = batches[:max(1, -(-peer_records // per_batch))]
        peer_count = sum(len(g) for g in groups[:len(peer_batches)])
        peer_chunks = chunk(peer_batches)
        log(f"  {name}: seglog on {total} records")
        ours = measure(lambda: seglog_decode(chunks), total, runs)
        log(f"  {name}: kafka-python on {peer_count} records")
        theirs = measure(lambda: kafka_python_decode(peer_chunks), peer_count, runs)
        note = (f"{len(chunks)} chunks of <= 4 MiB, {log_bytes / total:.1f} B/record on disk; "
                f"kafka-python timed on {peer_count} records, rate per record")
        rows.append(RateRow(name, ours, theirs, note))
        del batches, chunks, peer_chunks
    return rows


def encode_figures(records: list[SimpleRecord], runs: int, log) -> list[RateRow]:
    rows = []
    for name, _, groups, codec in cases(records, "encode batches"):
        log(f"  {name}")
        ours = measure(lambda: seglog_encode(groups, codec), len(records), runs)
        theirs = measure(lambda: kafka_python_encode(groups, codec), len(records), runs)
        rows.append(RateRow(name, ours, theirs, f"{len(records)} records, both encoders"))
    return rows


def offset_lookup_figures(segment_bytes: int, samples: int, log) -> list[LatencyRow] | str:
    """Build a real segment of ``segment_bytes`` and time random offset lookups in it."""
    short = short_of_disk(tempfile.gettempdir(), 3 * GIB)
    if short:
        return f"skipped: {short}, fewer than 3 GiB"
    template = bytearray(build_batch(make_records(DEFAULT_BATCH_RECORDS, seed=7)))
    (batch,) = iter_batches(template)
    per_batch = batch.header.records_count
    with scratch_directory("seglog-bench-") as directory:
        segment = LogSegment.open(directory, base_offset=0, index_interval_bytes=INDEX_INTERVAL_BYTES)
        try:
            log(f"  writing a {segment_bytes / 1024 ** 2:.0f} MiB segment in {len(template)}-byte batches")
            base_offset = 0
            while segment.size + len(template) <= segment_bytes:
                # baseOffset lies outside the CRC: no re-encoding per batch.
                set_base_offset(template, 0, base_offset)
                segment.append(template)
                base_offset += per_batch
            segment.flush()
            log_end_offset = base_offset
            rng = random.Random(1)
            targets = [rng.randrange(log_end_offset) for _ in range(samples)]
            for target in targets[:200]:  # warm the page cache and the code paths
                segment.translate_offset(target)
            for target in rng.sample(targets, 50):
                found = segment.translate_offset(target)
                assert found is not None and found.offset <= target < found.offset + per_batch, \
                    f"translate_offset({target}) gave {found}"
            described = (f"{segment.size / 1024 ** 2:.0f} MiB, {log_end_offset} offsets, "
                         f"{segment.offset_index.entries} index entries")
            rows = []
            for name, call in (("translate_offset", segment.translate_offset),
                               ("offset_index.lookup", segment.offset_index.lookup)):
                latencies = np.empty(len(targets))
                clock = time.perf_counter_ns
                gc.collect()
                for i, target in enumerate(targets):
                    start = clock()
                    call(target)
                    latencies[i] = clock() - start
                latencies /= 1000.0
                rows.append(LatencyRow(f"{name} in a {described} segment", float(np.percentile(latencies, 50)),
                                       float(np.percentile(latencies, 99)), float(latencies.mean()),
                                       len(targets)))
            return rows
        finally:
            segment.close()


# --- reporting ----------------------------------------------------------------------


def print_table(env: Environment, rate_rows: list[RateRow], latency: list[LatencyRow] | str, runs: int) -> None:
    print_environment(env)
    print(f"\nrecords/s, best of {runs} runs (median); ratio = seglog best / kafka-python best")
    print_header(f"{'figure':<44} {'seglog':>18} {'kafka-python':>18} {'ratio':>7}")
    for row in rate_rows:
        ours = f"{rate(row.seglog.best_rate)} ({rate(row.seglog.median_rate)})"
        theirs = "-" if row.peer is None else f"{rate(row.peer.best_rate)} ({rate(row.peer.median_rate)})"
        ratio = "-" if row.ratio is None else f"{row.ratio:.1f}x"
        print(f"{row.figure:<44} {ours:>18} {theirs:>18} {ratio:>7}")
    for row in rate_rows:
        if row.note:
            print(f"  {row.figure}: {row.note}")
    print("\noffset lookup latency (no peer)")
    if isinstance(latency, str):
        print(f"  {latency}")
    else:
        for row in latency:
            print(f"  {row.figure}: p50 {row.p50_us:.1f} us, p99 {row.p99_us:.1f} us, "
                  f"mean {row.mean_us:.1f} us over {row.samples} random offsets")


def print_markdown(env: Environment, rate_rows: list[RateRow], latency: list[LatencyRow] | str, runs: int) -> None:
    date, command = date_and_command(env)
    for kind in ("decode", "encode"):
        rows = [row for row in rate_rows if row.figure.startswith(kind)]
        if not rows:
            continue
        print_markdown_header(("figure", f"seglog, records/s (best of {runs}; median)",
                               f"kafka-python, records/s (best of {runs}; median)", "ratio (best)", "command", "date"))
        for row in rows:
            ours = f"{rate(row.seglog.best_rate)}; {rate(row.seglog.median_rate)}"
            theirs = "—" if row.peer is None else f"{rate(row.peer.best_rate)}; {rate(row.peer.median_rate)}"
            ratio = "—" if row.ratio is None else f"{row.ratio:.1f}x"
            print_markdown_row((row.figure, ours, theirs, ratio, f"`{command}`", date))
    if not isinstance(latency, str):
        print_markdown_header(("figure", "p50", "p99", "peer", "command", "date"))
        for row in latency:
            print_markdown_row((row.figure, f"{row.p50_us:.1f} µs", f"{row.p99_us:.1f} µs", "—", f"`{command}`", date))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argument_parser(__doc__, "a smoke run: fewer records, 64 MiB segment, 2 runs")
    p.add_argument("--runs", type=int, help="timed runs per figure (default 5, 2 with --quick)")
    p.add_argument("--records", type=int, help="records decoded by seglog (default 1,000,000)")
    p.add_argument("--peer-records", type=int,
                   help="records decoded by kafka-python, whose rate is per record (default 100,000)")
    p.add_argument("--encode-records", type=int, help="records encoded by each encoder (default 200,000)")
    p.add_argument("--segment-mib", type=int, help="segment size for offset lookups (default 1024)")
    p.add_argument("--lookups", type=int, default=10_000, help="random offsets looked up (default 10,000)")
    p.add_argument("--skip", choices=("decode", "encode", "lookup"), action="append", default=[],
                   help="leave a figure out (repeatable)")
    args = p.parse_args(argv)
    quick = args.quick
    args.runs = args.runs or (2 if quick else 5)
    args.records = args.records or (50_000 if quick else 1_000_000)
    args.peer_records = args.peer_records or (10_000 if quick else 100_000)
    args.encode_records = args.encode_records or (10_000 if quick else 200_000)
    args.segment_mib = args.segment_mib or (64 if quick else 1024)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    env = format_environment(pinning(args.pin, args.cpu))
    rate_rows: list[RateRow] = []
    latency: list[LatencyRow] | str = "skipped (--skip lookup)"
    if "decode" not in args.skip:
        log(f"decoding: {args.records} records of {VALUE_SIZE}-byte values")
        rate_rows += decode_figures(make_records(args.records), args.peer_records, args.runs, log)
    if "encode" not in args.skip:
        log(f"encoding: {args.encode_records} records")
        rate_rows += encode_figures(make_records(args.encode_records), args.runs, log)
    if "lookup" not in args.skip:
        log(f"offset lookups: {args.segment_mib} MiB segment")
        latency = offset_lookup_figures(args.segment_mib * 1024 * 1024, args.lookups, log)
    print_table(env, rate_rows, latency, args.runs)
    if args.markdown:
        print_markdown(env, rate_rows, latency, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
