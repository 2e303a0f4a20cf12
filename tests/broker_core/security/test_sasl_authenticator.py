"""The broker's SASL authenticator, one connection at a time, as frames in and frames out."""

from __future__ import annotations

import pytest

from broker_core.clock import MockTime
from broker_core.controller import zk_data
from broker_core.controller.in_memory_metadata_store import InMemoryMetadataStore
from broker_core.controller.metadata_store import Put
from broker_core.protocol import ApiKey
from broker_core.controller.credential_etcd import EtcdCredentialStore
from broker_core.security.principal import ANONYMOUS, KafkaPrincipal
from broker_core.security.sasl_authenticator import SaslAuthenticationFailed
from broker_core.security.sasl_client import SaslClient
from broker_core.security import scram
from broker_core.security.scram import ScramCredential, ScramMechanism
from broker_core.security.scram_messages import (ClientFinalMessage, ClientFirstMessage, ServerFinalMessage,
                                                  ServerFirstMessage, auth_message)

from sasl_kit import (ALL_MECHANISMS, API_VERSIONS_ANSWER, authenticate, authenticator, credentials_for, handshake,
                      log_in, request, response)

ALICE = KafkaPrincipal("User", "alice")
INVALID_CREDENTIALS = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


@pytest.fixture
def store():
    return credentials_for({"alice": "alice-secret", "bob": "bob-secret"})


def _refusal(caught, api_key=ApiKey.SASL_AUTHENTICATE, version=2) -> dict:
    assert caught.value.response is not None, caught.value.reason
    return response(api_key, version, caught.value.response)


@pytest.mark.parametrize("mechanism", ALL_MECHANISMS)
def test_a_user_with_the_right_password_is_authenticated_as_their_principal(store, mechanism):
    auth = authenticator(store)
    answer = log_in(auth, mechanism, "alice", "alice-secret")
    assert answer["error_code"] == 0 and answer["session_lifetime_ms"] == 0
    assert auth.complete and auth.principal == ALICE and auth.mechanism == mechanism
    assert auth.session_expiration_ms is None


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_wrong_scram_password_fails_with_kafkas_invalid_credentials_message(store, mechanism):
    auth = authenticator(store)
    with pytest.raises(SaslAuthenticationFailed) as caught:
        log_in(auth, mechanism, "alice", "wrong")
    answer = _refusal(caught)
    assert answer["error_code"] == 58  # SASL_AUTHENTICATION_FAILED
    assert answer["error_message"] == INVALID_CREDENTIALS.format(mechanism)
    assert not auth.complete and auth.principal == ANONYMOUS


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_an_unknown_scram_user_fails_at_the_proof_exactly_like_a_wrong_password(store, mechanism):
    auth = authenticator(store)
    assert handshake(auth, mechanism)["error_code"] == 0
    client = SaslClient(mechanism, "mallory", "anything")
    first = authenticate(auth, client.initial_response())
    assert first["error_code"] == 0  # a salt and iterations, as for a real user
    with pytest.raises(SaslAuthenticationFailed) as caught:
        authenticate(auth, client.evaluate_challenge(first["auth_bytes"]))
    assert _refusal(caught)["error_message"] == INVALID_CREDENTIALS.format(mechanism)
    assert "unknown user" in caught.value.reason


def test_an_unknown_user_gets_the_same_salt_every_time(store):
    salts = []
    for _ in range(2):
        auth = authenticator(store)
        handshake(auth, "SCRAM-SHA-256")
        salts.append(authenticate(auth, SaslClient("SCRAM-SHA-256", "mallory", "x").initial_response())["auth_bytes"]
                     .split(b",s=")[1])
    assert salts[0] == salts[1]


def test_a_wrong_plain_password_fails_with_kafkas_plain_message(store):
    auth = authenticator(store)
    with pytest.raises(SaslAuthenticationFailed) as caught:
        log_in(auth, "PLAIN", "alice", "wrong")
    answer = _refusal(caught)
    assert (answer["error_code"], answer["error_message"]) == (58, "Authentication failed: Invalid username or password")


def test_an_unknown_plain_user_gets_the_same_answer_as_a_wrong_password(store):
    auth = authenticator(store)
    with pytest.raises(SaslAuthenticationFailed) as caught:
        log_in(auth, "PLAIN", "mallory", "alice-secret")
    assert _refusal(caught)["error_message"] == "Authentication failed: Invalid username or password"


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_plain_checks_the_password_against_either_scram_credential(mechanism):
    auth = authenticator(credentials_for({"carol": "carol-secret"}, mechanisms=[mechanism]))
    assert log_in(auth, "PLAIN", "carol", "carol-secret")["error_code"] == 0
    assert auth.principal == KafkaPrincipal("User", "carol")


@pytest.mark.parametrize("token,message", [
    (b"alice\0alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"\0\0alice-secret", "Authentication failed: username not specified"),
    (b"\0alice\0", "Authentication failed: password not specified"),
    (b"bob\0alice\0alice-secret",
     "Authentication failed: Client requested an authorization id that is different from username"),
])
def test_a_malformed_plain_message_is_refused_with_kafkas_message(store, token, message):
    auth = authenticator(store)
    handshake(auth, "PLAIN")
    with pytest.raises(SaslAuthenticationFailed) as caught:
        authenticate(auth, token)
    assert _refusal(caught)["error_message"] == message


def test_plain_accepts_an_authorization_id_equal_to_the_user(store):
    auth = authenticator(store)
    handshake(auth, "PLAIN")
    assert authenticate(auth, b"alice\0alice\0alice-secret")["error_code"] == 0
    assert auth.principal == ALICE


def test_a_scram_client_asking_for_another_authorization_id_is_refused(store):
    auth = authenticator(store)
    handshake(auth, "SCRAM-SHA-256")
    with pytest.raises(SaslAuthenticationFailed) as caught:
        authenticate(auth, b"n,a=bob,n=alice,r=abcdef")
    assert _refusal(caught)["error_message"] == (
        "Authentication failed: Client requested an authorization id that is different from username")


@pytest.mark.parametrize("mechanism", ["GSSAPI", "OAUTHBEARER", "SCRAM-SHA-1", ""])
def test_an_unsupported_mechanism_is_refused_with_the_enabled_mechanisms_listed(store, mechanism):
    auth = authenticator(store, mechanisms=("GSSAPI", "SCRAM-SHA-512", "PLAIN"))
    with pytest.raises(SaslAuthenticationFailed) as caught:
        handshake(auth, mechanism)
    answer = _refusal(caught, ApiKey.SASL_HANDSHAKE, 1)
    assert answer == {"error_code": 33, "mechanisms": ["SCRAM-SHA-512", "PLAIN"]}  # UNSUPPORTED_SASL_MECHANISM


def test_a_served_mechanism_that_is_not_enabled_is_refused(store):
    auth = authenticator(store, mechanisms=("SCRAM-SHA-512",))
    with pytest.raises(SaslAuthenticationFailed) as caught:
        handshake(auth, "PLAIN")
    assert _refusal(caught, ApiKey.SASL_HANDSHAKE, 1) == {"error_code": 33, "mechanisms": ["SCRAM-SHA-512"]}


def test_the_handshake_answers_the_enabled_mechanisms(store):
    auth = authenticator(store, mechanisms=("SCRAM-SHA-256", "PLAIN"))
    assert handshake(auth, "PLAIN") == {"error_code": 0, "mechanisms": ["SCRAM-SHA-256", "PLAIN"]}


def _scram_exchange_up_to_final(auth, user="alice", password="alice-secret", mechanism="SCRAM-SHA-256"):
    handshake(auth, mechanism)
    client = SaslClient(mechanism, user, password)
    first = authenticate(auth, client.initial_response())
    return client.evaluate_challenge(first["auth_bytes"])


def test_a_scram_exchange_replayed_message_for_message_is_refused(store):
    recorded = authenticator(store)
    handshake(recorded, "SCRAM-SHA-256")
    client = SaslClient("SCRAM-SHA-256", "alice", "alice-secret")
    client_first = client.initial_response()
    client_final = client.evaluate_challenge(authenticate(recorded, client_first)["auth_bytes"])
    assert authenticate(recorded, client_final)["error_code"] == 0
    # An eavesdropper sends the recorded messages again: the server's fresh nonce no longer matches.
    replay = authenticator(store)
    handshake(replay, "SCRAM-SHA-256")
    assert authenticate(replay, client_first)["error_code"] == 0
    with pytest.raises(SaslAuthenticationFailed) as caught:
        authenticate(replay, client_final)
    assert _refusal(caught)["error_message"] == INVALID_CREDENTIALS.format("SCRAM-SHA-256")
    assert "nonce" in caught.value.reason and not replay.complete and replay.principal == ANONYMOUS


def test_a_client_final_message_with_the_same_nonce_but_a_proof_from_another_exchange_is_refused(store):
    first_auth, second_auth = authenticator(store), authenticator(store)
    old_final = ClientFinalMessage.parse(_scram_exchange_up_to_final(first_auth))
    new_final = ClientFinalMessage.parse(_scram_exchange_up_to_final(second_auth))
    forged = new_final.with_proof(old_final.proof)
    with pytest.raises(SaslAuthenticationFailed) as caught:
        authenticate(second_auth, forged.to_bytes())
    assert "Invalid client credentials" in caught.value.reason


@pytest.mark.parametrize("tamper", [
    lambda final: final.replace(b"c=biws", b"c=eSws"),                          # channel binding
    lambda final: final[:-6] + (b"A" if final[-6:-5] != b"A" else b"B") + final[-5:],  # proof
    lambda final: final.replace(b",r=", b",r=x", 1),                              # nonce
    lambda final: final.replace(b",p=", b",ext=1,p="),                            # an extension added
    lambda final: final + b"=",                                                   # trailing garbage
])
def test_a_tampered_client_final_message_is_refused(store, tamper):
    auth = authenticator(store)
    final = _scram_exchange_up_to_final(auth)
    with pytest.raises(SaslAuthenticationFailed) as caught:
        authenticate(auth, tamper(final))
    assert _refusal(caught)["error_code"] == 58
    assert not auth.complete and auth.principal == ANONYMOUS


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_a_final_nonce_of_the_client_nonce_before_the_servers_is_accepted_as_librdkafka_before_2_6_1_sends_it(
        store, mechanism):
    auth = authenticator(store)
    handshake(auth, mechanism.mechanism_name)
    first = ClientFirstMessage("alice", "rdkafka-nonce")
    server_first = ServerFirstMessage.parse(authenticate(auth, first.to_bytes())["auth_bytes"])
    final = ClientFinalMessage.build(first.gs2_header.encode(), first.nonce + server_first.nonce)
    signed = auth_message(first, server_first, final)
    salted = scram.salted_password(mechanism, "alice-secret", server_first.salt, server_first.iterations)
    proof = scram.client_proof(mechanism, scram.client_key(mechanism, salted), signed)
    answer = authenticate(auth, final.with_proof(proof).to_bytes())
    assert answer["error_code"] == 0 and auth.complete and auth.principal == ALICE
    assert ServerFinalMessage.parse(answer["auth_bytes"]).server_signature == scram.server_signature(
        mechanism, scram.server_key(mechanism, salted), signed)


def test_a_stored_credential_with_too_few_iterations_is_never_used():
    store = credentials_for({})
    store.alter((), [("dave", ScramMechanism.SCRAM_SHA_256,
                      ScramCredential.from_password(ScramMechanism.SCRAM_SHA_256, "pw", iterations=1000))])
    auth = authenticator(store)
    with pytest.raises(SaslAuthenticationFailed) as caught:
        log_in(auth, "SCRAM-SHA-256", "dave", "pw")
    assert "Iterations 1000 is less than the minimum 4096" in caught.value.reason


@pytest.mark.parametrize("api_key,version,body", [
    (ApiKey.METADATA, 12, {"topics": None}),
    (ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 1000, "topic_data": []}),
    (ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None}),
])
def test_a_request_before_authentication_closes_the_connection_without_an_answer(store, api_key, version, body):
    for steps in (0, 1):  # before and after the handshake
        auth = authenticator(store)
        if steps:
            handshake(auth, "PLAIN")
        with pytest.raises(SaslAuthenticationFailed) as caught:
            auth.receive(request(api_key, version, body))
        assert caught.value.response is None and api_key.name in caught.value.reason
        with pytest.raises(SaslAuthenticationFailed):
            auth.receive(request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}))


def test_a_request_between_scram_messages_closes_the_connection(store):
    auth = authenticator(store)
    handshake(auth, "SCRAM-SHA-256")
    authenticate(auth, SaslClient("SCRAM-SHA-256", "alice", "alice-secret").initial_response())
    with pytest.raises(SaslAuthenticationFailed) as caught:
        auth.receive(request(ApiKey.METADATA, 12, {"topics": None}))
    assert caught.value.response is None


def test_api_versions_is_answered_once_before_the_handshake(store):
    auth = authenticator(store)
    assert auth.receive(request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                         "client_software_version": "1"})) == API_VERSIONS_ANSWER
    assert handshake(auth, "PLAIN")["error_code"] == 0
    second = authenticator(store)
    second.receive(request(ApiKey.API_VERSIONS, 0, {}))
    with pytest.raises(SaslAuthenticationFailed, match="Unexpected ApiVersions"):
        second.receive(request(ApiKey.API_VERSIONS, 0, {}))


def test_api_versions_of_a_newer_version_is_answered_and_may_be_asked_again(store):
    auth = authenticator(store)
    too_new = request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    too_new = too_new[:2] + (99).to_bytes(2, "big") + too_new[4:]
    assert auth.receive(too_new) == API_VERSIONS_ANSWER
    assert auth.receive(request(ApiKey.API_VERSIONS, 0, {})) == API_VERSIONS_ANSWER
    assert handshake(auth, "SCRAM-SHA-512")["error_code"] == 0


def test_sasl_authenticate_before_the_handshake_is_an_illegal_sasl_state(store):
    auth = authenticator(store)
    with pytest.raises(SaslAuthenticationFailed) as caught:
        authenticate(auth, b"\0alice\0alice-secret")
    answer = _refusal(caught)
    assert answer["error_code"] == 34 and "SASL_AUTHENTICATE" in answer["error_message"]  # ILLEGAL_SASL_STATE


def test_a_second_handshake_during_authentication_is_an_illegal_sasl_state(store):
    auth = authenticator(store)
    handshake(auth, "SCRAM-SHA-256")
    with pytest.raises(SaslAuthenticationFailed) as caught:
        handshake(auth, "SCRAM-SHA-256")
    assert _refusal(caught, ApiKey.SASL_HANDSHAKE, 1)["error_code"] == 34


def test_a_first_frame_that_is_no_kafka_request_closes_the_connection(store):
    auth = authenticator(store)
    with pytest.raises(SaslAuthenticationFailed, match="GSSAPI") as caught:
        auth.receive(b"\x60\x82")
    assert caught.value.response is None


@pytest.mark.parametrize("mechanism", ALL_MECHANISMS)
def test_after_a_v0_handshake_tokens_travel_as_raw_frames(store, mechanism):
    auth = authenticator(store)
    assert handshake(auth, mechanism, version=0) == {"error_code": 0, "mechanisms": list(ALL_MECHANISMS)}
    client = SaslClient(mechanism, "bob", "bob-secret")
    challenge = auth.receive(client.initial_response())
    while not auth.complete:
        challenge = auth.receive(client.evaluate_challenge(challenge))
    assert client.evaluate_challenge(challenge) is None and client.complete
    assert auth.principal == KafkaPrincipal("User", "bob")
    if mechanism == "PLAIN":
        assert challenge == b""  # still written: a v0 client waits for the empty frame


def test_a_failed_v0_exchange_closes_the_connection_without_an_answer(store):
    auth = authenticator(store)
    handshake(auth, "PLAIN", version=0)
    with pytest.raises(SaslAuthenticationFailed) as caught:
        auth.receive(b"\0alice\0wrong")
    assert caught.value.response is None and not auth.complete


def test_a_sasl_authenticate_request_after_a_v0_handshake_is_taken_as_a_raw_token(store):
    auth = authenticator(store)
    handshake(auth, "PLAIN", version=0)
    with pytest.raises(SaslAuthenticationFailed):
        auth.receive(request(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0alice\0alice-secret"}))


def test_a_frame_after_a_failure_is_refused(store):
    auth = authenticator(store)
    with pytest.raises(SaslAuthenticationFailed):
        log_in(auth, "PLAIN", "alice", "wrong")
    with pytest.raises(SaslAuthenticationFailed, match="already failed"):
        handshake(auth, "PLAIN")


# -- session lifetime and re-authentication (KIP-368) ------------------------------------------------------


def test_connections_max_reauth_ms_is_the_session_lifetime_told_to_the_client(store):
    clock = MockTime(current_time_ms=5_000)
    auth = authenticator(store, reauth_ms=60_000, clock=clock)
    answer = log_in(auth, "SCRAM-SHA-512", "alice", "alice-secret", version=1)
    assert answer["session_lifetime_ms"] == 60_000
    assert auth.session_expiration_ms == clock.hi_res_clock_ms() + 60_000


def test_a_v0_sasl_authenticate_client_gets_no_lifetime_but_its_session_still_expires(store):
    clock = MockTime()
    auth = authenticator(store, reauth_ms=60_000, clock=clock)
    answer = log_in(auth, "PLAIN", "alice", "alice-secret", version=0)
    assert answer["session_lifetime_ms"] == 0  # v0 has no field for it
    assert auth.session_expiration_ms == 60_000


def _reauthenticate(auth, mechanism, user, password):
    auth.begin_reauthentication()
    return log_in(auth, mechanism, user, password)


@pytest.mark.parametrize("mechanism", ALL_MECHANISMS)
def test_re_authentication_as_the_same_user_extends_the_session(store, mechanism):
    clock = MockTime()
    auth = authenticator(store, reauth_ms=10_000, clock=clock)
    log_in(auth, mechanism, "alice", "alice-secret")
    clock.sleep(8_000)
    answer = _reauthenticate(auth, mechanism, "alice", "alice-secret")
    assert answer["session_lifetime_ms"] == 10_000
    assert auth.complete and auth.principal == ALICE and auth.session_expiration_ms == 18_000


def test_re_authentication_as_another_user_is_refused(store):
    clock = MockTime()
    auth = authenticator(store, reauth_ms=10_000, clock=clock)
    log_in(auth, "SCRAM-SHA-256", "alice", "alice-secret")
    clock.sleep(2_000)
    with pytest.raises(SaslAuthenticationFailed) as caught:
        _reauthenticate(auth, "SCRAM-SHA-256", "bob", "bob-secret")
    answer = _refusal(caught)
    assert answer["error_code"] == 58
    assert answer["error_message"] == "Cannot change principals during re-authentication from User:alice: User:bob"
    assert not auth.complete


def test_re_authentication_with_another_mechanism_is_refused(store):
    clock = MockTime()
    auth = authenticator(store, reauth_ms=10_000, clock=clock)
    log_in(auth, "SCRAM-SHA-256", "alice", "alice-secret")
    clock.sleep(2_000)
    with pytest.raises(SaslAuthenticationFailed) as caught:
        _reauthenticate(auth, "PLAIN", "alice", "alice-secret")
    assert _refusal(caught)["error_message"] == (
        "SASL mechanism 'PLAIN' requested by client is not supported for re-authentication of mechanism "
        "'SCRAM-SHA-256'")


def test_a_wrong_password_at_re_authentication_says_re_authentication(store):
    clock = MockTime()
    auth = authenticator(store, reauth_ms=10_000, clock=clock)
    log_in(auth, "SCRAM-SHA-512", "alice", "alice-secret")
    clock.sleep(2_000)
    with pytest.raises(SaslAuthenticationFailed) as caught:
        _reauthenticate(auth, "SCRAM-SHA-512", "alice", "wrong")
    assert _refusal(caught)["error_message"] == (
        "Authentication failed during re-authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512")


def test_a_handshake_on_an_authenticated_connection_without_reauthentication_is_an_illegal_sasl_state(store):
    auth = authenticator(store)
    log_in(auth, "PLAIN", "alice", "alice-secret")
    auth.begin_reauthentication()
    assert handshake(auth, "PLAIN") == {"error_code": 34, "mechanisms": []}
    assert auth.complete and auth.principal == ALICE


def test_re_authentication_twice_within_a_second_is_refused_and_the_session_carries_on(store):
    clock = MockTime()
    auth = authenticator(store, reauth_ms=10_000, clock=clock)
    log_in(auth, "PLAIN", "alice", "alice-secret")
    clock.sleep(100)
    _reauthenticate(auth, "PLAIN", "alice", "alice-secret")
    clock.sleep(500)
    auth.begin_reauthentication()
    assert handshake(auth, "PLAIN")["error_code"] == 34
    assert auth.complete and auth.session_expiration_ms == 10_100


def test_re_authentication_begins_only_on_an_authenticated_connection(store):
    auth = authenticator(store, reauth_ms=10_000)
    with pytest.raises(RuntimeError):
        auth.begin_reauthentication()


@pytest.mark.parametrize("mechanism", ALL_MECHANISMS)
def test_an_unreadable_stored_credential_fails_authentication_and_raises_nothing_else(mechanism):
    metadata = InMemoryMetadataStore()
    metadata.commit([], [Put(zk_data.user_config_path("alice"), b"{not json")])
    auth = authenticator(EtcdCredentialStore(metadata))
    with pytest.raises(SaslAuthenticationFailed) as caught:
        log_in(auth, mechanism, "alice", "alice-secret")
    assert _refusal(caught)["error_code"] == 58 and "/config/users/alice" in caught.value.reason
    assert not auth.complete
