"""Topics as Delta tables in tests: records produced with chosen keys and values, a sync run to its end in
the test's Spark session, and the table as delta-spark and delta-rs (``deltalake``) read it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Sequence

from broker_core import Broker
from format.record import SimpleRecord

from tests.connector.conftest import T0


def produce_values(log_dir: str, topic: str, records: Sequence[tuple[bytes | None, bytes | None]], *,
                   partition: int = 0, partitions: int = 1, config: dict | None = None, first_n: int = 0) -> None:
    """(key, value) records into ``topic``'s ``partition``, the n-th with timestamp T0 + n days (so they
    fall on different dates); the topic is created with ``partitions`` and ``config`` if missing."""
    with Broker(log_dir, background=False) as broker:
        if topic not in broker.list_topics():
            broker.create_topic(topic, partitions, config or {})
        broker.produce(topic, [SimpleRecord(value, key, T0 + (first_n + n) * 86_400_000)
                               for n, (key, value) in enumerate(records)], partition=partition)


def as_json(**fields) -> bytes:
    return json.dumps(fields).encode()


def run_sync(spark, table: str, **settings) -> None:
    """A sync from ``connector.tables`` run until its trigger (available-now unless given) is done."""
    from connector import tables

    query = tables.sync(spark, table, **settings)
    query.awaitTermination()
    assert query.exception() is None, query.exception()


def spark_rows(spark, table: str, columns: Sequence[str]) -> list[tuple]:
    """The table's rows (``columns`` of each), sorted, as delta-spark reads them."""
    return sorted(tuple(r) for r in spark.read.format("delta").load(table).selectExpr(*columns).collect())


def delta_rs_rows(table: str, columns: Sequence[str]) -> list[tuple]:
    """The same, as delta-rs reads the table."""
    from deltalake import DeltaTable

    data = DeltaTable(table).to_pyarrow_table(columns=list(columns))
    return sorted(zip(*(data[c].to_pylist() for c in columns)))


SEGLOG = os.path.join(os.path.dirname(sys.executable), "seglog")


def seglog(*argv: str, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    """A ``seglog`` command run to its end."""
    env = dict(os.environ if env is None else env, SPARK_LOCAL_IP="127.0.0.1")
    return subprocess.run([SEGLOG, *argv], capture_output=True, text=True, timeout=timeout, env=env)


def start_seglog(*argv: str, env: dict | None = None) -> subprocess.Popen:
    """A ``seglog`` command started in a session of its own (so its JVM and Python workers can be killed
    together with ``kill_session``)."""
    env = dict(os.environ if env is None else env, SPARK_LOCAL_IP="127.0.0.1")
    return subprocess.Popen([SEGLOG, *argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)


def kill_session(process: subprocess.Popen) -> None:
    """SIGKILL the process and everything it started, and wait for it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=60)
    process.stderr.close()


def wait_for_file(path: str, process: subprocess.Popen, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(path):
        if process.poll() is not None:
            raise AssertionError(f"the sync ended ({process.returncode}) before creating {path}: "
                                 f"{process.stderr.read().decode()[-3000:]}")
        assert time.monotonic() < deadline, f"{path} did not appear in {timeout_s} s"
        time.sleep(0.2)


def expected_upsert(records: Sequence[tuple[int, int, bytes | None, bytes | None]]) -> dict[bytes, tuple]:
    """What an upsert table holds after (partition, offset, key, value) records: per key the value with the
    highest offset, keys whose latest record is a tombstone left out."""
    latest: dict[bytes, tuple] = {}
    for partition, offset, key, value in sorted(records, key=lambda r: r[1]):
        if key is not None:
            latest[key] = (partition, offset, value)
    return {key: found for key, found in latest.items() if found[2] is not None}
