"""Fetch the pinned JVM artifacts with Maven into ``.jvm/`` under the checkout.

Each ``jvm/<name>/pom.xml`` lists one classpath; ``mvn dependency:copy-dependencies``
(which uses the machine's Maven settings, mirrors and proxies included) copies its
runtime closure into ``.jvm/<name>/``. For a classpath handed to Spark
(``spark.jars``), the jars pyspark already ships are left out by artifact name: two
versions of one library on Spark's classpath is how a job fails at run time.

Usage: python jvm/fetch.py [--pyspark-jars DIR] NAME...
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".jvm"
# The classpaths handed to Spark (spark.jars): pyspark's own jars are left out of them.
SPARK_CLASSPATHS = ("spark", "s3")
_VERSION = re.compile(r"-\d[\w.+-]*\.jar$")


def artifact_name(jar: str) -> str:
    """``jackson-core-2.13.5.jar`` -> ``jackson-core``."""
    return _VERSION.sub("", jar)


def fetch(name: str, provided: set[str]) -> Path:
    pom = ROOT / "jvm" / name / "pom.xml"
    target = CACHE / name
    staging = CACHE / f".{name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    subprocess.run(["mvn", "-q", "-B", "-Dstyle.color=never", "-f", str(pom), "dependency:copy-dependencies",
                    f"-DoutputDirectory={staging}", "-DincludeScope=runtime"], check=True)
    for jar in sorted(os.listdir(staging)):
        if artifact_name(jar) in provided:
            os.remove(staging / jar)
    shutil.rmtree(target, ignore_errors=True)
    os.replace(staging, target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="+", help="the jvm/<name>/pom.xml to fetch")
    parser.add_argument("--pyspark-jars", help="leave out the jars this folder already has")
    args = parser.parse_args(argv)
    provided = set()
    if args.pyspark_jars:
        provided = {artifact_name(j) for j in os.listdir(args.pyspark_jars) if j.endswith(".jar")}
        if not provided:
            parser.error(f"--pyspark-jars {args.pyspark_jars}: no jars there")
    for name in args.names:
        target = fetch(name, provided if name in SPARK_CLASSPATHS else set())
        print(f"{target}: {len(list(target.glob('*.jar')))} jars")
    return 0


if __name__ == "__main__":
    sys.exit(main())
