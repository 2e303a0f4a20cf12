"""seglog's own client on secured listeners: Kafka client properties (``--command-config FILE``) read as Kafka's
tools read them, and the CLI working through an SSL listener that requires client certificates."""

from __future__ import annotations

import pytest

from broker_core.client.client_security import ClientSecurity, parse_jaas_config, read_client_properties
from broker_core.errors import InvalidConfigurationError
from tests.broker_core.cli_kit import run
from tests.broker_core.security.tls_kit import server_ssl_props
from tests.broker_core.server.server_kit import start_broker

SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="p=s\\"w";'


def test_a_client_properties_file_is_read_as_java_properties(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("# a comment\n! another\nsecurity.protocol = SASL_SSL\nsasl.mechanism: SCRAM-SHA-512\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
                    '    username="alice" password="secret";\n\n')
    assert read_client_properties(str(path)) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
                            'password="secret";'}


def test_a_line_without_a_value_is_refused_with_its_file_and_line(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SSL\n=oops\n")
    with pytest.raises(InvalidConfigurationError, match=f"{path}:2: expected key=value"):
        read_client_properties(str(path))


def test_the_jaas_config_gives_the_login_module_and_its_quoted_options():
    assert parse_jaas_config(SCRAM_JAAS) == ("org.apache.kafka.common.security.scram.ScramLoginModule",
                                             {"username": "alice", "password": 'p=s"w'})


def test_sasl_settings_become_the_mechanism_username_and_password():
    security = ClientSecurity.from_props({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                                          "sasl.jaas.config": SCRAM_JAAS})
    assert (security.sasl_mechanism, security.username, security.password) == ("SCRAM-SHA-512", "alice", 'p=s"w')
    assert security.ssl_context is None


@pytest.mark.parametrize("props, key", [
    ({"security.protocol": "TLS"}, "security.protocol"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.jaas.config": SCRAM_JAAS},
     "sasl.mechanism"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config"),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/nowhere/ca.pem"}, "ssl.truststore.location"),
])
def test_client_settings_that_cannot_work_are_refused_naming_the_setting(props, key):
    with pytest.raises(InvalidConfigurationError, match=f"for configuration {key}:"):
        ClientSecurity.from_props(props)


@pytest.fixture()
def ssl_broker(tmp_path, server_stores):
    props = {"listeners": "SSL://127.0.0.1:0", **server_ssl_props(server_stores, client_auth="required")}
    server = start_broker(tmp_path / "logs", **props)
    yield server
    server.shutdown(timeout_ms=10_000)


def test_the_cli_creates_produces_and_consumes_through_an_ssl_listener_with_a_command_config_file(
        ssl_broker, client_stores, tmp_path):
    config = tmp_path / "client.properties"
    config.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\n"
                      f"ssl.truststore.location={client_stores.truststore}\n"
                      f"ssl.keystore.type=PEM\nssl.keystore.location={client_stores.keystore}\n")
    where = ["--bootstrap", f"127.0.0.1:{ssl_broker.bound_port('SSL')}", "--command-config", str(config)]
    assert run("topics", "create", *where, "--topic", "secured")[0] == 0
    assert run("produce", *where, "--topic", "secured", stdin="one\ntwo\n")[0] == 0
    code, out, err = run("consume", *where, "--topic", "secured", "--from-beginning", "--timeout-ms", "0")
    assert (code, out.split()) == (0, ["one", "two"]), err
    code, out, _ = run("cluster", *where)
    assert code == 0 and ["0", "127.0.0.1", str(ssl_broker.bound_port("SSL"))] in [
        line.split()[:3] for line in out.splitlines()]


def test_without_the_command_config_the_cli_fails_on_an_ssl_listener_with_a_one_line_error(ssl_broker):
    code, _, err = run("topics", "list", "--bootstrap", f"127.0.0.1:{ssl_broker.bound_port('SSL')}", timeout=60)
    assert code != 0
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
