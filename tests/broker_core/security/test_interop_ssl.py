"""Kafka's Python clients against a broker with an SSL listener (client certificates required) beside a
PLAINTEXT one: produce, consume and a consumer group over TLS; Metadata answers each with its own listener."""

from __future__ import annotations

import pytest

from tests.broker_core.security.secure_clients_kit import LIBRARIES, ClientSecurity, expected_values, round_trip
from tests.broker_core.security.tls_kit import server_ssl_props
from tests.broker_core.server.server_kit import start_broker


@pytest.fixture(scope="module")
def ssl_broker(tmp_path_factory, server_stores):
    props = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
             **server_ssl_props(server_stores, client_auth="required")}
    server = start_broker(tmp_path_factory.mktemp("ssl-broker") / "logs", **props)
    yield server
    server.shutdown(timeout_ms=10_000)


def ssl_bootstrap(server) -> str:
    return f"127.0.0.1:{server.bound_port('SSL')}"


def client_security(client_stores) -> ClientSecurity:
    return ClientSecurity("SSL", cafile=str(client_stores.truststore), certfile=str(client_stores.certificate),
                          keyfile=str(client_stores.key))


@pytest.mark.parametrize("lib", LIBRARIES)
def test_each_client_produces_consumes_and_commits_in_a_group_over_ssl_with_a_client_certificate(
        ssl_broker, client_stores, lib):
    values = round_trip(lib, ssl_bootstrap(ssl_broker), client_security(client_stores), f"ssl-{lib}",
                        f"group-ssl-{lib}")
    assert values == expected_values()


def test_metadata_advertises_the_endpoint_of_the_listener_the_request_came_in_on(ssl_broker, client_stores):
    from confluent_kafka.admin import AdminClient

    ssl_port, plain_port = ssl_broker.bound_port("SSL"), ssl_broker.bound_port("PLAINTEXT")
    over_tls = AdminClient({"bootstrap.servers": ssl_bootstrap(ssl_broker), **client_security(client_stores)
                            .confluent()}).list_topics(timeout=10)
    in_the_clear = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain_port}"}).list_topics(timeout=10)
    assert [(b.host, b.port) for b in over_tls.brokers.values()] == [("127.0.0.1", ssl_port)]
    assert [(b.host, b.port) for b in in_the_clear.brokers.values()] == [("127.0.0.1", plain_port)]


def test_a_client_without_a_certificate_is_refused_where_certificates_are_required(ssl_broker, client_stores):
    from confluent_kafka.admin import AdminClient
    from confluent_kafka import KafkaException

    no_certificate = ClientSecurity("SSL", cafile=str(client_stores.truststore))
    admin = AdminClient({"bootstrap.servers": ssl_bootstrap(ssl_broker), **no_certificate.confluent()})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    # The listener still serves clients that show one.
    assert round_trip("confluent-kafka", ssl_bootstrap(ssl_broker), client_security(client_stores),
                      "ssl-after-refusal", "group-after-refusal") == expected_values()
