"""Fixtures shared by every test package: real servers started on loopback (SeaweedFS, Apache
Kafka, etcd), a local Spark session with Spark's Kafka source and Delta Lake, small filesystems that
fill up."""

from __future__ import annotations

import os
import random
import shlex
import shutil
import subprocess
import sys

import pytest

from hypothesis import settings

from testbed.etcd import EtcdServer
from testbed.seaweedfs import SeaweedFS

# make test runs the suite in several workers at once (tests/side_by_side.py says how).
pytest_plugins = ["tests.side_by_side"]

# Examples are checked, not timed: on a machine busy with the other workers (and other users) one
# example can take longer than Hypothesis's default deadline of 200 ms, which is no failure of the code.
settings.register_profile("seglog", deadline=None)
settings.load_profile("seglog")


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """One local Spark session for the run, with Spark's Kafka source and Delta Lake on ``spark.jars``."""
    from jvm.classpath import spark_jars

    # Spark's Python workers must run this interpreter (the one with seglog installed).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    warehouse = tmp_path_factory.mktemp("warehouse")
    session = (SparkSession.builder.master("local[2]").appName("seglog-tests")
               .config("spark.jars", spark_jars())
               .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
               .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", "2")
               # Delta rebuilds a table's state from its log in 50 tasks unless told: tests' tables are tiny.
               .config("spark.databricks.delta.snapshotPartitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.warehouse.dir", str(warehouse))
               .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={warehouse}")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture()
def broker_server(tmp_path):
    """A started seglog broker (``BrokerServer``) on 127.0.0.1 over a fresh log dir; shut down (gracefully)
    after the test."""
    from tests.broker_core.server.server_kit import start_broker

    server = start_broker(tmp_path / "logs")
    try:
        yield server
    finally:
        server.shutdown(timeout_ms=10_000)


@pytest.fixture(scope="session")
def apache_kafka(tmp_path_factory):
    """Apache Kafka 4.x in KRaft mode (one broker and controller) on 127.0.0.1, for the whole run."""
    from jvm.apache_kafka import KafkaBroker

    with KafkaBroker(tmp_path_factory.mktemp("apache-kafka")) as broker:
        yield broker


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A SeaweedFS server with its S3 gateway on 127.0.0.1; yields storage options for s3fs."""
    with SeaweedFS(tmp_path_factory.mktemp("seaweedfs")) as server:
        yield server.storage_options


@pytest.fixture()
def etcd_server(tmp_path_factory):
    """A fresh etcd on loopback free ports with a temporary data dir (``EtcdServer``); stopped after the test."""
    server = EtcdServer(tmp_path_factory.mktemp("etcd"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture()
def s3_bucket(s3_server):
    """A fresh bucket on the SeaweedFS server; yields (bucket name, storage options)."""
    import s3fs

    fs = s3fs.S3FileSystem(**s3_server)
    name = f"seglog-{random.randrange(1 << 30):x}"
    fs.mkdir(name)
    # s3fs caches listings per instance; every test gets a fresh view.
    s3fs.S3FileSystem.clear_instance_cache()
    yield name, s3_server
    try:
        fs.rm(name, recursive=True)
    except FileNotFoundError:
        pass


def filesystem_size(size: str) -> int:
    """Bytes in a tmpfs ``size=`` value: ``"4m"``, ``"512k"``, ``"1g"`` or a byte count."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    unit = units.get(size[-1:].lower())
    digits = size[:-1] if unit else size
    if not digits.isdigit():
        raise ValueError(f"filesystem size {size!r}: expected a number of bytes with an optional k, m or g")
    return int(digits) * (unit or 1)


class Tmpfs:
    """Small tmpfs mounts for full-disk tests, unmounted when the test ends."""

    def __init__(self, root):
        self.root = root
        self.mounted: list[str] = []

    def mount(self, size: str) -> str:
        """A fresh tmpfs of ``size`` (``"4m"``); skips the test where mounting is not allowed."""
        path = os.path.join(self.root, f"tmpfs-{len(self.mounted)}")
        os.makedirs(path)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", path],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        self.mounted.append(path)
        return path

    def resize(self, path: str, size: str) -> None:
        """Give a mounted tmpfs room again (or take it away)."""
        subprocess.run(["mount", "-o", f"remount,size={size}", path], check=True)

    def unmount_all(self) -> None:
        for path in self.mounted:
            subprocess.run(["umount", "-l", path], check=False)


FAULT_LAYER_SOURCE = os.path.join(os.path.dirname(__file__), "faults", "enospc.c")
# The fault layer reads its disks from the file this names; a test run under the layer finds
# the built library in the other.
FULL_DISKS_ENV = "SEGLOG_FULL_DISKS"
FAULT_LAYER_ENV = "SEGLOG_FAULT_LAYER"


def fault_layer_loaded() -> bool:
    """Whether this process runs under the fault layer (LD_PRELOAD)."""
    import ctypes

    try:
        ctypes.c_int.in_dll(ctypes.CDLL(None), "seglog_fault_layer_loaded")
    except ValueError:
        return False
    return True


class FaultLayerDisks:
    """Small full-able filesystems where mounting a tmpfs is impossible: directories that
    ``tests/faults/enospc.c``, preloaded into every process of the test, treats as tmpfs
    mounts of a given size (``ENOSPC`` and short writes once their files' blocks fill it,
    ``statvfs`` reporting its size). Same interface as ``Tmpfs``.

    A test using it runs in a child pytest under the layer (``pytest_pyfunc_call`` below),
    so the test itself, an embedded ``Broker`` and every process it starts write through it."""

    def __init__(self, root: str, library: str) -> None:
        self.root = root
        self.library = library
        self.inside = fault_layer_loaded()
        if not self.inside and os.environ.get(FULL_DISKS_ENV):
            pytest.fail(f"{FULL_DISKS_ENV} is set but the fault layer is not loaded (LD_PRELOAD="
                        f"{os.environ.get('LD_PRELOAD')!r})", pytrace=False)
        self.control = os.environ[FULL_DISKS_ENV] if self.inside else os.path.join(root, "full-disks")
        self.sizes: dict[str, int] = {}
        self.failing_fsync: set[str] = set()

    def mount(self, size: str) -> str:
        """A fresh directory that fills up after ``size`` (``"4m"``) bytes of blocks."""
        path = os.path.realpath(os.path.join(self.root, f"disk-{len(self.sizes)}"))
        if len(self.sizes) == 8 or len(path.encode()) >= 512:
            raise ValueError(f"the fault layer holds up to 8 disks, each path below 512 bytes: cannot add {path}")
        os.makedirs(path)
        self.sizes[path] = filesystem_size(size)
        self._write_control()
        return path

    def resize(self, path: str, size: str) -> None:
        """Give a disk room again (or take it away), at once for every process."""
        self.sizes[os.path.realpath(path)] = filesystem_size(size)
        self._write_control()

    def fail_fsync(self, path: str) -> None:
        """From now on ``fsync`` of files on this disk fails with ``EIO`` (write-back failing),
        which no tmpfs can do."""
        self.failing_fsync.add(os.path.realpath(path))
        self._write_control()

    def _write_control(self) -> None:
        temporary = self.control + ".tmp"
        with open(temporary, "w") as f:
            f.writelines(f"{size} {path}{' fsync-eio' if path in self.failing_fsync else ''}\n"
                         for path, size in self.sizes.items())
        os.replace(temporary, self.control)

    def run_in_child(self, item: pytest.Item) -> None:
        """Run ``item`` in a child pytest under the layer; fail or skip as it did."""
        env = dict(os.environ)
        env["LD_PRELOAD"] = " ".join(filter(None, [self.library, env.get("LD_PRELOAD")]))
        env[FULL_DISKS_ENV] = self.control
        env[FAULT_LAYER_ENV] = self.library
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
             f"--basetemp={os.path.join(self.root, 'child')}", item.nodeid],
            cwd=str(item.config.rootpath), env=env, capture_output=True, text=True, timeout=600)
        out = done.stdout + done.stderr
        if done.returncode == 0 and " passed" in out:
            return
        skipped = [line for line in out.splitlines() if line.startswith("SKIPPED")]
        if done.returncode == 0 and skipped:
            pytest.skip(f"under the fault layer: {skipped[0]}")
        pytest.fail(f"under the fault layer ({self.library}), exit {done.returncode}:\n{out}", pytrace=False)


@pytest.fixture(scope="session")
def fault_layer_library(tmp_path_factory) -> str:
    """``tests/faults/enospc.c`` built with the machine's C compiler (skips where there is none)."""
    built = os.environ.get(FAULT_LAYER_ENV)
    if built:
        return built
    if not sys.platform.startswith("linux"):
        pytest.skip(f"the full-disk fault layer is an LD_PRELOAD library for Linux, not {sys.platform}")
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not compiler:
        pytest.skip("no C compiler (cc, gcc or clang on PATH) to build the full-disk fault layer")
    library = str(tmp_path_factory.mktemp("fault-layer") / "enospc.so")
    done = subprocess.run([*shlex.split(compiler), "-shared", "-fPIC", "-O2", "-Wall", "-o", library, FAULT_LAYER_SOURCE,
                           "-ldl", "-lpthread"], capture_output=True, text=True)
    assert done.returncode == 0, f"{compiler} could not build {FAULT_LAYER_SOURCE}: {done.stderr}"
    return library


@pytest.fixture(params=["tmpfs", "fault-layer"])
def small_filesystem(request, tmp_path):
    """Small filesystems a full-disk test fills: ``mount(size)`` gives a fresh one's path,
    ``resize(path, size)`` gives it room again. Each test runs twice: on a real tmpfs (skipped
    where mounting is impossible) and on the fault layer (``FaultLayerDisks``)."""
    if request.param == "tmpfs":
        tmpfs = Tmpfs(str(tmp_path))
        try:
            yield tmpfs
        finally:
            tmpfs.unmount_all()
    else:
        yield FaultLayerDisks(str(tmp_path), request.getfixturevalue("fault_layer_library"))


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """A test on the fault layer runs in a child pytest that has the layer preloaded."""
    disks = pyfuncitem.funcargs.get("small_filesystem")
    if isinstance(disks, FaultLayerDisks) and not disks.inside:
        disks.run_in_child(pyfuncitem)
        return True
    return None


@pytest.fixture()
def small_tmpfs(tmp_path):
    """A ``Tmpfs`` alone (skipped where mounting is impossible); full-disk tests use ``small_filesystem``."""
    tmpfs = Tmpfs(str(tmp_path))
    try:
        yield tmpfs
    finally:
        tmpfs.unmount_all()


@pytest.fixture()
def descriptor_limit():
    """``descriptor_limit(256)`` is a ``preexec_fn`` that lowers a child's RLIMIT_NOFILE (soft and hard)."""
    import resource

    def limit(count: int):
        return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (count, count))

    return limit
