"""Apache Kafka itself, run from the fetched jars: a KRaft broker on loopback and Kafka's tools.

``KafkaBroker`` formats a fresh log dir and starts one combined broker and controller
(``process.roles=broker,controller``) bound to 127.0.0.1, the reference broker seglog's
tests and benchmarks compare against; ``KafkaCluster`` starts three brokers and a KRaft
controller of their own, the reference for seglog's cluster mode. ``run_tool`` runs the class behind one of Kafka's
``bin/*.sh`` scripts (``TOOLS`` maps the script names) with the same classpath, against
either broker.

A ``KafkaBroker`` can serve more listeners than its PLAINTEXT one (``listeners``: name -> security protocol,
each on a port of its own; their TLS and SASL settings go in ``overrides`` under Kafka's names) and have
SCRAM users from the start (``scram_users``, written into KRaft's metadata when the log dir is formatted,
as ``kafka-storage.sh format --add-scram`` does).
"""

from __future__ import annotations

import base64
import concurrent.futures
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from testbed.processes import free_port  # a loopback port a node keeps across restarts

from .classpath import CHECKOUT, classpath

# The class each of Kafka's scripts runs (bin/kafka-run-class.sh <class>).
TOOLS = {
    "kafka-topics.sh": "org.apache.kafka.tools.TopicCommand",
    "kafka-acls.sh": "org.apache.kafka.tools.AclCommand",
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


def random_cluster_id() -> str:
    """Kafka's cluster id: 16 random bytes in URL-safe base64 without padding, drawn again when it starts with
    "-" (as Kafka's ``Uuid.randomUuid`` does), which a command line would take for an option."""
    while True:
        cluster_id = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


@dataclass(frozen=True)
class ScramUser:
    """A SCRAM credential a node's metadata starts with: ``kafka-storage.sh format --add-scram`` writes it (as
    Kafka stores it: salted, never the password), so SASL listeners take it from the first start. ``name`` and
    ``password`` go unquoted into the ``--add-scram`` value: no ``,``, ``[``, ``]``, ``=`` or ``"`` in them."""

    name: str
    password: str
    mechanism: str = "SCRAM-SHA-512"

    def __post_init__(self) -> None:
        for field_name, value in (("name", self.name), ("password", self.password)):
            if not value or any(c in value for c in ',[]="'):
                raise ValueError(f"SCRAM user {self.name!r}: {field_name} {value!r} is empty or holds one of "
                                 f"',[]=\"', which --add-scram does not take unquoted")

    def add_scram(self) -> str:
        """The value of ``kafka-storage.sh format --add-scram``."""
        return f"{self.mechanism}=[name={self.name},password={self.password}]"


class KafkaBroker:
    """One Apache Kafka node in KRaft mode, on 127.0.0.1, with its own log dir: by default a broker and
    the controller of its own one-voter quorum.

    ``roles`` (``process.roles``), ``node_id``, ``controller_quorum`` (``controller.quorum.voters``, this
    node's own controller listener by default) and ``cluster_id`` make it one node of a larger cluster
    (``KafkaCluster``). ``overrides`` are extra ``server.properties`` lines (Kafka's config names);
    ``cpu`` pins the JVM to one core (``taskset``) for benchmarks.
    """

    def __init__(self, root: str | os.PathLike, *, port: int | None = None,
                 overrides: Mapping[str, object] | None = None, heap: str = "-Xmx768m",
                 cpu: int | None = None, start_timeout_s: float = 90.0, node_id: int = 1,
                 roles: str = "broker,controller", controller_quorum: str | None = None,
                 cluster_id: str | None = None, listeners: Mapping[str, str] | None = None,
                 scram_users: Sequence[ScramUser] = ()):
        self.root = Path(root)
        self.port = port or free_port()
        self.listener_protocols = dict(listeners or {})
        if {"PLAINTEXT", "CONTROLLER"} & self.listener_protocols.keys():
            raise ValueError(f"listeners {sorted(self.listener_protocols)}: PLAINTEXT and CONTROLLER are the "
                             f"node's own; name the others differently")
        self.listener_ports = {name: free_port() for name in self.listener_protocols}
        self.scram_users = tuple(scram_users)
        self.controller_port = free_port()
        self.log_dir = self.root / "kafka-logs"
        self.overrides = dict(overrides or {})
        self.heap = heap
        self.cpu = cpu
        self.start_timeout_s = start_timeout_s
        self.node_id = node_id
        self.roles = roles
        self.controller_quorum = controller_quorum or f"{node_id}@127.0.0.1:{self.controller_port}"
        self.cluster_id = cluster_id
        self.process: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def bootstrap_of(self, listener: str) -> str:
        """Where clients of ``listener`` connect (``"PLAINTEXT"`` or one of ``listeners``)."""
        return self.bootstrap if listener == "PLAINTEXT" else f"127.0.0.1:{self.listener_ports[listener]}"

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles.split(",")

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles.split(",")

    def properties(self) -> dict[str, object]:
        broker_listeners = [f"PLAINTEXT://127.0.0.1:{self.port}",
                            *(f"{name}://127.0.0.1:{port}" for name, port in self.listener_ports.items())]
        listeners = broker_listeners if self.is_broker else []
        if self.is_controller:
            listeners = [*listeners, f"CONTROLLER://127.0.0.1:{self.controller_port}"]
        protocols = {"PLAINTEXT": "PLAINTEXT", "CONTROLLER": "PLAINTEXT", **self.listener_protocols}
        props: dict[str, object] = {
            "process.roles": self.roles,
            "node.id": self.node_id,
            "controller.quorum.voters": self.controller_quorum,
            "listeners": ",".join(listeners),
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": ",".join(f"{k}:{v}" for k, v in protocols.items()),
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
        if self.is_broker:
            props["advertised.listeners"] = ",".join(broker_listeners)
            props["inter.broker.listener.name"] = "PLAINTEXT"
        props.update(self.overrides)
        return props

    def _write_properties(self) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        return path

    def start(self) -> "KafkaBroker":
        """Start the node and return once it says it has started; its log dir is formatted the first time,
        and kept on a later start (a restart after ``stop`` or ``kill``)."""
        self.launch()
        try:
            self.await_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def launch(self) -> None:
        """Start the node's process without waiting for it (``await_ready`` waits)."""
        config = self._write_properties()
        if not (self.log_dir / "meta.properties").exists():
            self.cluster_id = self.cluster_id or random_cluster_id()
            scram = [a for user in self.scram_users for a in ("--add-scram", user.add_scram())]
            fmt = subprocess.run(java_command(TOOLS["kafka-storage.sh"],
                                              ["format", "-t", self.cluster_id, "-c", str(config), *scram]),
                                 capture_output=True, text=True, timeout=120)
            if fmt.returncode != 0:
                raise RuntimeError(f"formatting {self.log_dir} failed: {fmt.stdout}{fmt.stderr}")
        command = java_command("kafka.Kafka", [str(config)], heap=self.heap)
        if self.cpu is not None:
            command = ["taskset", "-c", str(self.cpu), *command]
        out_path = self.root / "kafka.out"
        self._output_from = out_path.stat().st_size if out_path.exists() else 0
        self._out = open(out_path, "ab")
        self.process = subprocess.Popen(command, stdout=self._out, stderr=subprocess.STDOUT,
                                        start_new_session=True)

    def await_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        marker = "Kafka Server started"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"Apache Kafka exited with {self.process.returncode}: {self.output()[-4000:]}")
            if marker in self.output()[self._output_from:]:
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

    def kill(self) -> None:
        """SIGKILL: the node dies where it is, as in a crash."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(30)
        self._out.close()
        self.process = None

    def __enter__(self) -> "KafkaBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()



class KafkaCluster:
    """Apache Kafka brokers ``1..size`` and one KRaft controller (node ``CONTROLLER_ID``), each a JVM of its
    own on 127.0.0.1 under ``root``, sharing one cluster id: the topology of seglog brokers beside one etcd
    (the metadata quorum apart from the brokers, one of the brokers the controller over it in seglog).

    The internal topics keep Kafka's default replication (3, ``min.insync.replicas`` 2); ``overrides`` add to
    every node's properties (the controller's too: ``broker.session.timeout.ms`` is the controller's).
    ``kill``/``start`` a broker by node id; it keeps its port and log dir.
    """

    CONTROLLER_ID = 100

    def __init__(self, root: str | os.PathLike, *, size: int = 3, overrides: Mapping[str, object] | None = None,
                 heap: str = "-Xmx512m", controller_heap: str = "-Xmx256m", cpu: int | None = None):
        root = Path(root)
        cluster_id = random_cluster_id()
        self.controller = KafkaBroker(root / "controller", node_id=self.CONTROLLER_ID, roles="controller",
                                      cluster_id=cluster_id, overrides=overrides, heap=controller_heap, cpu=cpu)
        internal_topics = {"offsets.topic.replication.factor": 3, "transaction.state.log.replication.factor": 3,
                           "transaction.state.log.min.isr": 2,
                           "share.coordinator.state.topic.replication.factor": 3,
                           "share.coordinator.state.topic.min.isr": 2}
        self.brokers = {
            node_id: KafkaBroker(root / f"broker-{node_id}", node_id=node_id, roles="broker",
                                 controller_quorum=self.controller.controller_quorum, cluster_id=cluster_id,
                                 overrides={**internal_topics, **(overrides or {})}, heap=heap, cpu=cpu)
            for node_id in range(1, size + 1)}

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for _, b in sorted(self.brokers.items()))

    def nodes(self) -> list[KafkaBroker]:
        return [self.controller, *(b for _, b in sorted(self.brokers.items()))]

    def start_all(self) -> "KafkaCluster":
        """Start the controller and the brokers side by side; return once every one has started."""
        try:
            with concurrent.futures.ThreadPoolExecutor(len(self.nodes())) as pool:
                list(pool.map(KafkaBroker.launch, self.nodes()))  # formatting is a JVM each: side by side too
            for node in self.nodes():
                node.await_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def start(self, node_id: int) -> None:
        self.brokers[node_id].start()

    def kill(self, node_id: int) -> None:
        self.brokers[node_id].kill()

    def stop(self) -> None:
        """Stop the brokers, then the controller (a broker's controlled shutdown needs it)."""
        for node in reversed(self.nodes()):
            node.stop()

    def __enter__(self) -> "KafkaCluster":
        return self.start_all()

    def __exit__(self, *exc) -> None:
        self.stop()
