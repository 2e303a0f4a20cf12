"""The broker's Prometheus metrics, scraped over HTTP from a running broker after a known workload of real
Kafka clients, parsed with ``prometheus_client``'s parser; and its health endpoints."""

from __future__ import annotations

import json
import os
import shutil
import socket
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import OffsetAndMetadata, TopicPartition

from broker_core import cli
from broker_core.client.protocol_client import ProtocolClient
from broker_core.errors import NONE, UnknownTopicOrPartitionError
from broker_core.protocol import ApiKey
from broker_core.server.broker_server import BrokerServer
from format.record import SimpleRecord
from format.record_batch import build_batch
from tests.broker_core.cli_kit import run
from tests.broker_core.metrics.metrics_kit import get, scrape
from tests.broker_core.server.server_kit import BrokerProcess, create_topic, fetch, produce, start_broker

TOPIC = "orders"
RECORDS = 50
VALUE_SIZE = 100
COMMITTED = 30
GROUP = "metrics-app"
RECORD_BATCH_OVERHEAD = 61  # a RecordBatch v2 header
# A record of a 100-byte value and no key or headers: attributes, timestamp and offset deltas, key and value
# lengths, header count and its own length prefix take 8 to 14 bytes beside the value.
RECORD_OVERHEAD = (8, 14)


@pytest.fixture()
def metrics_broker(tmp_path):
    server = start_broker(tmp_path / "logs", **{"metrics.listener": "http://127.0.0.1:0"})
    try:
        yield server
    finally:
        server.shutdown(timeout_ms=10_000)


def wait_until_ready(base_url: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while get(base_url + "/readyz").status != 200:
        assert time.monotonic() < deadline, get(base_url + "/readyz")
        time.sleep(0.05)


def produce_known_workload(bootstrap: str) -> None:
    with ProtocolClient(bootstrap) as client:
        create_topic(client, TOPIC, 1, {"segment.bytes": "1024"})
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0, compression_type=None)
    try:
        for i in range(RECORDS):  # one batch each (acknowledged before the next): segments of a few batches
            producer.send(TOPIC, bytes([65 + i % 26]) * VALUE_SIZE, partition=0).get(timeout=30)
    finally:
        producer.close()


def consume_and_commit(bootstrap: str) -> KafkaConsumer:
    """A group member that read every record and committed offset COMMITTED (it stays in the group)."""
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=GROUP, auto_offset_reset="earliest",
                             enable_auto_commit=False, request_timeout_ms=10_000)
    seen = 0
    deadline = time.monotonic() + 30
    while seen < RECORDS:
        assert time.monotonic() < deadline, f"consumed {seen} of {RECORDS} records"
        seen += sum(len(batch) for batch in consumer.poll(200).values())
    consumer.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(COMMITTED, "", -1)})
    return consumer


def describe_lag(capsys, bootstrap: str) -> int:
    """The LAG column of ``seglog groups describe --bootstrap`` for the topic's partition 0."""
    code = cli.main(["groups", "describe", "--bootstrap", bootstrap, "--group", GROUP])
    out = capsys.readouterr().out
    assert code == 0, out
    rows = [line.split() for line in out.splitlines() if line.strip()]
    header = next(r for r in rows if r[0] == "GROUP")
    (row,) = [r for r in rows if r[0] == GROUP and r[1] == TOPIC and r[2] == "0"]
    return int(row[header.index("LAG")])


def test_metrics_after_a_known_workload_count_its_records_bytes_requests_and_the_groups_lag(metrics_broker,
                                                                                            capsys):
    base = metrics_broker.metrics_listener.url
    bootstrap = metrics_broker.bootstrap_servers
    produce_known_workload(bootstrap)
    consumer = consume_and_commit(bootstrap)
    try:
        samples = scrape(base)
        cli_lag = describe_lag(capsys, bootstrap)
    finally:
        consumer.close()

    assert samples.value("kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == RECORDS
    bytes_in = samples.value("kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC)
    low, high = RECORD_OVERHEAD
    assert RECORDS * (VALUE_SIZE + low) + RECORD_BATCH_OVERHEAD <= bytes_in
    assert bytes_in <= RECORDS * (VALUE_SIZE + high + RECORD_BATCH_OVERHEAD)
    # The broker stores the batches as they arrive: the bytes in are the log's bytes, file by file.
    partition_dir = os.path.join(metrics_broker.config.log_dirs[0], f"{TOPIC}-0")
    segment_files = [f for f in os.listdir(partition_dir) if f.endswith(".log")]
    assert samples.value("kafka_log_log_size", topic=TOPIC, partition="0") == bytes_in == sum(
        os.path.getsize(os.path.join(partition_dir, f)) for f in segment_files)
    assert samples.value("kafka_log_log_numlogsegments", topic=TOPIC, partition="0") == len(segment_files) > 1
    assert samples.value("kafka_log_log_logendoffset", topic=TOPIC, partition="0") == RECORDS
    assert samples.value("kafka_log_log_logstartoffset", topic=TOPIC, partition="0") == 0
    # The consumer read every batch at least once.
    assert samples.value("kafka_server_brokertopicmetrics_bytesout_total", topic=TOPIC) >= bytes_in

    assert samples.value("kafka_consumergroup_lag", group=GROUP, topic=TOPIC, partition="0") == \
        cli_lag == RECORDS - COMMITTED
    assert samples.value("kafka_consumergroup_current_offset", group=GROUP, topic=TOPIC, partition="0") == COMMITTED
    assert samples.value("kafka_coordinator_group_groupmetadatamanager_numgroupsstable") == 1
    assert samples.value("kafka_coordinator_group_groupmetadatamanager_numgroups") == 1

    for api in ("Produce", "Fetch", "FetchConsumer", "JoinGroup", "OffsetCommit"):
        requests = samples.total("kafka_network_requestmetrics_requests_total", request=api)
        assert requests > 0, api
        # Every request answered is in each of its time histograms once.
        assert samples.value("kafka_network_requestmetrics_totaltimems_count", request=api) == requests
        assert samples.value("kafka_network_requestmetrics_localtimems_count", request=api) == requests
    assert samples.total("kafka_network_requestmetrics_requests_total", request="FetchFollower") == 0
    assert samples.value("kafka_network_requestmetrics_errors_total", request="Produce", error="NONE") == \
        samples.total("kafka_network_requestmetrics_requests_total", request="Produce")
    assert samples.value("kafka_network_requestmetrics_totaltimems_bucket", request="Produce", le="+Inf") == \
        samples.total("kafka_network_requestmetrics_requests_total", request="Produce")
    assert samples.total("kafka_server_socket_server_metrics_connection_count") >= 1  # the consumer's
    for idle in ("kafka_network_socketserver_networkprocessoravgidle_percent",
                 "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent"):
        assert 0.0 <= samples.value(idle) <= 1.0
    assert samples.value("kafka_network_requestchannel_requestqueuesize") == 0
    assert samples.value("kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert samples.value("kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert samples.value("kafka_server_delayedoperationpurgatory_purgatorysize", delayedOperation="Fetch") >= 0


def test_a_long_polling_fetch_counts_its_wait_in_the_purgatory_as_remote_time(metrics_broker):
    base = metrics_broker.metrics_listener.url
    with ProtocolClient(metrics_broker.bootstrap_servers) as client:
        create_topic(client, "quiet")
        started = time.monotonic()
        fetch(client, [("quiet", 0, 0, 1024)], max_wait_ms=300, min_bytes=1)  # nothing comes: it waits 300 ms
        waited_ms = (time.monotonic() - started) * 1000
    deadline = time.monotonic() + 10
    while (samples := scrape(base)).total("kafka_network_requestmetrics_remotetimems_count",
                                          request="FetchConsumer") < 1:
        assert time.monotonic() < deadline, "the fetch was never recorded"
        time.sleep(0.05)
    assert samples.value("kafka_network_requestmetrics_remotetimems_count", request="FetchConsumer") == 1
    remote = samples.value("kafka_network_requestmetrics_remotetimems_sum", request="FetchConsumer")
    total = samples.value("kafka_network_requestmetrics_totaltimems_sum", request="FetchConsumer")
    # The wait, less the little the handler took before parking the fetch; the total ends once the response is
    # written, which the client may see a moment before the broker notes it.
    assert 250 < remote <= total < waited_ms + 50
    assert samples.value("kafka_network_requestmetrics_localtimems_sum", request="FetchConsumer") < 300
    assert samples.value("kafka_network_requestmetrics_remotetimems_bucket", request="FetchConsumer", le="250.0") == 0
    assert samples.value("kafka_network_requestmetrics_remotetimems_bucket", request="FetchConsumer", le="500.0") == 1


def test_the_lag_follows_new_records_and_commits_as_seglog_groups_describe_does(metrics_broker, capsys):
    base = metrics_broker.metrics_listener.url
    bootstrap = metrics_broker.bootstrap_servers
    produce_known_workload(bootstrap)
    consume_and_commit(bootstrap).close()  # the group is Empty, its offsets stay
    late_producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1)
    try:
        for _ in range(7):
            late_producer.send(TOPIC, b"late", partition=0)
        late_producer.flush(timeout=30)
    finally:
        late_producer.close()
    samples = scrape(base)
    assert samples.value("kafka_consumergroup_lag", group=GROUP, topic=TOPIC, partition="0") == \
        describe_lag(capsys, bootstrap) == RECORDS + 7 - COMMITTED
    assert samples.value("kafka_coordinator_group_groupmetadatamanager_numgroupsempty") == 1
    assert samples.value("kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == RECORDS + 7


def test_the_cleaner_figures_show_the_last_clean_of_a_compacted_topic(tmp_path):
    server = start_broker(tmp_path / "logs", **{"metrics.listener": "http://127.0.0.1:0",
                                                "log.cleaner.backoff.ms": 50})
    try:
        base = server.metrics_listener.url
        samples = scrape(base)
        assert samples.value("kafka_log_logcleaner_deadthreadcount") == 0
        assert samples.value("kafka_log_logcleaner_max_clean_time_secs") == 0
        assert samples.value("kafka_log_logcleanermanager_uncleanable_partitions_count",
                             logDirectory=server.config.log_dirs[0]) == 0
        with ProtocolClient(server.bootstrap_servers) as client:
            create_topic(client, "profiles", 1, {"cleanup.policy": "compact", "segment.bytes": "1024",
                                                 "min.cleanable.dirty.ratio": "0.01"})
        producer = KafkaProducer(bootstrap_servers=server.bootstrap_servers, acks=1)
        try:
            for i in range(RECORDS):  # five keys, each written ten times: most records are superseded
                producer.send("profiles", b"v" * VALUE_SIZE, key=b"user-%d" % (i % 5), partition=0).get(timeout=30)
        finally:
            producer.close()
        deadline = time.monotonic() + 60
        while (samples := scrape(base)).value("kafka_log_logcleaner_max_clean_time_secs") == 0:
            assert time.monotonic() < deadline, "the cleaner never cleaned the topic"
            time.sleep(0.1)
        assert 0 < samples.value("kafka_log_logcleaner_cleaner_recopy_percent") < 100  # it dropped records
        assert 0 < samples.value("kafka_log_logcleaner_max_buffer_utilization_percent") <= 100
        assert samples.value("kafka_log_log_size", topic="profiles", partition="0") < \
            samples.value("kafka_server_brokertopicmetrics_bytesin_total", topic="profiles")
    finally:
        server.shutdown(timeout_ms=10_000)


def test_health_is_ok_and_the_broker_ready_once_its_coordinators_have_loaded(metrics_broker):
    base = metrics_broker.metrics_listener.url
    assert get(base + "/healthz").status == 200
    wait_until_ready(base)
    assert get(base + "/readyz").body == "ready\n"
    assert metrics_broker.not_ready() == []


def test_readyz_is_503_naming_the_group_coordinator_while_the_consumer_groups_cannot_be_loaded(tmp_path, caplog):
    # A partition of __consumer_offsets lost while the broker is at max.partitions: it is not created again,
    # so the groups are never loaded, clients keep getting COORDINATOR_LOAD_IN_PROGRESS, and /readyz says why.
    logs = tmp_path / "logs"
    settings = {"offsets.topic.num.partitions": 3, "metrics.listener": "http://127.0.0.1:0"}
    first = start_broker(logs, **settings)
    try:
        produce_known_workload(first.bootstrap_servers)
        consume_and_commit(first.bootstrap_servers).close()
    finally:
        first.shutdown(timeout_ms=10_000)
    shutil.rmtree(logs / "__consumer_offsets-0")
    second = start_broker(logs, **settings, **{"max.partitions": 2})
    try:
        base = second.metrics_listener.url
        deadline = time.monotonic() + 30
        while not any("loading the consumer groups failed" in r.getMessage() for r in caplog.records):
            assert time.monotonic() < deadline, "the broker never reported the failed load"
            time.sleep(0.05)
        reply = get(base + "/readyz")
        # The transaction coordinator loads after the groups: it waits with them.
        assert (reply.status, reply.body) == (503, "not ready: group coordinator: loading __consumer_offsets\n"
                                                   "not ready: transaction coordinator: loading __transaction_state\n")
        assert get(base + "/healthz").status == 200
        assert scrape(base).value("kafka_server_replicamanager_partitioncount") == 3  # the others are served
    finally:
        second.shutdown(timeout_ms=10_000)


def test_a_broker_not_started_says_what_is_not_ready(tmp_path):
    unstarted = BrokerServer({"log.dirs": str(tmp_path / "logs"), "listeners": "PLAINTEXT://127.0.0.1:0"})
    assert unstarted.not_ready() == ["log dirs: loading", "group coordinator: loading __consumer_offsets",
                                     "transaction coordinator: loading __transaction_state",
                                     "listeners: not serving yet"]


def test_metrics_answer_in_openmetrics_when_the_scraper_asks_for_it(metrics_broker):
    reply = get(metrics_broker.metrics_listener.url + "/metrics",
                {"Accept": "application/openmetrics-text; version=1.0.0"})
    assert reply.status == 200 and reply.content_type.startswith("application/openmetrics-text")
    assert reply.body.rstrip().endswith("# EOF")


def test_the_listener_serves_the_web_console_on_every_other_path(metrics_broker):
    with ProtocolClient(metrics_broker.bootstrap_servers) as client:
        create_topic(client, TOPIC, 2, {})
    page = get(metrics_broker.metrics_listener.url + "/")
    assert page.status == 200 and page.content_type.startswith("text/html")
    topics = json.loads(get(metrics_broker.metrics_listener.url + "/api/topics").body)
    assert TOPIC in json.dumps(topics)
    assert get(metrics_broker.metrics_listener.url + "/no-such-page").status == 404


def test_two_brokers_in_one_process_keep_their_metrics_apart(tmp_path):
    first = start_broker(tmp_path / "a", **{"metrics.listener": "http://127.0.0.1:0"})
    second = start_broker(tmp_path / "b", **{"metrics.listener": "http://127.0.0.1:0"})
    try:
        produce_known_workload(first.bootstrap_servers)
        assert scrape(first.metrics_listener.url).value("kafka_server_brokertopicmetrics_messagesin_total",
                                                        topic=TOPIC) == RECORDS
        assert scrape(second.metrics_listener.url).all("kafka_server_brokertopicmetrics_messagesin_total") == []
    finally:
        first.shutdown(timeout_ms=10_000)
        second.shutdown(timeout_ms=10_000)


def test_the_listener_stops_with_the_broker(tmp_path):
    server = start_broker(tmp_path / "logs", **{"metrics.listener": "http://127.0.0.1:0"})
    port = server.metrics_listener.port
    server.shutdown(timeout_ms=10_000)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_seglog_broker_serves_metrics_where_metrics_listener_says(tmp_path):
    broker = BrokerProcess([tmp_path / "logs"], "--metrics-listener", "http://127.0.0.1:0")
    try:
        (line,) = [line for line in broker.lines if "metrics on " in line]
        url = line.split("metrics on ")[1].strip().removesuffix("/metrics")
        wait_until_ready(url)
        assert get(url + "/healthz").status == 200
        assert scrape(url).value("kafka_server_replicamanager_partitioncount") >= 0
    finally:
        assert broker.stop() == 0


@pytest.mark.parametrize("value, reason", [
    ("127.0.0.1:9404", "must start with http://"),
    ("http://127.0.0.1", "names no port"),
    ("http://127.0.0.1:99999", "Port out of range"),
    ("http://127.0.0.1:9404/metrics", "a host and a port only"),
])
def test_a_bad_metrics_listener_stops_the_start_naming_the_setting(tmp_path, value, reason):
    code, _, err = run("broker", "--log-dir", str(tmp_path / "logs"), "--listeners", "PLAINTEXT://127.0.0.1:0",
                       "--metrics-listener", value, timeout=60)
    assert code != 0
    assert f"Invalid value {value} for configuration metrics.listener" in err and reason in err
    assert not os.path.exists(tmp_path / "logs" / "meta.properties")  # refused before anything was touched


def test_a_metrics_listener_port_in_use_stops_the_start_naming_the_setting(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = taken.getsockname()[1]
        code, _, err = run("broker", "--log-dir", str(tmp_path / "logs"), "--listeners", "PLAINTEXT://127.0.0.1:0",
                           "--metrics-listener", f"http://127.0.0.1:{port}", timeout=60)
    finally:
        taken.close()
    assert code != 0 and f"metrics.listener http://127.0.0.1:{port}: cannot listen there" in err


def test_a_produce_error_is_counted_by_its_name_and_a_deleted_topic_s_counters_go_with_it(metrics_broker):
    base = metrics_broker.metrics_listener.url
    with ProtocolClient(metrics_broker.bootstrap_servers) as client:
        create_topic(client, "gone", 1, {})
        batch = build_batch([SimpleRecord(b"v%d" % n, None, 1_700_000_000_000) for n in range(3)])
        assert produce(client, "gone", 0, batch)["error_code"] == NONE
        assert produce(client, "gone", 7, batch)["error_code"] == UnknownTopicOrPartitionError.code
        # A request is counted once its response is written, which the client may see a moment before.
        deadline = time.monotonic() + 10
        while not (samples := scrape(base)).all("kafka_network_requestmetrics_errors_total", request="Produce",
                                                  error="UNKNOWN_TOPIC_OR_PARTITION"):
            assert time.monotonic() < deadline, "the failed produce was never counted"
            time.sleep(0.05)
        assert samples.value("kafka_server_brokertopicmetrics_messagesin_total", topic="gone") == 3
        assert samples.value("kafka_network_requestmetrics_errors_total", request="Produce",
                             error="UNKNOWN_TOPIC_OR_PARTITION") == 1
        deleted = client.send(ApiKey.DELETE_TOPICS, {"topic_names": ["gone"], "timeout_ms": 5000}, version=5)
        assert [t["error_code"] for t in deleted["responses"]] == [NONE]
    samples = scrape(base)
    assert samples.all("kafka_server_brokertopicmetrics_messagesin_total", topic="gone") == []
    assert samples.all("kafka_log_log_size", topic="gone") == []
