"""Log compaction as a Spark job, for topics larger than one broker's cleaner handles:

    spark-submit --properties-file spark_conf/spark-defaults.conf connector/compaction_job.py \\
        --path /data/logs --topics orders,customers

(or ``seglog compact --spark --log-dir /data/logs --topic orders``). ``--path``
takes a local path, ``file://`` or ``s3://`` (``--storage key=value`` for the
filesystem, e.g. ``endpoint_url``).

Stage 1 reads the dirty segments in parallel and reduces their keys to the
latest offset per key of each partition (``reduceByKey`` over key-hash
arrays); stage 2 rewrites the segment groups in parallel into ``.cleaned``
files with the broker cleaner's own code; the driver then swaps them in under
the log dir's lease and moves ``cleaner-offset-checkpoint``. The steps are the
plain functions of ``connector.compaction``; this module only wires them into
Spark, names the jobs in the Spark UI and prints a line per stage.
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

from connector.compaction import (DEFAULT_TASK_BYTES, CompactionError, CompactionLease, PartitionReport,
                                  clean_tasks, delete_files, format_report, map_tasks, merge_pieces,
                                  plan_compaction, report_partition, run_clean_task, run_map_task,
                                  swap_partition)
from connector.discovery import LogDirectory
from format.fs import storage_options_from


# Latest offsets up to this size (10 million keys) go to stage 2 by broadcast, larger ones by a join.
DEFAULT_BROADCAST_MAX_BYTES = 240 * 1024 * 1024
KEY_ENTRY_BYTES = 24


class _StageProgress:
    """Prints the tasks done of the running Spark job every few seconds (driver side)."""

    def __init__(self, sc, group_id: str, label: str, out: Callable[[str], None], every_s: float = 5.0):
        self.sc = sc
        self.group_id = group_id
        self.label = label
        self.out = out
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="compaction-progress", daemon=True)
        self._last = None

    def __enter__(self) -> "_StageProgress":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        tracker = self.sc.statusTracker()
        while not self._stop.wait(self.every_s):
            done = total = 0
            try:
                for job_id in tracker.getJobIdsForGroup(self.group_id):
                    job = tracker.getJobInfo(job_id)
                    for stage_id in (job.stageIds if job else ()):
                        stage = tracker.getStageInfo(stage_id)
                        if stage is not None:
                            done += stage.numCompletedTasks
                            total += stage.numTasks
            except Exception:  # the tracker is best effort
                continue
            if total and (done, total) != self._last:
                self._last = (done, total)
                self.out(f"[compaction] {self.label}: {done}/{total} tasks")


def run_compaction(spark, url: str, topics: Sequence[str], *, storage_options: Mapping | None = None,
                   broker_config: Mapping[str, object] | None = None, now_ms: int | None = None,
                   out: Callable[[str], None] = print,
                   broadcast_max_bytes: int = DEFAULT_BROADCAST_MAX_BYTES,
                   task_bytes: int = DEFAULT_TASK_BYTES) -> list[PartitionReport]:
    """Compact ``topics`` of the log dir at ``url``; returns a report per partition cleaned.

    A task of either stage reads about ``task_bytes`` of one partition. Stage 2 gets each
    partition's latest offsets by broadcast when all of them take at most ``broadcast_max_bytes``
    (24 bytes a key), else by a shuffle join.
    """
    storage_options = dict(storage_options or {})
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    directory = LogDirectory(url, storage_options)
    fs, root = directory.fs, directory.root
    sc = spark.sparkContext
    group_id = f"seglog-compaction-{uuid.uuid4().hex[:8]}"
    sc.setJobGroup(group_id, f"seglog compaction of {','.join(topics)} in {url}", interruptOnCancel=True)
    try:
        with CompactionLease(fs, root):
            started = time.monotonic()
            plans = plan_compaction(url, topics, storage_options=storage_options, now_ms=now_ms,
                                    broker_config=broker_config)
            if not plans:
                out(f"[compaction] nothing to clean in {', '.join(topics)}")
                return []
            by_key = {p.key: p for p in plans}
            tasks = map_tasks(plans, task_bytes)
            dirty = sum(len(p.dirty_segments) for p in plans)
            dirty_bytes = sum(s.size for p in plans for s in p.dirty_segments)
            out(f"[compaction] planned {len(plans)} partitions: {dirty} dirty segments ({dirty_bytes:,} bytes), "
                f"{sum(len(p.groups) for p in plans)} segment groups")

            # Stage 1: the latest offset of every key, per partition.
            sc.setJobDescription(f"seglog compaction 1/2: latest offset per key in {dirty} dirty segments of "
                                 f"{len(plans)} partitions")
            t0 = time.monotonic()
            pieces = (sc.parallelize(tasks, len(tasks))
                      .map(lambda task: run_map_task(task, url, storage_options))
                      .reduceByKey(merge_pieces, numPartitions=len(plans))
                      .persist())
            with _StageProgress(sc, group_id, "stage 1/2", out):
                summary = dict(pieces.mapValues(lambda p: (p.keys, p.bytes_read, p.has_transactions, p.cpu_s))
                               .collect())
            out(f"[compaction] stage 1/2 done: {sum(s[0] for s in summary.values()):,} distinct keys from "
                f"{sum(s[1] for s in summary.values()):,} bytes in {time.monotonic() - t0:.1f} s "
                f"({sum(s[3] for s in summary.values()):.1f} s of task CPU)")

            # Stage 2: every segment group rewritten into .cleaned files.
            slots: dict[tuple[str, int], list[int]] = {}
            task_of_slot = {}
            for plan in plans:
                for task in clean_tasks(plan, summary[plan.key][2], task_bytes):
                    slots.setdefault(plan.key, []).append(len(task_of_slot))
                    task_of_slot[len(task_of_slot)] = task
            sc.setJobDescription(f"seglog compaction 2/2: rewrite {sum(len(p.groups) for p in plans)} segment groups")
            t1 = time.monotonic()
            distinct_keys = sum(s[0] for s in summary.values())
            with _StageProgress(sc, group_id, "stage 2/2", out):
                if distinct_keys * KEY_ENTRY_BYTES <= broadcast_max_bytes:
                    # Small enough to ship whole: each partition's latest offsets are broadcast, and
                    # each executor fetches those of the partitions its tasks clean.
                    shared = {key: sc.broadcast(piece) for key, piece in pieces.collect()}

                    def clean(slot: int) -> list:
                        task = task_of_slot[slot]
                        return run_clean_task(task, shared[task.key].value, url, now_ms, storage_options)

                    results = sc.parallelize(sorted(task_of_slot), len(task_of_slot)).flatMap(clean).collect()
                    for variable in shared.values():
                        variable.destroy()
                else:
                    # Joined instead: each group's task receives its partition's latest offsets by a shuffle.
                    results = (pieces.flatMap(lambda kv: [(slot, kv[1]) for slot in slots.get(kv[0], ())])
                               .partitionBy(len(task_of_slot), lambda slot: slot)
                               .flatMap(lambda kv: run_clean_task(task_of_slot[kv[0]], kv[1], url, now_ms,
                                                                  storage_options))
                               .collect())
            pieces.unpersist()
            out(f"[compaction] stage 2/2 done: {len(results)} cleaned segments, "
                f"{sum(r.bytes_before for r in results):,} -> {sum(r.bytes_after for r in results):,} bytes "
                f"in {time.monotonic() - t1:.1f} s ({sum(r.cpu_s for r in results):.1f} s of task CPU)")

            # The swap, partition by partition, then the replaced files go.
            doomed = []
            reports = []
            for key in sorted(by_key):
                plan = by_key[key]
                doomed.extend(swap_partition(fs, root, plan, [r for r in results if r.key == key]))
                reports.append(report_partition(fs, plan))
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


def _pairs(items: Sequence[str] | None) -> dict[str, str]:
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"expected key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="compaction_job", description="Compact seglog topics with Spark.")
    parser.add_argument("--path", required=True, help="the log dir: a path, file:// or s3:// URL")
    parser.add_argument("--topics", required=True, help="comma-separated topics to compact")
    parser.add_argument("--storage", action="append", metavar="KEY=VALUE",
                        help="a filesystem option (key, secret, endpoint_url, ...)")
    parser.add_argument("--broker-config", action="append", metavar="KEY=VALUE",
                        help="a broker default the topics' settings derive from")
    parser.add_argument("--now-ms", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    topics = [t.strip() for t in args.topics.split(",") if t.strip()]
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("seglog-compaction").getOrCreate()
    try:
        storage = storage_options_from({f"storage.{k}": v for k, v in _pairs(args.storage).items()})
        run_compaction(spark, args.path, topics, storage_options=storage, broker_config=_pairs(args.broker_config),
                       now_ms=args.now_ms)
    except (CompactionError, ValueError, OSError) as exc:
        print(f"compaction_job: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
