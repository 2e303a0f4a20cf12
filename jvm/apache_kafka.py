"""Apache Kafka itself, run from the fetched jars: a KRaft broker on loopback and Kafka's tools.

``KafkaBroker`` formats a fresh log dir and starts one combined broker and controller
(``process.roles=broker,controller``) bound to 127.0.0.1, the reference broker seglog's
tests and benchmarks compare against. ``run_tool`` runs the class behind one of Kafka's
``bin/*.sh`` scripts (``TOOLS`` maps the script names) with the same classpath, against
either broker.
"""

from __future__ import annotations

import base64
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Mapping, Sequence

from .classpath import CHECKOUT, classpath

# The class each of Kafka's scripts runs (bin/kafka-run-class.sh <class>).
TOOLS = {
    "kafka-topics.sh": "org.apache.kafka.tools.TopicCommand",
    "kafka-console-producer.sh": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer.sh": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-consumer-groups.sh": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-dump-log.sh": "org.apache.kafka.tools.DumpLogSegments",
    "kafka-transactions.sh": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-producer-perf-test.sh": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test.sh": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-storage.sh": "kafka.tools.StorageTool",
}
LOG4J_CONFIG = CHECKOUT / "jvm" / "kafka" / "log4j2.properties"
TOOL_HEAP = "-Xmx256m"


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    return os.path.join(home, "bin", "java") if home else (shutil.which("java") or "java")


def java_command(main_class: str, args: Sequence[str], heap: str = TOOL_HEAP,
                 jvm_options: Sequence[str] = ()) -> list[str]:
    return [java(), heap, *jvm_options, f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
            "-cp", classpath("kafka"), main_class, *args]


def run_tool(script: str, *args: str, input: str | bytes | None = None, timeout: float = 120,
             env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the Kafka tool ``script`` (``"kafka-topics.sh"``) with ``args``; stdout and stderr captured as text."""
    main_class = TOOLS.get(script, script)
    text = not isinstance(input, bytes)
    return subprocess.run(java_command(main_class, list(args)), input=input, capture_output=True, text=text,
                          timeout=timeout, env={**os.environ, **(env or {})})


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def random_cluster_id() -> str:
    """Kafka's cluster id: 16 random bytes in URL-safe base64 without padding, drawn again when it starts with
    "-" (as Kafka's ``Uuid.randomUuid`` does), which a command line would take for an option."""
    while True:
        cluster_id = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


class KafkaBroker:
    """One Apache Kafka broker and controller in KRaft mode, on 127.0.0.1, with its own log dir.

    ``overrides`` are extra ``server.properties`` lines (Kafka's config names);
    ``cpu`` pins the JVM to one core (``taskset``) for benchmarks.
    """

    def __init__(self, root: str | os.PathLike, *, port: int | None = None,
                 overrides: Mapping[str, object] | None = None, heap: str = "-Xmx768m",
                 cpu: int | None = None, start_timeout_s: float = 90.0):
        self.root = Path(root)
        self.port = port or free_port()
        self.controller_port = free_port()
        self.log_dir = self.root / "kafka-logs"
        self.overrides = dict(overrides or {})
        self.heap = heap
        self.cpu = cpu
        self.start_timeout_s = start_timeout_s
        self.process: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def properties(self) -> dict[str, object]:
        props: dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.log_dir),
            "num.partitions": 1,
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
        }
        props.update(self.overrides)
        return props

    def _write_properties(self) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        return path

    def start(self) -> "KafkaBroker":
        config = self._write_properties()
        cluster_id = random_cluster_id()
        fmt = subprocess.run(java_command(TOOLS["kafka-storage.sh"], ["format", "-t", cluster_id, "-c", str(config)]),
                             capture_output=True, text=True, timeout=120)
        if fmt.returncode != 0:
            raise RuntimeError(f"formatting {self.log_dir} failed: {fmt.stdout}{fmt.stderr}")
        command = java_command("kafka.Kafka", [str(config)], heap=self.heap)
        if self.cpu is not None:
            command = ["taskset", "-c", str(self.cpu), *command]
        self._out = open(self.root / "kafka.out", "wb")
        self.process = subprocess.Popen(command, stdout=self._out, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        try:
            self._await_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _await_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        marker = "Kafka Server started"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"Apache Kafka exited with {self.process.returncode}: {self.output()[-4000:]}")
            if marker in self.output():
                return
            time.sleep(0.2)
        raise TimeoutError(f"Apache Kafka did not start within {self.start_timeout_s} s: {self.output()[-4000:]}")

    def output(self) -> str:
        try:
            return (self.root / "kafka.out").read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self, timeout_s: float = 30.0) -> None:
        """A controlled shutdown (SIGTERM), killed after ``timeout_s``."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._out.close()
        self.process = None

    def __enter__(self) -> "KafkaBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

