"""Spark reading and writing through a SASL_SSL broker (SCRAM-SHA-512, PEM truststore) with Spark's kafka.*
security options."""

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException, PySparkException

from broker_core.client.remote_broker import RemoteBroker
from format.record_batch import iter_batches
from tests.broker_core.security.sasl_listener_kit import USERS, sasl_ssl, seglog_security, start_sasl_broker
from tests.broker_core.security.tls_kit import TestCa
from tests.connector.conftest import produce_numbered

pytestmark = pytest.mark.slow
SPARK_ERRORS = (AnalysisException, PySparkException, Py4JJavaError)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    return TestCa(tmp_path_factory.mktemp("ca")).server()


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("secured") / "logs")


@pytest.fixture(scope="module")
def secured(log_dir, stores):
    # SASL_SSL offers SCRAM-SHA-512 and PLAIN only.
    produce_numbered(log_dir, "events", 2, 30)
    server = start_sasl_broker(log_dir, stores,
                               **{"listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN"})
    try:
        server.broker.create_topic("written", 1)
        yield server
    finally:
        server.shutdown(timeout_ms=10_000)


def security_options(stores, password: str = USERS["alice"], mechanism: str = "SCRAM-SHA-512") -> dict:
    return {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": mechanism,
            "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                      f'username="alice" password="{password}";',
            "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": str(stores.truststore)}


def test_a_batch_read_through_a_sasl_ssl_broker_reads_every_record_and_explain_hides_the_password(
        spark, secured, stores):
    frame = spark.read.format("seglog").options(
        **{"kafka.bootstrap.servers": sasl_ssl(secured)}, subscribe="events", **security_options(stores)).load()
    rows = frame.select("partition", "offset", "value").collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(p, n) for p in range(2) for n in range(30)]
    assert {bytes(r.value) for r in rows if (r.partition, r.offset) == (1, 29)} == {b"events-1-29" + b"." * 20}
    plan = frame._jdf.queryExecution().toString()
    assert USERS["alice"] not in plan


def test_a_streaming_read_through_a_sasl_ssl_broker_commits_its_group_offsets_there(spark, secured, stores, tmp_path):
    seen: list = []
    reader = spark.readStream.format("seglog").options(
        bootstrap=sasl_ssl(secured), subscribe="events", groupId="secured-etl", startingOffsets="earliest",
        **security_options(stores))
    query = reader.load().writeStream \
        .foreachBatch(lambda batch, _: seen.extend((r.partition, r.offset) for r in batch.collect())) \
        .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start()
    assert query.awaitTermination(240)
    assert len(seen) == 60
    with RemoteBroker(sasl_ssl(secured), seglog_security(stores)) as broker:
        committed = {tp.partition: c.offset for tp, c in broker.committed_offsets("secured-etl").items()}
    assert committed == {0: 30, 1: 30}


def test_a_batch_write_into_the_log_dir_of_a_sasl_ssl_broker_goes_through_its_listener(spark, secured, stores,
                                                                                     log_dir):
    rows = spark.createDataFrame([(b"k%d" % n, b"v%d" % n) for n in range(5)], "key binary, value binary")
    rows.write.format("seglog").options(
        **{"kafka.bootstrap.servers": sasl_ssl(secured)}, path=log_dir, topic="written", **security_options(stores)) \
        .mode("append").save()
    with RemoteBroker(sasl_ssl(secured), seglog_security(stores)) as broker:
        fetched = broker.fetch("written", 0, 0)
    assert [r.value for b in iter_batches(fetched.records) for r in b.records()] == [b"v%d" % n for n in range(5)]


@pytest.mark.parametrize("options, message", [
    ({"password": "not-alices-password"}, "option kafka.sasl.jaas.config: the broker at"),
    ({"mechanism": "SCRAM-SHA-256"}, "option kafka.sasl.mechanism=SCRAM-SHA-256"),
], ids=["a wrong password", "a mechanism the listener does not serve"])
def test_a_refused_login_fails_at_load_naming_the_option(spark, secured, stores, options, message):
    reader = spark.read.format("seglog").options(bootstrap=sasl_ssl(secured), subscribe="events",
                                                 **security_options(stores, **options))
    with pytest.raises(SPARK_ERRORS) as err:
        reader.load()
    assert message in str(err.value)
    assert "not-alices-password" not in str(err.value)


def test_a_truststore_without_the_brokers_ca_fails_at_load_naming_the_option(spark, secured, stores, tmp_path):
    other_ca = TestCa(tmp_path / "other-ca").server().truststore
    options = {**security_options(stores), "kafka.ssl.truststore.location": str(other_ca)}
    reader = spark.read.format("seglog").options(bootstrap=sasl_ssl(secured), subscribe="events", **options)
    with pytest.raises(SPARK_ERRORS) as err:
        reader.load()
    assert f"option kafka.ssl.truststore.location={other_ca}: the certificate of the broker at" in str(err.value)


def test_a_missing_truststore_fails_at_load_naming_the_option(spark, secured, stores, tmp_path):
    options = {**security_options(stores), "kafka.ssl.truststore.location": str(tmp_path / "no-ca.pem")}
    reader = spark.read.format("seglog").options(bootstrap=sasl_ssl(secured), subscribe="events", **options)
    with pytest.raises(SPARK_ERRORS) as err:
        reader.load()
    assert f"option kafka.ssl.truststore.location: Invalid value {tmp_path / 'no-ca.pem'}" in str(err.value)
    assert USERS["alice"] not in str(err.value)
