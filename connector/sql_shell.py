"""``seglog sql``: Spark's ``spark-sql`` shell, set up for seglog from any directory.

    seglog sql -d logdir=/data/logs -f examples/inspect.sql
    seglog sql -e "CREATE TEMPORARY VIEW o USING seglog OPTIONS (path '/data/logs', view 'offsets'); SELECT * FROM o"

The shell pyspark installs (``<pyspark>/bin/spark-sql``) needs ``SPARK_HOME``,
Python workers that have seglog (this interpreter), and settings whose paths
``spark_conf/spark-defaults.conf`` gives relative to the checkout; left alone
it also writes its Derby metastore (``metastore_db/``, ``derby.log``) and
``spark-warehouse/`` into the working directory. Here all of that is resolved:
the properties file and log4j2 settings by absolute path, the workers and the
driver on this interpreter, the metastore and warehouse in a temporary
directory removed when the shell ends (or in ``--metastore DIR``, kept), and
result columns printed with a header line. Every other argument goes to
spark-sql unchanged, after these settings, so a ``--conf`` given there wins.

No Spark is imported here: the shell is a child process.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPARK_CONF = os.path.join(ROOT, "spark_conf")


@dataclass(frozen=True)
class ShellArguments:
    metastore: str | None
    spark_sql: tuple[str, ...]


def parse_arguments(argv: Sequence[str]) -> ShellArguments:
    """``--metastore DIR`` is seglog's; everything else is spark-sql's."""
    rest = list(argv)
    metastore = None
    if "--metastore" in rest:
        i = rest.index("--metastore")
        if i + 1 >= len(rest):
            raise ValueError("--metastore needs a directory")
        metastore = os.path.abspath(rest[i + 1])
        del rest[i:i + 2]
    return ShellArguments(metastore, tuple(rest))


def spark_home() -> str:
    spec = importlib.util.find_spec("pyspark")  # found without importing it
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("pyspark is not installed in this Python environment; install seglog's spark extra")
    return list(spec.submodule_search_locations)[0]


def shell_command(arguments: ShellArguments, scratch: str, python: str = sys.executable) -> list[str]:
    """The spark-sql command line: seglog's settings first, the user's arguments last."""
    command = [os.path.join(spark_home(), "bin", "spark-sql")]
    defaults = os.path.join(SPARK_CONF, "spark-defaults.conf")
    if os.path.exists(defaults):
        command += ["--properties-file", defaults]
    java_options = [f"-Dderby.system.home={scratch}", f"-Dderby.stream.error.file={scratch}/derby.log"]
    log4j = os.path.join(SPARK_CONF, "log4j2.properties")
    if os.path.exists(log4j):
        java_options.insert(0, f"-Dlog4j2.configurationFile={log4j}")
        command += ["--conf", f"spark.executor.extraJavaOptions=-Dlog4j2.configurationFile={log4j}"]
    command += [
        # Replaces spark.driver.extraJavaOptions of the properties file (whose path is relative).
        "--driver-java-options", " ".join(java_options),
        "--conf", f"spark.pyspark.python={python}",
        "--conf", f"spark.pyspark.driver.python={python}",
        "--conf", f"spark.sql.warehouse.dir={os.path.join(scratch, 'spark-warehouse')}",
        "--conf", "spark.sql.cli.print.header=true",
    ]
    return command + list(arguments.spark_sql)


def shell_environment(python: str = sys.executable) -> dict[str, str]:
    return dict(os.environ, SPARK_HOME=spark_home(), PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python)


def run_spark_sql(argv: Sequence[str]) -> int:
    """Run the shell to its end; returns its exit status."""
    arguments = parse_arguments(argv)
    if arguments.metastore is not None:
        os.makedirs(arguments.metastore, exist_ok=True)
    scratch = arguments.metastore or tempfile.mkdtemp(prefix="seglog-sql-")
    command = shell_command(arguments, scratch)
    # Ctrl-C belongs to the shell (it cancels a running statement); this process only waits.
    # A handler, not SIG_IGN: an ignored signal would stay ignored in the JVM.
    previous = signal.signal(signal.SIGINT, lambda signum, frame: None)
    try:
        return subprocess.call(command, env=shell_environment())
    finally:
        signal.signal(signal.SIGINT, previous)
        if arguments.metastore is None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(run_spark_sql(sys.argv[1:]))
