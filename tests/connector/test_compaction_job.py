"""The Spark compaction job: Kafka's guarantees, the same survivors as the broker's cleaner, S3,
the lease, and spark-submit. (Its stages without Spark: tests/broker_core/log/cleaner/distributed.)"""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys

import pytest

from broker_core import Broker
from broker_core.clock import MockTime
from broker_core.log.cleaner.distributed import CompactionError
from connector.compaction_job import run_compaction
from format import layout
from format.layout import TopicPartition
from tests.broker_core.cleaner_kit import (T0, TOPIC_CONFIG, Produced, check_all, check_guarantees, fill, produce,
                                           read_from)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def broker_compact(log_dir: str, now_ms: int, **props) -> None:
    with Broker(log_dir, props, clock=MockTime(current_time_ms=now_ms), background=False) as broker:
        broker.log_manager.cleaner.compact()
        broker.log_manager.scheduler.run_all()


def segment_files(log_dir: str) -> dict[str, str]:
    found = {}
    for directory, _, names in os.walk(log_dir):
        for name in names:
            if name.endswith((".log", ".index", ".timeindex", ".txnindex")) or name == "cleaner-offset-checkpoint":
                found[os.path.relpath(os.path.join(directory, name), log_dir)] = os.path.join(directory, name)
    return found


@pytest.mark.slow
def test_the_job_and_the_brokers_cleaner_keep_the_same_records_byte_for_byte(spark, tmp_path):
    clock = MockTime(current_time_ms=T0)
    produced: dict = {}
    job_dir, broker_dir = str(tmp_path / "job"), str(tmp_path / "broker")
    fill(job_dir, clock, produced, transactions=True)
    shutil.copytree(job_dir, broker_dir)
    now = clock.milliseconds() + 1000
    # Producers whose last batch is more than 2 s old have expired (their last batches may go), the
    # others not.
    expiration = {"producer.id.expiration.ms": 2000}
    broker_compact(broker_dir, now, **expiration)
    # One segment or group per task, so that a partition's pieces merge and its groups run apart.
    reports = run_compaction(spark, job_dir, ["table"], now_ms=now, out=lambda line: None, task_bytes=1,
                             broker_config=expiration)
    assert [str(r.topic_partition) for r in reports] == ["table-0", "table-1", "table-2"]
    assert all(r.bytes_after < r.bytes_before for r in reports)
    job_files, broker_files = segment_files(job_dir), segment_files(broker_dir)
    assert sorted(job_files) == sorted(broker_files)
    different = [n for n in job_files if not filecmp.cmp(job_files[n], broker_files[n], shallow=False)]
    assert different == []
    check_all(job_dir, produced, clock)


@pytest.mark.slow
def test_a_key_space_larger_than_the_dedupe_buffer_is_cleaned_in_one_job(spark, tmp_path):
    clock = MockTime(current_time_ms=T0)
    produced: dict = {}
    job_dir, broker_dir = str(tmp_path / "job"), str(tmp_path / "broker")
    fill(job_dir, clock, produced, batches=60, keys=400)
    shutil.copytree(job_dir, broker_dir)
    now = clock.milliseconds()
    # 2400 bytes of dedupe buffer hold 89 keys: the broker's cleaner needs several rounds per partition.
    small = {"log.cleaner.dedupe.buffer.size": 2400}
    with Broker(broker_dir, small, clock=MockTime(current_time_ms=now), background=False) as broker:
        first = broker.log_manager.cleaner.clean_filthiest_log(force=True)
        assert first.end_offset < broker.log_manager.get_log(first.topic_partition).active_segment.base_offset
    broker_compact(broker_dir, now, **small)
    run_compaction(spark, job_dir, ["table"], now_ms=now, out=lambda line: None)
    job, by_broker = check_all(job_dir, produced, clock), check_all(broker_dir, produced, clock)
    for p in job:
        assert len({r.key for r in job[p]}) == len(job[p])  # one job: one record per key
        assert [(r.offset, r.key, r.value) for r in job[p]] == [(r.offset, r.key, r.value) for r in by_broker[p]]


@pytest.mark.slow
def test_the_job_keeps_kafkas_guarantees_round_after_round(spark, tmp_path):
    clock = MockTime(current_time_ms=T0)
    produced: dict = {}
    d = str(tmp_path / "logs")
    consumer = {p: 0 for p in range(3)}
    seen: dict[int, list] = {p: [] for p in range(3)}
    for round_ in range(3):
        fill(d, clock, produced, batches=25, keys=300, seed=round_)
        # A consumer keeping up with the head reads everything before the job runs ...
        with Broker(d, clock=clock, background=False) as broker:
            for p in consumer:
                log = broker.log_manager.get_log(TopicPartition("table", p))
                seen[p].extend(read_from(log, consumer[p]))
                consumer[p] = log.log_end_offset
        # A task per segment in both stages: stage 1's pieces of a partition are merged by reduceByKey.
        run_compaction(spark, d, ["table"], now_ms=clock.milliseconds(), out=lambda line: None, task_bytes=1)
        records = check_all(d, produced, clock)
        # ... the job cleans everything below the active segment ...
        for p, got in records.items():
            assert len({r.key for r in got}) == len(got)
    for p, done in produced.items():
        # ... and the consumer saw every record, in order, unchanged.
        assert [(r.offset, r.key, r.value) for r in seen[p]] == [
            (o, *done.records[o]) for o in sorted(done.records) if done.records[o] is not None]


@pytest.mark.slow
def test_with_the_job_a_tombstone_stays_for_delete_retention_ms_then_goes(spark, tmp_path):
    clock = MockTime(current_time_ms=T0)
    d = str(tmp_path / "logs")
    produced = Produced()
    with Broker(d, clock=clock, background=False) as broker:
        broker.create_topic("table", 1, TOPIC_CONFIG)
        log = broker.log_manager.get_log(TopicPartition("table", 0))
        produce(log, produced, clock, [(b"gone", b"v"), (b"kept", b"v")])
        produce(log, produced, clock, [(b"gone", None)])
        log.roll()

    def values(extra: bytes | None = None) -> list:
        with Broker(d, clock=clock, background=False) as broker:
            log = broker.log_manager.get_log(TopicPartition("table", 0))
            if extra is not None:
                produce(log, produced, clock, [(b"pad", extra)])
                log.roll()
            check_guarantees(produced, log)
            return [(r.key, r.value) for r in read_from(log)]

    cleaned_at = clock.milliseconds()
    run_compaction(spark, d, ["table"], now_ms=cleaned_at, out=lambda line: None)
    assert (b"gone", None) in values(b"1")
    run_compaction(spark, d, ["table"], now_ms=cleaned_at + 60_000 - 1, out=lambda line: None)
    assert (b"gone", None) in values(b"2")
    run_compaction(spark, d, ["table"], now_ms=cleaned_at + 60_000, out=lambda line: None)
    assert b"gone" not in [k for k, _ in values()]


@pytest.mark.slow
def test_the_job_compacts_a_log_dir_on_s3(spark, tmp_path, s3_bucket):
    import s3fs

    bucket, options = s3_bucket
    clock = MockTime(current_time_ms=T0)
    produced: dict = {}
    local, broker_dir = str(tmp_path / "local"), str(tmp_path / "broker")
    fill(local, clock, produced, partitions=2, batches=30)
    shutil.copytree(local, broker_dir)
    now = clock.milliseconds()
    broker_compact(broker_dir, now)
    fs = s3fs.S3FileSystem(**options)
    fs.put(local, f"{bucket}/logs", recursive=True)
    reports = run_compaction(spark, f"s3://{bucket}/logs", ["table"], storage_options=options, now_ms=now,
                             out=lambda line: None, task_bytes=1)
    assert len(reports) == 2 and all(r.bytes_after < r.bytes_before for r in reports)
    s3fs.S3FileSystem.clear_instance_cache()
    fs = s3fs.S3FileSystem(**options)
    for name, path in segment_files(broker_dir).items():
        if name.endswith(".log"):
            assert fs.cat_file(f"{bucket}/logs/{name}") == open(path, "rb").read(), name
    left = [p for p in fs.find(f"{bucket}/logs") if p.endswith(layout.TRANSIENT_FILE_SUFFIXES)]
    assert left == []


@pytest.mark.slow
def test_the_job_refuses_a_log_dir_a_running_broker_holds(spark, tmp_path):
    d = str(tmp_path / "logs")
    fill(d, MockTime(current_time_ms=T0), {}, partitions=1, batches=5)
    with Broker(d, background=False):
        with pytest.raises(CompactionError, match="in use"):
            run_compaction(spark, d, ["table"], out=lambda line: None)
    with Broker(d, background=False) as broker:
        broker.create_topic("plain", 1)
    with pytest.raises(CompactionError, match="cleanup.policy=delete"):
        run_compaction(spark, d, ["plain"], out=lambda line: None)


@pytest.mark.slow
def test_seglog_compact_spark_runs_the_job_with_spark_submit(tmp_path):
    clock = MockTime(current_time_ms=T0)
    produced: dict = {}
    d = str(tmp_path / "logs")
    fill(d, clock, produced, partitions=2, batches=20)
    result = subprocess.run([sys.executable, "-m", "broker_core.cli", "compact", "--spark", "--log-dir", d,
                             "--topic", "table", "--master", "local[2]", "--conf", "spark.ui.enabled=false"],
                            capture_output=True, text=True, timeout=240, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "[compaction] stage 1/2 done" in result.stdout and "[compaction] stage 2/2 done" in result.stdout
    assert "table-1" in result.stdout and "total" in result.stdout
    for records in check_all(d, produced, clock).values():
        assert len({r.key for r in records}) == len(records)


# --- a log dir a running broker owns: the lease and the swap go through the broker ---------------


def consume_all(bootstrap: str, topic: str, partition: int) -> list[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of a partition from offset 0 to its end, read by kafka-python."""
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition as KafkaTopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000)
    try:
        tp = KafkaTopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        end = consumer.end_offsets([tp])[tp]
        out = []
        for message in consumer:
            out.append((message.offset, message.key, message.value))
            if message.offset >= end - 1:
                break
        return out
    finally:
        consumer.close()


@pytest.mark.slow
def test_the_job_compacts_a_log_dir_a_running_broker_owns_through_its_lease(spark, tmp_path):
    from kafka import KafkaProducer

    from tests.broker_core.server.server_kit import start_broker

    clock = MockTime(current_time_ms=T0)
    produced: dict = {}
    d = str(tmp_path / "logs")
    fill(d, clock, produced, partitions=2, batches=40, keys=30)
    # The broker's own cleaner leaves records younger than 400 days alone (its clock is the system's);
    # the job, told it is later than that, cleans them.
    lag = {"log.cleaner.min.compaction.lag.ms": 400 * 86_400_000}
    later = clock.milliseconds() + 401 * 86_400_000
    server = start_broker(d, **lag)
    try:
        bootstrap = server.bootstrap_servers
        before = {p: consume_all(bootstrap, "table", p) for p in range(2)}
        # Without the broker's listener the job refuses the log dir and says how to reach it.
        with pytest.raises(CompactionError, match="bootstrap"):
            run_compaction(spark, d, ["table"], out=lambda line: None)
        lines: list[str] = []
        reports = run_compaction(spark, d, ["table"], now_ms=later, broker_config=lag, bootstrap=bootstrap,
                                 out=lines.append, task_bytes=1)
        assert [str(r.topic_partition) for r in reports] == ["table-0", "table-1"]
        assert all(r.bytes_after < r.bytes_before for r in reports)
        for p in range(2):
            after = consume_all(bootstrap, "table", p)
            # The broker serves the cleaned log: one record per key, each its final value at its offset.
            assert len({key for _, key, _ in after}) == len(after) < len(before[p])
            latest = {key: (o, value) for o, key, value in before[p]}
            assert {key: (o, value) for o, key, value in after} == {
                key: ov for key, ov in latest.items() if ov[1] is not None or ov[0] in {o for o, _, _ in after}}
            log = server.broker.log_manager.get_log(TopicPartition("table", p))
            check_guarantees(produced[p], log)
        # The broker's checkpoint moved to the end of the cleaned range, and its cleaner is free again.
        checkpoint = server.broker.log_manager.cleaner.manager.all_cleaner_checkpoints()
        assert checkpoint[TopicPartition("table", 0)] == reports[0].end_offset
        # The broker goes on taking writes and serving them after the swap.
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        producer.send("table", key=b"after", value=b"swap", partition=0).get(timeout=10)
        producer.close()
        assert consume_all(bootstrap, "table", 0)[-1][1:] == (b"after", b"swap")
    finally:
        server.shutdown()
    assert [n for _, _, names in os.walk(d) for n in names if n.endswith(layout.TRANSIENT_FILE_SUFFIXES)] == []


def test_the_job_leases_through_a_sasl_ssl_listener_with_the_client_security_it_is_given(spark, tmp_path):
    from broker_core.errors import SaslAuthenticationFailedError
    from tests.broker_core.security.sasl_listener_kit import sasl_ssl, seglog_security, start_sasl_broker
    from tests.broker_core.security.tls_kit import TestCa

    stores = TestCa(tmp_path / "ca").server()
    clock = MockTime(current_time_ms=T0)
    d = str(tmp_path / "logs")
    fill(d, clock, {}, partitions=1, batches=20, keys=10)
    lag = {"log.cleaner.min.compaction.lag.ms": 400 * 86_400_000}
    later = clock.milliseconds() + 401 * 86_400_000
    server = start_sasl_broker(d, stores, **lag)
    try:
        with pytest.raises(SaslAuthenticationFailedError, match="alice"):
            run_compaction(spark, d, ["table"], now_ms=later, broker_config=lag, bootstrap=sasl_ssl(server),
                           security=seglog_security(stores, password="wrong"), out=lambda line: None)
        reports = run_compaction(spark, d, ["table"], now_ms=later, broker_config=lag, bootstrap=sasl_ssl(server),
                                 security=seglog_security(stores), out=lambda line: None)
        assert [str(r.topic_partition) for r in reports] == ["table-0"]
        assert reports[0].bytes_after < reports[0].bytes_before
        checkpoint = server.broker.log_manager.cleaner.manager.all_cleaner_checkpoints()
        assert checkpoint[TopicPartition("table", 0)] == reports[0].end_offset
    finally:
        server.shutdown(timeout_ms=10_000)
