"""Where the fetched JVM artifacts are: ``.jvm/<name>/*.jar`` under the checkout.

``SEGLOG_JVM_DIR`` points elsewhere (a shared cache, an installed copy).
"""

from __future__ import annotations

import os
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent


class JarsMissingError(RuntimeError):
    """The jars of a classpath were never fetched."""


def jvm_dir() -> Path:
    return Path(os.environ.get("SEGLOG_JVM_DIR") or CHECKOUT / ".jvm")


def jars(name: str) -> list[str]:
    """The jar files of the classpath ``name`` (``kafka``, ``spark`` or ``s3``), sorted; an error if not fetched."""
    folder = jvm_dir() / name
    found = sorted(str(p) for p in folder.glob("*.jar"))
    if not found:
        raise JarsMissingError(f"no jars in {folder}: run `make jvm` to fetch them with Maven")
    return found


def classpath(name: str) -> str:
    """A ``java -cp`` value for the classpath ``name``."""
    jars(name)
    return str(jvm_dir() / name / "*")


def spark_jars(s3: bool = False) -> str:
    """The ``spark.jars`` value for Spark's Kafka source and Delta Lake (comma-separated files); with
    ``s3``, Hadoop's S3A file system too (``s3a://`` and ``s3://`` locations)."""
    return ",".join(jars("spark") + (jars("s3") if s3 else []))
