"""A streaming query from a seglog topic into the exactly-once seglog sink, for crash tests: run in the
test's Spark session, or in a driver process of its own that pauses at a point of its first commit
(``SEGLOG_SINK_PAUSE``) to be SIGKILLed there.

The query reads topic ``src`` of ``source`` from the earliest offset, ten records a micro-batch, and
writes key and value to topic ``dst`` of ``sink`` (options given to the kit's functions add to or
override the sink's)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from typing import Iterator, Mapping

from broker_core import Broker
from broker_core.errors import LogDirInUseError
from connector.sink_transaction import PAUSE_ENV

ROWS = 30
PER_TRIGGER = 10  # three micro-batches of ten rows
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_DRIVER = textwrap.dedent("""
    import json, os, sys
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession
    from tests.connector.driver_kit import start_query
    source, sink, checkpoint, options = sys.argv[1:5]
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .getOrCreate())
    start_query(spark, source, sink, checkpoint, json.loads(options)).awaitTermination()
""")


def start_query(spark, source: str, sink: str, checkpoint: str, options: Mapping[str, str]):
    writer = (spark.readStream.format("seglog").option("path", source).option("subscribe", "src")
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(PER_TRIGGER)).load()
              .selectExpr("key", "value")
              .writeStream.format("seglog").option("path", sink).option("topic", "dst")
              .option("checkpointLocation", checkpoint))
    for name, value in options.items():
        writer = writer.option(name, value)
    return writer.trigger(availableNow=True).start()


def run_query(spark, source: str, sink: str, checkpoint: str, **options: str) -> None:
    """Run the query to the end in this session."""
    query = start_query(spark, source, sink, checkpoint, options)
    query.awaitTermination()
    assert query.exception() is None


@contextlib.contextmanager
def paused_driver(point: str, source: str, sink: str, checkpoint: str, marker: str,
                  **options: str) -> Iterator[subprocess.Popen]:
    """A driver process (a session of its own) running the query, paused at ``point`` of its first commit;
    SIGKILLed, with the worker that commits, on leaving."""
    env = {**os.environ, PAUSE_ENV: f"{point}:{marker}"}
    driver = subprocess.Popen([sys.executable, "-c", _DRIVER, source, sink, checkpoint, json.dumps(options)],
                              env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              start_new_session=True)
    committer = 0
    try:
        deadline = time.monotonic() + 180
        while not os.path.exists(marker):
            if driver.poll() is not None:
                raise AssertionError(f"the driver ended ({driver.returncode}) before pausing at {point}: "
                                     f"{driver.stderr.read().decode()[-3000:]}")
            assert time.monotonic() < deadline, f"the driver did not reach {point} in 180 s"
            time.sleep(0.2)
        time.sleep(0.2)  # the marker is written: its pid follows
        with open(marker) as f:
            committer = int(f.read() or 0)
        yield driver
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
        if committer:
            try:  # the Python worker that commits, should it live outside the driver's session
                os.kill(committer, signal.SIGKILL)
            except ProcessLookupError:
                pass
        driver.stderr.close()


def kill_driver_at(point: str, source: str, sink: str, checkpoint: str, marker: str, **options: str) -> None:
    """Run the query in a driver process that pauses at ``point`` of its first commit; SIGKILL it there.
    Writing into a log dir of its own (no ``kafka.bootstrap.servers``), wait until the dir's lock is free."""
    with paused_driver(point, source, sink, checkpoint, marker, **options):
        pass
    if "kafka.bootstrap.servers" not in options:
        wait_for_log_dir(sink)


def wait_for_log_dir(log_dir: str) -> None:
    """Wait until the killed processes are gone: the log dir's lock is free again."""
    deadline = time.monotonic() + 30
    while True:
        try:
            Broker(log_dir, background=False).close()
            return
        except LogDirInUseError:
            assert time.monotonic() < deadline, f"{log_dir} is still locked 30 s after the driver was killed"
            time.sleep(0.2)


def expected(rows: int = ROWS) -> Counter:
    """Each source value (its ``src-0-<n>`` prefix) once."""
    return Counter({f"src-0-{n}".encode(): 1 for n in range(rows)})
