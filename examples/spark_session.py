"""A local SparkSession set up the way the examples need it."""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def local_spark(app_name: str, master: str = "local[2]", configure=None):
    """A quiet local session whose Python workers run this interpreter (where seglog is installed).

    ``configure(builder) -> builder`` may add settings (e.g. Delta Lake's) before the session starts.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # a local job needs no other interface
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
    return spark
