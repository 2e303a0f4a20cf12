"""SCRAM's arithmetic, messages and stored credential: RFC 7677's test vector, Kafka's string form."""

from __future__ import annotations

import base64

import pytest

from broker_core.security import scram
from broker_core.security.sasl_client import SaslClient, SaslClientError
from broker_core.security.scram import ScramCredential, ScramMechanism
from broker_core.security.scram_messages import ClientFinalMessage, ClientFirstMessage, ServerFirstMessage

# RFC 7677 section 3: user "user", password "pencil".
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_the_client_computes_rfc_7677s_scram_sha_256_exchange_byte_for_byte():
    client = SaslClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC_CLIENT_NONCE)
    assert client.initial_response() == RFC_CLIENT_FIRST
    assert client.evaluate_challenge(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    assert client.evaluate_challenge(RFC_SERVER_FINAL) is None
    assert client.complete


def test_the_stored_credential_verifies_rfc_7677s_client_proof_and_signs_as_the_rfc_server():
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    mechanism = ScramMechanism.SCRAM_SHA_256
    credential = ScramCredential.from_password(mechanism, "pencil", salt=salt, iterations=4096)
    final = ClientFinalMessage.parse(RFC_CLIENT_FINAL)
    auth_message = b",".join([RFC_CLIENT_FIRST[3:], RFC_SERVER_FIRST, final.without_proof.encode()])
    client_key = scram.recover_client_key(mechanism, credential.stored_key, auth_message, final.proof)
    assert scram.stored_key(mechanism, client_key) == credential.stored_key
    assert b"v=" + base64.b64encode(scram.server_signature(mechanism, credential.server_key, auth_message)) \
        == RFC_SERVER_FINAL


def test_a_client_refuses_a_server_signature_that_is_not_the_credentials():
    client = SaslClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC_CLIENT_NONCE)
    client.initial_response()
    client.evaluate_challenge(RFC_SERVER_FIRST)
    with pytest.raises(SaslClientError, match="Invalid server signature"):
        client.evaluate_challenge(b"v=" + base64.b64encode(bytes(32)))
    assert not client.complete


def test_a_client_refuses_a_server_nonce_that_does_not_extend_its_own():
    client = SaslClient("SCRAM-SHA-512", "user", "pencil", nonce="abc")
    client.initial_response()
    with pytest.raises(SaslClientError, match="nonce"):
        client.evaluate_challenge(b"r=xyz123,s=AAAA,i=4096")


def test_a_client_refuses_fewer_iterations_than_kafkas_minimum():
    client = SaslClient("SCRAM-SHA-512", "user", "pencil", nonce="abc")
    client.initial_response()
    with pytest.raises(SaslClientError, match="4095 is less than the minimum 4096"):
        client.evaluate_challenge(b"r=abc123,s=AAAA,i=4095")


def test_a_credential_is_written_in_kafkas_string_form_and_read_back():
    credential = ScramCredential(b"salt", b"stored", b"server", 8192)
    text = credential.to_kafka_string()
    assert text == "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=8192"
    assert ScramCredential.from_kafka_string(text) == credential


@pytest.mark.parametrize("text", ["salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy",
                                  "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=many",
                                  "salt=!!,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=4096",
                                  "password=pencil"])
def test_a_malformed_credential_string_is_refused_without_echoing_its_keys(text):
    with pytest.raises(ValueError, match="SCRAM credential") as caught:
        ScramCredential.from_kafka_string(text)
    assert "c3RvcmVk" not in str(caught.value)


def test_a_credential_never_shows_its_keys_in_its_repr():
    credential = ScramCredential.from_password(ScramMechanism.SCRAM_SHA_512, "pencil")
    assert repr(credential) == "ScramCredential(iterations=4096)"


def test_user_names_escape_comma_and_equals_in_scram_messages():
    assert scram.sasl_name("a,b=c") == "a=2Cb=3Dc"
    assert scram.username_of("a=2Cb=3Dc") == "a,b=c"
    with pytest.raises(ValueError, match="Invalid username"):
        scram.username_of("a=b")


def test_client_first_message_keeps_its_authorization_id_and_extensions():
    first = ClientFirstMessage.parse(b"n,a=bob,n=bob,r=nonce1,tokenauth=true")
    assert (first.authorization_id, first.saslname, first.nonce) == ("bob", "bob", "nonce1")
    assert first.extensions == {"tokenauth": "true"}
    assert first.gs2_header == "n,a=bob," and first.bare == "n=bob,r=nonce1,tokenauth=true"


@pytest.mark.parametrize("token", [b"y,,n=user,r=abc", b"n,,n=user", b"n,,m=ext,n=user,r=abc", b"n,,n=,r=abc",
                                   b"n,,n=us\xffer,r=abc", b""])
def test_a_client_first_message_outside_the_grammar_is_refused(token):
    with pytest.raises(ValueError, match="Invalid SCRAM client first message"):
        ClientFirstMessage.parse(token)


def test_server_first_message_round_trips():
    message = ServerFirstMessage.parse(RFC_SERVER_FIRST)
    assert message.iterations == 4096 and message.to_bytes() == RFC_SERVER_FIRST


def test_mechanisms_are_found_by_kafkas_name_and_by_the_admin_apis_type():
    assert ScramMechanism.for_name("SCRAM-SHA-512") is ScramMechanism.SCRAM_SHA_512
    assert ScramMechanism.for_type(1) is ScramMechanism.SCRAM_SHA_256
    assert ScramMechanism.for_type(0) is None and ScramMechanism.for_name("PLAIN") is None
