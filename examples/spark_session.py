"""A local SparkSession set up the way the examples need it, and progress lines while they run."""

from __future__ import annotations

import os
import sys
import time

_STARTED = time.monotonic()


def progress(message: str) -> None:
    """A progress line on standard error, with the seconds since the example started."""
    print(f"[{time.monotonic() - _STARTED:5.1f}s] {message}", file=sys.stderr, flush=True)


def await_with_progress(query, poll_s: float = 0.5) -> None:
    """Wait for a streaming query to end, printing a line for each micro-batch it completes."""
    seen = -1
    while True:
        done = query.awaitTermination(poll_s)
        for update in query.recentProgress:
            if update["batchId"] > seen:
                seen = update["batchId"]
                progress(f"micro-batch {seen}: {update['numInputRows']} records")
        if done:
            return

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def local_spark(app_name: str, master: str = "local[2]", configure=None):
    """A quiet local session whose Python workers run this interpreter (where seglog is installed).

    ``configure(builder) -> builder`` may add settings (e.g. Delta Lake's) before the session starts.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # a local job needs no other interface
    progress(f"starting Spark ({master})")
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.driver.extraJavaOptions",
                       f"-Dlog4j2.configurationFile={os.path.join(ROOT, 'spark_conf', 'log4j2.properties')}"))
    if configure is not None:
        builder = configure(builder)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    progress(f"Spark {spark.version} is up")
    return spark
