"""Log compaction as a Spark job, for topics larger than one broker's cleaner handles:

    spark-submit --properties-file spark_conf/spark-defaults.conf connector/compaction_job.py \\
        --path /data/logs --topics orders,customers

(or ``seglog compact --spark --log-dir /data/logs --topic orders``). ``--path``
takes a local path, ``file://`` or ``s3://`` (``--storage key=value`` for the
filesystem, e.g. ``endpoint_url``).

Stage 1 reads the segments in parallel and reduces their keys to the latest
offset per key of each partition (``reduceByKey`` over key-hash arrays when
several tasks read one partition), which becomes the set of offsets that
survive, cut by offset range for the stage-2 tasks and delivered to them by a
shuffle; stage 2 rewrites the segment groups in parallel into ``.cleaned``
files with the broker cleaner's own filter; the driver then swaps them in under
the log dir's lease and moves ``cleaner-offset-checkpoint``. The steps are the
plain functions of ``broker_core.log.cleaner.distributed``, beside the broker's
own cleaner; this module only wires them into Spark, names the jobs in the
Spark UI and prints a line per stage.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    # spark-submit puts this file's directory first on sys.path, where connector's modules would
    # shadow top-level ones; the package is imported from the project root instead.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    if os.path.dirname(_here) not in sys.path:
        sys.path.insert(0, os.path.dirname(_here))

import argparse
import threading
import time
import uuid
from typing import Callable, Mapping, Sequence

from broker_core.cli.broker_access import add_command_config_argument
from broker_core.client.client_security import PLAINTEXT_CLIENT, ClientSecurity
from broker_core.config import BrokerConfig
from broker_core.errors import InvalidConfigurationError
from broker_core.key_values import parse_key_values
from broker_core.log.cleaner.distributed import CompactionError
from broker_core.log.cleaner.distributed.clean_stage import CleanTask, clean_inputs, clean_tasks, run_clean_task
from broker_core.log.cleaner.distributed.compaction_lease import DEFAULT_LEASE_MS, compaction_lease
from broker_core.log.cleaner.distributed.compaction_report import PartitionReport, format_report, report_partition
from broker_core.log.cleaner.distributed.map_stage import map_tasks, merge_pieces, run_map_task
from broker_core.log.cleaner.distributed.partition_plan import DEFAULT_TASK_BYTES, plan_compaction
from broker_core.log.cleaner.distributed.segment_swap import delete_files
from format.fs import storage_options_from
from format.log_dir import LogDirectory


class _Progress:
    """Lines on the driver while the job runs: the tasks done every few seconds, and a line when
    stage 1 (every stage of the Spark job but its last) has finished, with its figures."""

    def __init__(self, sc, group_id: str, out: Callable[[str], None], stage_one_done: Callable[[float], str],
                 every_s: float = 5.0, poll_s: float = 0.2):
        self.sc = sc
        self.group_id = group_id
        self.out = out
        self.stage_one_done = stage_one_done
        self.every_s = every_s
        self.poll_s = poll_s
        self.started = time.monotonic()
        self.stage_one_s: float | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="compaction-progress", daemon=True)

    def __enter__(self) -> "_Progress":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)

    def finish_stage_one(self) -> None:
        with self._lock:
            if self.stage_one_s is None:
                self.stage_one_s = time.monotonic() - self.started
                self.out(self.stage_one_done(self.stage_one_s))

    def _stages(self) -> list:
        tracker = self.sc.statusTracker()
        stages = []
        for job_id in tracker.getJobIdsForGroup(self.group_id):
            job = tracker.getJobInfo(job_id)
            stages.extend(job.stageIds if job else ())
        return [tracker.getStageInfo(i) for i in sorted(stages)]

    def _run(self) -> None:
        last_line = time.monotonic()
        shown = None
        while not self._stop.wait(self.poll_s):
            try:
                stages = self._stages()
            except Exception:  # the tracker is best effort
                continue
            if len(stages) < 2 or any(s is None for s in stages):
                continue
            first, last = stages[:-1], stages[-1]
            if self.stage_one_s is None and all(s.numCompletedTasks >= s.numTasks for s in first):
                self.finish_stage_one()
            if time.monotonic() - last_line < self.every_s:
                continue
            last_line = time.monotonic()
            if self.stage_one_s is None:
                done, total, label = (sum(s.numCompletedTasks for s in first), sum(s.numTasks for s in first),
                                      "stage 1/2")
            else:
                done, total, label = last.numCompletedTasks, last.numTasks, "stage 2/2"
            if (label, done) != shown:
                shown = (label, done)
                self.out(f"[compaction] {label}: {done}/{total} tasks")


def run_compaction(spark, url: str, topics: Sequence[str], *, storage_options: Mapping | None = None,
                   broker_config: Mapping[str, object] | None = None, now_ms: int | None = None,
                   out: Callable[[str], None] = print, bootstrap: str | None = None,
                   lease_ms: int = DEFAULT_LEASE_MS, task_bytes: int = DEFAULT_TASK_BYTES,
                   security: ClientSecurity = PLAINTEXT_CLIENT) -> list[PartitionReport]:
    """Compact ``topics`` of the log dir at ``url``; returns a report per partition cleaned.

    With ``bootstrap`` (the listener of the broker running on the log dir, reached with ``security``) the job leases the
    partitions from that broker and the broker swaps the cleaned segments in; without, the log
    dir must have no running broker and the job swaps them itself under the dir's lock.

    A task of either stage reads about ``task_bytes`` of one partition. Both stages are one Spark
    job: stage 1's result for a partition (merged by ``reduceByKey`` when several tasks read it)
    becomes the surviving offsets of each stage-2 task's range, which a shuffle delivers to it.
    """
    storage_options = dict(storage_options or {})
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    directory = LogDirectory(url, storage_options)
    fs = directory.fs
    sc = spark.sparkContext
    group_id = f"seglog-compaction-{uuid.uuid4().hex[:8]}"
    sc.setJobGroup(group_id, f"seglog compaction of {','.join(topics)} in {url}", interruptOnCancel=True)
    try:
        with compaction_lease(directory, topics, bootstrap, lease_ms, security) as lease:
            started = time.monotonic()
            plans = plan_compaction(url, topics, storage_options=storage_options, now_ms=now_ms,
                                    broker_config=broker_config, settle_leftovers=lease.settles_leftovers)
            if not plans:
                out(f"[compaction] nothing to clean in {', '.join(topics)}")
                return []
            by_key = {p.key: p for p in plans}
            tasks = map_tasks(plans, task_bytes)
            dirty = sum(len(p.dirty_segments) for p in plans)
            dirty_bytes = sum(s.size for p in plans for s in p.dirty_segments)
            groups = sum(len(p.groups) for p in plans)
            out(f"[compaction] planned {len(plans)} partitions: {dirty} dirty segments ({dirty_bytes:,} bytes), "
                f"{groups} segment groups")

            # Stage 2's tasks, numbered: a partition's tasks in offset order.
            task_of_slot: dict[int, CleanTask] = {}
            slots_of: dict[tuple[str, int], list[int]] = {}
            whole_of: dict[tuple[str, int], CleanTask] = {}
            for plan in plans:
                whole_of[plan.key] = clean_tasks(plan, True)[0]
                for task in clean_tasks(plan, False, task_bytes):
                    slots_of.setdefault(plan.key, []).append(len(task_of_slot))
                    task_of_slot[len(task_of_slot)] = task
            expiration_ms = BrokerConfig.from_props(dict(broker_config or {})).producer_id_expiration_ms
            keys = sc.accumulator(0)
            bytes_read = sc.accumulator(0)
            map_cpu = sc.accumulator(0.0)

            def route(item):
                key, piece = item
                keys.add(piece.keys)
                bytes_read.add(piece.bytes_read)
                map_cpu.add(piece.cpu_s)
                slots = slots_of[key]
                return list(zip(slots, clean_inputs(piece, [task_of_slot[s] for s in slots], now_ms, expiration_ms)))

            def clean(item):
                slot, given = item
                task = whole_of[task_of_slot[slot].key] if given.whole_partition else task_of_slot[slot]
                return run_clean_task(task, given, url, now_ms, storage_options)

            sc.setJobDescription(f"seglog compaction: 1/2 latest offset per key in {dirty} dirty segments of "
                                 f"{len(plans)} partitions, 2/2 rewrite {groups} segment groups")
            pieces = sc.parallelize(tasks, len(tasks)).map(lambda task: run_map_task(task, url, storage_options))
            if len(tasks) > len(plans):  # some partition is read by several tasks: merge their pieces
                pieces = pieces.reduceByKey(merge_pieces, numPartitions=len(plans))

            def stage_one_line(elapsed: float) -> str:
                return (f"[compaction] stage 1/2 done: {keys.value:,} distinct keys from {bytes_read.value:,} bytes "
                        f"in {elapsed:.1f} s ({map_cpu.value:.1f} s of task CPU)")

            with _Progress(sc, group_id, out, stage_one_line) as progress:
                results = (pieces.flatMap(route)
                           .partitionBy(len(task_of_slot), lambda slot: slot)
                           .flatMap(clean)
                           .collect())
                progress.finish_stage_one()
                stage_two_s = time.monotonic() - progress.started - progress.stage_one_s
            # The line's figures are the summary table's: the rewritten segments, then the partitions.
            reports = [report_partition(by_key[key], results) for key in sorted(by_key)]
            out(f"[compaction] stage 2/2 done: {sum(len(r.replaced) for r in results)} segments rewritten into "
                f"{len(results)}, {sum(r.bytes_before for r in results):,} -> "
                f"{sum(r.bytes_after for r in results):,} bytes (the partitions: "
                f"{sum(r.bytes_before for r in reports):,} -> {sum(r.bytes_after for r in reports):,} bytes) "
                f"in {stage_two_s:.1f} s ({sum(r.cpu_s for r in results):.1f} s of task CPU)")

            # The swap, partition by partition, then the replaced files go.
            doomed = []
            for key in sorted(by_key):
                doomed.extend(lease.swap(by_key[key], [r for r in results if r.key == key]))
            delete_files(fs, doomed)
            out(f"[compaction] swapped in {len(results)} segments in {len(plans)} partitions; "
                f"{time.monotonic() - started:.1f} s in all")
    finally:
        # The job's group and descriptions are the calling thread's: later jobs are not part of it.
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)
        sc.setLocalProperty("spark.job.interruptOnCancel", None)
    for line in format_report(reports):
        out(line)
    return reports


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="compaction_job", description="Compact seglog topics with Spark.")
    parser.add_argument("--path", required=True, help="the log dir: a path, file:// or s3:// URL")
    parser.add_argument("--topics", required=True, help="comma-separated topics to compact")
    parser.add_argument("--storage", action="append", metavar="KEY=VALUE",
                        help="a filesystem option (key, secret, endpoint_url, ...)")
    parser.add_argument("--broker-config", action="append", metavar="KEY=VALUE",
                        help="a broker default the topics' settings derive from")
    parser.add_argument("--bootstrap", metavar="HOST:PORT",
                        help="the listener of a broker running on the log dir: the job leases the topics' "
                             "partitions from it and it swaps the cleaned segments in")
    add_command_config_argument(parser)
    parser.add_argument("--lease-ms", type=int, default=DEFAULT_LEASE_MS,
                        help="how long the broker keeps the lease without a renewal (default 60000)")
    parser.add_argument("--now-ms", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    topics = [t.strip() for t in args.topics.split(",") if t.strip()]
    try:
        security = ClientSecurity.from_file(args.command_config)
    except InvalidConfigurationError as exc:
        print(f"compaction_job: --command-config {args.command_config}: {exc}", file=sys.stderr)
        return 1
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("seglog-compaction").getOrCreate()
    try:
        storage = storage_options_from({f"storage.{k}": v
                                        for k, v in parse_key_values(args.storage, "--storage").items()})
        run_compaction(spark, args.path, topics, storage_options=storage,
                       broker_config=parse_key_values(args.broker_config, "--broker-config"),
                       now_ms=args.now_ms, bootstrap=args.bootstrap, lease_ms=args.lease_ms,
                       security=security)
    except (CompactionError, ValueError, OSError) as exc:
        print(f"compaction_job: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
