"""Benchmarks of the partition log on one core: append, sequential read and recovery beside the raw file system.

Figures, each against plain Python file I/O in the same run on the same bytes
(absolute rates drift on shared machines; ratios hold better):

* append (``broker_core.log.log.Log.append``, one batch per call as a produce
  request brings it) in MB/s and records/s, up to one full segment
  (``segment.bytes`` default, 1 GiB) so no roll falls inside the figure; the
  peer is ``open(path, "wb")`` and ``f.write(batch)`` of the same batches.
  ``Log.flush`` (fsync) is timed apart, against ``os.fsync`` of the raw file;
* sequential read (``Log.read(offset, 1 MiB)``, following the next offset
  after the last batch returned) over the log the append wrote; the peer is
  buffered ``f.read(1 MiB)`` of the raw file. Both read warm, from the page
  cache: dropping it needs root, so each is read once before it is timed;
* recovery of an unflushed 1 GiB segment: the log is closed without a clean
  shutdown, then ``Log.open(..., recovery_point=0, had_clean_shutdown=False)``
  re-validates every batch (CRC) and rebuilds the indexes. The peer is a
  buffered sequential read of the same ``.log`` file in 1 MiB chunks, the
  least any recovery must do. Warm as well.

Records are 100-byte values with 10-byte keys, in batches of 135 records
(16,268 bytes: what fills Kafka's default ``batch.size`` of 16384) or 8650
records (~1 MiB, just under the default ``max.message.bytes`` of 1,048,588).
Batches come from a small pre-built pool, so encoding is not measured; the
log rewrites their base offsets itself.

Run ``python bench/log_bench.py``; ``--quick`` for a smoke run, ``--markdown``
for rows to paste into BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import time
from dataclasses import dataclass
from typing import Iterator, Sequence

import crc32c

from broker_core.config import LogConfig
from broker_core.log.log import Log
from format import layout
from format.record_batch import LENGTH_OFFSET, LOG_OVERHEAD, BatchHeader, build_batch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (GIB, MIB, Environment, Target, Timing, argument_parser, date_and_command,  # noqa: E402
                          environment, event_record, file_system, log, pinning, print_environment, print_header,
                          print_markdown_header, print_markdown_row, print_markdown_targets, print_targets, rate,
                          scratch_directory, short_of_disk, timed)

# The most such records a batch of Kafka's default batch.size (16384 bytes) holds.
DEFAULT_BATCH_RECORDS = 135
# The most such records (8658) under the default max.message.bytes, less a margin.
LARGE_BATCH_RECORDS = 8650
# Distinct batches per pool: enough that the log never sees one buffer twice in a row.
POOL_BYTES = 16 * 1024 * 1024
MIN_POOL_BATCHES = 8
READ_MAX_BYTES = 1024 * 1024
MIN_FREE_BYTES = 4 * GIB
TOPIC = "bench"


@dataclass(frozen=True)
class Row:
    """One throughput figure: the log, and the raw file system on the same bytes."""

    figure: str
    seglog: Timing
    raw: Timing
    note: str = ""

    @property
    def ratio(self) -> float:
        return self.seglog.best_mb_s / self.raw.best_mb_s


@dataclass(frozen=True)
class Workload:
    """``count`` batches of ``records_per_batch`` records, cycled from ``pool``."""

    name: str
    records_per_batch: int
    pool: tuple[bytes, ...]
    count: int

    @property
    def records(self) -> int:
        return self.count * self.records_per_batch

    @property
    def bytes(self) -> int:
        return sum(len(self.pool[i % len(self.pool)]) for i in range(self.count))

    def batches(self) -> Iterator[bytes]:
        pool, n = self.pool, len(self.pool)
        return (pool[i % n] for i in range(self.count))

    def timing(self, seconds: Sequence[float]) -> Timing:
        """The runs of a figure over all of this workload."""
        return Timing(self.records, tuple(seconds), self.bytes)


# --- environment ------------------------------------------------------------------


def log_environment(pinned: str, directory: str) -> Environment:
    return environment([
        ("pinned", pinned),
        ("files", file_system(directory)),
        ("page cache", "warm: every read and recovery figure reads what is cached (no root to drop it)"),
        ("libraries", f"crc32c {getattr(crc32c, '__version__', 'unknown')}"),
    ])


# --- input ------------------------------------------------------------------------


def make_pool(records_per_batch: int, batches: int, timestamp_ms: int, seed: int = 42) -> tuple[bytes, ...]:
    """Distinct batches of 100-byte JSON-like values, stamped around ``timestamp_ms`` (CreateTime)."""
    rng = random.Random(seed)
    return tuple(build_batch([event_record(rng, timestamp_ms + i) for i in range(records_per_batch)])
                 for _ in range(batches))


def make_workload(name: str, records_per_batch: int, total_bytes: int, config: LogConfig,
                  timestamp_ms: int) -> Workload:
    probe = make_pool(records_per_batch, 1, timestamp_ms, seed=1)[0]
    if len(probe) > config.max_message_bytes:
        raise AssertionError(f"a {records_per_batch}-record batch is {len(probe)} bytes, over max.message.bytes "
                             f"{config.max_message_bytes}")
    batches = max(MIN_POOL_BATCHES, POOL_BYTES // len(probe))
    pool = make_pool(records_per_batch, batches, timestamp_ms)
    count = max(1, total_bytes // max(map(len, pool)))
    return Workload(name, records_per_batch, pool, count)


def next_offset_after(records: bytes) -> int:
    """The offset after the last batch of ``records`` (whole batches), hopping by batch lengths."""
    view = memoryview(records)
    pos, last = 0, 0
    while pos < len(view):
        last = pos
        pos += int.from_bytes(view[pos + LENGTH_OFFSET:pos + LOG_OVERHEAD], "big") + LOG_OVERHEAD
    return BatchHeader.parse(view, last).next_offset


# --- the log and its peer ---------------------------------------------------------


def partition_dir(root: str) -> str:
    # Log.open wants <topic>-<partition>.
    return os.path.join(root, f"{TOPIC}-0")


def log_append(directory: str, work: Workload, config: LogConfig) -> tuple[float, float]:
    """Append ``work`` to a new log in ``directory``; seconds appending, then flushing."""
    log = Log.open(directory, config, had_clean_shutdown=True)
    try:
        append = log.append

        def run() -> None:
            for batch in work.batches():
                append(batch)

        appended, _ = timed(run)
        flushed, _ = timed(log.flush)
        if log.log_end_offset != work.records:
            raise AssertionError(f"{log}: log end offset {log.log_end_offset}, expected {work.records}")
        if log.size != work.bytes:
            raise AssertionError(f"{log}: {log.size} bytes, expected {work.bytes}")
        return appended, flushed
    finally:
        log.close()


def raw_write(path: str, work: Workload) -> tuple[float, float]:
    """Write the same batches with plain buffered writes; seconds writing, then fsyncing."""
    with open(path, "wb") as f:
        write = f.write

        def run() -> None:
            for batch in work.batches():
                write(batch)
            f.flush()  # Python's buffer, not the disk: part of writing

        written, _ = timed(run)
        synced, _ = timed(lambda: os.fsync(f.fileno()))
    if os.path.getsize(path) != work.bytes:
        raise AssertionError(f"{path}: {os.path.getsize(path)} bytes, expected {work.bytes}")
    return written, synced


def log_read_all(log: Log, max_bytes: int) -> int:
    """Read the whole log as a consumer does, ``max_bytes`` at a time; returns bytes read."""
    offset, end, total = log.log_start_offset, log.log_end_offset, 0
    read = log.read
    while offset < end:
        records = read(offset, max_bytes).records
        if not records:
            raise AssertionError(f"{log}: empty read at offset {offset}, log end offset {end}")
        offset = next_offset_after(records)
        total += len(records)
    return total


def raw_read_all(path: str, chunk_bytes: int) -> int:
    total = 0
    with open(path, "rb") as f:
        read = f.read
        while chunk := read(chunk_bytes):
            total += len(chunk)
    return total


def log_recover(directory: str, config: LogConfig, expected_end_offset: int) -> float:
    """Seconds to open the log after an unclean shutdown, re-validating everything from offset 0."""
    seconds, log = timed(lambda: Log.open(directory, config, recovery_point=0, had_clean_shutdown=False))
    try:
        if log.log_end_offset != expected_end_offset:
            raise AssertionError(f"{log}: recovery ended at offset {log.log_end_offset}, "
                                 f"expected {expected_end_offset}")
    finally:
        log.close()
    return seconds


# --- figures ----------------------------------------------------------------------


def enough_disk(directory: str, part: str, log) -> str | None:
    """None when there is room, else why ``part`` is skipped."""
    short = short_of_disk(directory, MIN_FREE_BYTES)
    if short is None:
        return None
    message = f"{part}: skipped, {short}, fewer than {MIN_FREE_BYTES / GIB:.0f} GiB"
    log(f"  {message}")
    return message


def remove(path: str) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.exists(path):
        os.remove(path)


def append_and_read_figures(root: str, work: Workload, config: LogConfig, runs: int, do_append: bool,
                            do_read: bool, log) -> tuple[list[Row], list[str]]:
    """Append figures (then flush), and read figures over the last log and raw file written."""
    rows: list[Row] = []
    why = enough_disk(root, f"append and read, {work.name}", log)
    if why:
        return rows, [why]
    log_dir, raw_path = partition_dir(root), os.path.join(root, "raw.bin")
    try:
        if do_append:
            append_s, log_flush_s, write_s, raw_sync_s = [], [], [], []
            # One untimed warm-up, then alternate which goes first so neither always
            # meets the other's writeback.
            for i in range(runs + 1):
                remove(log_dir)
                remove(raw_path)
                order = ("log", "raw") if i % 2 else ("raw", "log")
                log(f"  append, {work.name}: {'warm-up' if i == 0 else f'run {i} of {runs}'} ({', '.join(order)})")
                for who in order:
                    if who == "log":
                        appended, flushed = log_append(log_dir, work, config)
                        if i:
                            append_s.append(appended)
                            log_flush_s.append(flushed)
                    else:
                        written, synced = raw_write(raw_path, work)
                        if i:
                            write_s.append(written)
                            raw_sync_s.append(synced)
            note = (f"{work.count} batches of {work.records_per_batch} records "
                    f"({len(work.pool[0]):,} bytes), {work.bytes / MIB:.0f} MiB, one segment, from a pool of "
                    f"{len(work.pool)} distinct batches; one Log.append per batch, flush not included")
            rows.append(Row(f"append, {work.name}", work.timing(append_s), work.timing(write_s), note))
            rows.append(Row(f"flush after append, {work.name}", work.timing(log_flush_s), work.timing(raw_sync_s),
                            "Log.flush() against os.fsync of the raw file, after each append run"))
        if do_read:
            if not do_append:
                log(f"  read, {work.name}: writing the log and the raw file (untimed)")
                log_append(log_dir, work, config)
                raw_write(raw_path, work)
            reader = Log.open(log_dir, config, had_clean_shutdown=True)
            try:
                read_s, raw_s = [], []
                for i in range(runs + 1):
                    log(f"  read, {work.name}: {'warm-up' if i == 0 else f'run {i} of {runs}'}")
                    ours, got_log = timed(lambda: log_read_all(reader, READ_MAX_BYTES))
                    theirs, got_raw = timed(lambda: raw_read_all(raw_path, READ_MAX_BYTES))
                    if [got_log, got_raw] != [work.bytes, work.bytes]:
                        raise AssertionError(f"read {[got_log, got_raw]} bytes, expected {work.bytes} each")
                    if i:
                        read_s.append(ours)
                        raw_s.append(theirs)
            finally:
                reader.close()
            rows.append(Row(f"sequential read, {work.name}", work.timing(read_s), work.timing(raw_s),
                            f"Log.read(offset, {READ_MAX_BYTES:,}) to the log end against f.read("
                            f"{READ_MAX_BYTES:,}); warm page cache, both read once before timing"))
    finally:
        remove(log_dir)
        remove(raw_path)
    return rows, []


def recovery_figure(root: str, work: Workload, config: LogConfig, runs: int, log) -> Row | str:
    """Recovery of one unflushed segment of ``work`` after an unclean shutdown."""
    why = enough_disk(root, f"recovery, {work.name}", log)
    if why:
        return why
    log_dir = partition_dir(root)
    try:
        log(f"  recovery, {work.name}: writing {work.bytes / MIB:.0f} MiB (untimed, not flushed)")
        written = Log.open(log_dir, config, had_clean_shutdown=True)
        try:
            for batch in work.batches():
                written.append(batch)
            if len(written.segments) != 1:
                raise AssertionError(f"{written}: {len(written.segments)} segments, expected one")
        finally:
            written.close()  # no flush, no clean shutdown marker
        segment_path = os.path.join(log_dir, layout.log_file_name(0))
        recover_s, raw_s = [], []
        for i in range(runs + 1):
            log(f"  recovery, {work.name}: {'warm-up' if i == 0 else f'run {i} of {runs}'}")
            ours = log_recover(log_dir, config, work.records)
            theirs, got = timed(lambda: raw_read_all(segment_path, READ_MAX_BYTES))
            if got != work.bytes:
                raise AssertionError(f"{segment_path}: read {got} bytes, expected {work.bytes}")
            if i:
                recover_s.append(ours)
                raw_s.append(theirs)
        return Row(f"recovery, {work.name}", work.timing(recover_s), work.timing(raw_s),
                   f"Log.open(recovery_point=0, had_clean_shutdown=False) of one {work.bytes / MIB:.0f} MiB "
                   f"segment ({work.count} batches) against f.read({READ_MAX_BYTES:,}) of its .log; warm")
    finally:
        remove(log_dir)


# --- targets and reporting ------------------------------------------------------------


def targets(rows: list[Row]) -> list[Target]:
    """The issue's targets: append >= 50% of raw writes (1 MiB batches); recovery >= 200 MB/s."""
    found = []
    for row in rows:
        if row.figure.startswith("append") and "1 MiB" in row.figure:
            found.append(Target("append with 1 MiB batches at least 50% of raw buffered writes",
                                f"{row.ratio:.0%} ({row.seglog.best_mb_s:,.0f} against {row.raw.best_mb_s:,.0f} MB/s)",
                                row.ratio >= 0.5))
        if row.figure.startswith("recovery"):
            found.append(Target(f"{row.figure} at least 200 MB/s", f"{row.seglog.best_mb_s:,.0f} MB/s",
                                row.seglog.best_mb_s >= 200))
    return found


def records_column(row: Row, none: str = "-") -> str:
    # A flush moves bytes, not records.
    return none if row.figure.startswith("flush") else rate(row.seglog.best_rate)


def print_table(env: Environment, rows: list[Row], skipped: list[str], runs: int) -> None:
    print_environment(env)
    print(f"\nMB/s (10^6 bytes/s), best of {runs} runs (median); records/s at the best run; "
          f"ratio = seglog best / raw best")
    print_header(f"{'figure':<38} {'seglog MB/s':>16} {'records/s':>10} {'raw MB/s':>16} {'ratio':>6}")
    for row in rows:
        ours = f"{row.seglog.best_mb_s:,.0f} ({row.seglog.median_mb_s:,.0f})"
        theirs = f"{row.raw.best_mb_s:,.0f} ({row.raw.median_mb_s:,.0f})"
        print(f"{row.figure:<38} {ours:>16} {records_column(row):>10} {theirs:>16} "
              f"{row.ratio:>5.2f}x")
    for row in rows:
        if row.note:
            print(f"  {row.figure}: {row.note}")
    for row in rows:
        if row.figure.startswith("flush"):
            print(f"  {row.figure}: Log.flush {min(row.seglog.seconds):.2f} s, "
                  f"os.fsync {min(row.raw.seconds):.2f} s (best)")
    for message in skipped:
        print(f"  {message}")
    found = targets(rows)
    if found:
        print_targets(found)


def print_markdown(env: Environment, rows: list[Row], runs: int) -> None:
    date, command = date_and_command(env)
    for kind in ("append", "flush", "sequential read", "recovery"):
        chosen = [row for row in rows if row.figure.startswith(kind)]
        if not chosen:
            continue
        print_markdown_header(("figure", f"seglog, MB/s (best of {runs}; median)", "seglog, records/s (best)",
                               f"raw file system, MB/s (best of {runs}; median)", "ratio (best)", "command", "date"))
        for row in chosen:
            print_markdown_row((row.figure, f"{row.seglog.best_mb_s:,.0f}; {row.seglog.median_mb_s:,.0f}",
                                records_column(row, "—"), f"{row.raw.best_mb_s:,.0f}; {row.raw.median_mb_s:,.0f}",
                                f"{row.ratio:.2f}x", f"`{command}`", date))
    found = targets(rows)
    if found:
        print_markdown_targets(found)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argument_parser(__doc__, "a smoke run: 64 MiB instead of 1 GiB, 2 runs")
    p.add_argument("--runs", type=int, help="timed runs per figure, after one warm-up (default 3, 2 with --quick)")
    p.add_argument("--total-mib", type=int,
                   help="bytes per append, read and recovery run (default 1024: one default segment)")
    p.add_argument("--dir", default="/tmp", help="where the temporary logs go (default /tmp)")
    p.add_argument("--skip", choices=("append", "read", "recovery"), action="append", default=[],
                   help="leave a figure out (repeatable)")
    p.add_argument("--batches", choices=("16k", "1m"), action="append",
                   help="only these batch sizes (repeatable; default both)")
    args = p.parse_args(argv)
    args.runs = args.runs or (2 if args.quick else 3)
    args.total_mib = args.total_mib or (64 if args.quick else 1024)
    args.batches = args.batches or ["16k", "1m"]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    env = log_environment(pinning(args.pin, args.cpu), args.dir)
    config = LogConfig.from_props({})
    total = args.total_mib * MIB
    now_ms = int(time.time() * 1000)
    sizes = {"16k": ("16 KiB batches", DEFAULT_BATCH_RECORDS), "1m": ("1 MiB batches", LARGE_BATCH_RECORDS)}
    log("building batch pools")
    workloads = [make_workload(name, per_batch, total, config, now_ms)
                 for key, (name, per_batch) in sizes.items() if key in args.batches]

    rows: list[Row] = []
    skipped: list[str] = []
    with scratch_directory("seglog-log-bench-", args.dir) as root:
        do_append, do_read = "append" not in args.skip, "read" not in args.skip
        if do_append or do_read:
            for work in workloads:
                log(f"append and read: {work.name}, {work.bytes / MIB:.0f} MiB per run")
                got, why = append_and_read_figures(root, work, config, args.runs, do_append, do_read, log)
                rows += got
                skipped += why
        if "recovery" not in args.skip:
            for work in workloads:
                log(f"recovery: {work.name}")
                result = recovery_figure(root, work, config, args.runs, log)
                if isinstance(result, str):
                    skipped.append(result)
                else:
                    rows.append(result)
    print_table(env, rows, skipped, args.runs)
    if args.markdown:
        print_markdown(env, rows, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
