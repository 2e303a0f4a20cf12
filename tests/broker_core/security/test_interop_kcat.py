"""kcat (librdkafka's command-line client) over SASL_SSL with SCRAM-SHA-512 and PLAIN: produce, read back,
read in a consumer group; a wrong password refused while a witness keeps working."""

from __future__ import annotations

import subprocess

import pytest

from broker_core.client.remote_broker import RemoteBroker
from testbed.kcat import kcat_command
from tests.broker_core.security.sasl_listener_kit import USERS, sasl_ssl, seglog_security

KCAT = kcat_command()
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not in .tools/kcat (make test fetches it with "
                                                     "apt-get download; see testbed/kcat.py)")
VALUES = [f"value-{n:03d}" for n in range(25)]


def kcat(server, server_stores, *args: str, mechanism: str = "SCRAM-SHA-512", password: str = USERS["alice"],
         stdin: str | None = None) -> subprocess.CompletedProcess:
    command, env = KCAT
    return subprocess.run(
        [*command, "-b", sasl_ssl(server), "-X", "security.protocol=SASL_SSL", "-X", f"sasl.mechanisms={mechanism}",
         "-X", "sasl.username=alice", "-X", f"sasl.password={password}",
         "-X", f"ssl.ca.location={server_stores.truststore}", *args],
        input=stdin, capture_output=True, text=True, env=env, timeout=60)


def _topic(server, server_stores, name: str) -> str:
    with RemoteBroker(sasl_ssl(server), seglog_security(server_stores)) as broker:
        broker.create_topic(name, 2)
    return name


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_kcat_produces_and_reads_back_over_sasl_ssl(sasl_broker, server_stores, mechanism):
    topic = _topic(sasl_broker, server_stores, f"kcat-{mechanism.lower()}")
    produced = kcat(sasl_broker, server_stores, "-P", "-t", topic, "-K", ":", mechanism=mechanism,
                    stdin="".join(f"k{n % 5}:{v}\n" for n, v in enumerate(VALUES)))
    assert produced.returncode == 0, produced.stderr
    read = kcat(sasl_broker, server_stores, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%k=%s\n",
                mechanism=mechanism)
    assert read.returncode == 0, read.stderr
    assert sorted(read.stdout.splitlines()) == sorted(f"k{n % 5}={v}" for n, v in enumerate(VALUES))


def test_kcat_reads_in_a_consumer_group_over_sasl_ssl(sasl_broker, server_stores):
    topic = _topic(sasl_broker, server_stores, "kcat-group")
    assert kcat(sasl_broker, server_stores, "-P", "-t", topic, stdin="".join(f"{v}\n" for v in VALUES)).returncode == 0
    read = kcat(sasl_broker, server_stores, "-G", "kcat-readers", "-X", "auto.offset.reset=earliest", "-e", "-q",
                "-f", "%s\n", topic)
    assert read.returncode == 0, read.stderr
    assert sorted(read.stdout.splitlines()) == VALUES


def test_kcat_with_a_wrong_password_is_refused_and_others_keep_working(sasl_broker, server_stores):
    refused = kcat(sasl_broker, server_stores, "-L", "-m", "10", password="not-the-password")
    assert refused.returncode != 0
    assert "Authentication failed" in refused.stderr or "SASL authentication error" in refused.stderr, refused.stderr
    listed = kcat(sasl_broker, server_stores, "-L", "-m", "10")
    assert listed.returncode == 0 and "broker" in listed.stdout, listed.stderr
