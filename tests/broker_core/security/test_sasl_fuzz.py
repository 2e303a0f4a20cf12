"""Fuzzing the authenticator with SASL frames: arbitrary bytes, arbitrary request sequences, and valid
exchanges with one message mutated. Nothing but ``SaslAuthenticationFailed`` may come out, and no
connection may end up authenticated without the password."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_core.protocol import ApiKey
from broker_core.security.principal import ANONYMOUS, KafkaPrincipal
from broker_core.security.sasl_authenticator import SaslAuthenticationFailed
from broker_core.security.sasl_client import SaslClient, SaslClientError

from sasl_kit import ALL_MECHANISMS, authenticator, credentials_for, handshake, log_in, request, response

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# PBKDF2 at 4096 iterations runs for every SCRAM exchange: fewer, costlier examples.
FUZZ_SCRAM = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
ALICE = KafkaPrincipal("User", "alice")

STORE = credentials_for({"alice": "alice-secret", "bob": "bob-secret"})


def _feed(auth, frames) -> None:
    """Hand frames to the authenticator as the processor would, until it completes or closes."""
    for frame in frames:
        try:
            auth.receive(frame)
        except SaslAuthenticationFailed:
            return
        if auth.complete:
            return


@FUZZ
@given(st.sampled_from(["fresh", "PLAIN/1", "SCRAM-SHA-256/1", "SCRAM-SHA-512/0", "PLAIN/0"]),
       st.lists(st.binary(max_size=300), min_size=1, max_size=6))
def test_arbitrary_frames_never_raise_anything_else_and_never_authenticate(state, frames):
    auth = authenticator(STORE)
    if state != "fresh":
        mechanism, version = state.split("/")
        handshake(auth, mechanism, int(version))
    _feed(auth, frames)
    assert not auth.complete and auth.principal == ANONYMOUS


_requests = st.one_of(
    st.builds(lambda m, v: request(ApiKey.SASL_HANDSHAKE, v, {"mechanism": m}),
              st.sampled_from([*ALL_MECHANISMS, "GSSAPI", "", "plain"]), st.integers(0, 1)),
    st.builds(lambda token, v: request(ApiKey.SASL_AUTHENTICATE, v, {"auth_bytes": token}),
              st.one_of(st.binary(max_size=200),
                        st.builds(lambda u, p: f"\0{u}\0{p}".encode(), st.sampled_from(["alice", "bob", ""]),
                                  st.text(max_size=20)),
                        st.builds(lambda n, r: f"n,,n={n},r={r}".encode(), st.sampled_from(["alice", "bob"]),
                                  st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7e), min_size=1,
                                          max_size=30))),
              st.integers(0, 2)),
    st.just(request(ApiKey.API_VERSIONS, 0, {})),
    st.just(request(ApiKey.METADATA, 12, {"topics": None})),
    st.binary(max_size=64),
)


@FUZZ
@given(st.lists(_requests, min_size=1, max_size=8))
def test_request_sequences_without_the_password_never_authenticate(frames):
    auth = authenticator(STORE)
    _feed(auth, frames)
    assert not auth.complete and auth.principal == ANONYMOUS


def _mutate(token: bytes, data) -> bytes:
    kind = data.draw(st.sampled_from(["flip", "insert", "delete", "truncate", "replace"]))
    if kind == "truncate":
        return token[:data.draw(st.integers(0, max(0, len(token) - 1)))]
    position = data.draw(st.integers(0, max(0, len(token) - 1)))
    if kind == "flip":
        bit = 1 << data.draw(st.integers(0, 7))
        return token[:position] + bytes([token[position] ^ bit]) + token[position + 1:]
    if kind == "insert":
        return token[:position] + data.draw(st.binary(min_size=1, max_size=8)) + token[position:]
    if kind == "delete":
        return token[:position] + token[position + data.draw(st.integers(1, 8)):]
    return token[:position] + data.draw(st.binary(min_size=1, max_size=8)) + token[position + 1:]


def _mutated_exchange(mechanism: str, version: int, data) -> tuple[object, bool]:
    """A valid exchange of alice's with one client token mutated; (authenticator, whether a token changed)."""
    auth = authenticator(STORE)
    handshake(auth, mechanism)
    client = SaslClient(mechanism, "alice", "alice-secret")
    token = client.initial_response()
    target = data.draw(st.integers(0, 0 if mechanism == "PLAIN" else 1))
    step, changed = 0, False
    while True:
        if step == target:
            mutated = _mutate(token, data)
            changed = mutated != token
            token = mutated
        try:
            frame = auth.receive(request(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": token}))
        except SaslAuthenticationFailed as exc:
            if exc.response is not None:
                assert response(ApiKey.SASL_AUTHENTICATE, version, exc.response)["error_code"] in (34, 58)
            return auth, changed
        if auth.complete:
            return auth, changed
        try:
            token = client.evaluate_challenge(response(ApiKey.SASL_AUTHENTICATE, version, frame)["auth_bytes"])
        except SaslClientError:
            return auth, changed
        step += 1


@FUZZ_SCRAM
@given(st.sampled_from(["SCRAM-SHA-256", "SCRAM-SHA-512"]), st.integers(0, 2), st.data())
def test_a_mutated_scram_exchange_never_authenticates(mechanism, version, data):
    auth, changed = _mutated_exchange(mechanism, version, data)
    if changed:
        assert not auth.complete and auth.principal == ANONYMOUS
    else:
        assert auth.complete and auth.principal == ALICE


@FUZZ
@given(st.integers(0, 2), st.data())
def test_a_mutated_plain_message_authenticates_only_alice_and_only_with_her_password(version, data):
    auth, changed = _mutated_exchange("PLAIN", version, data)
    if auth.complete:
        # A mutation that keeps "alice" and her password (an authorization id "alice" put in front) still is alice.
        assert auth.principal == ALICE
    else:
        assert changed and auth.principal == ANONYMOUS


@pytest.mark.parametrize("mechanism", ALL_MECHANISMS)
def test_the_unmutated_exchange_the_fuzz_starts_from_authenticates(mechanism):
    auth = authenticator(STORE)
    assert log_in(auth, mechanism, "alice", "alice-secret")["error_code"] == 0
    assert auth.complete and auth.principal == ALICE


@settings(max_examples=40, deadline=None)
@given(st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7e), min_size=1, max_size=20),
       st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), min_size=1, max_size=30))
def test_any_user_name_and_password_authenticate_with_every_mechanism(user, password):
    # ASCII names (Kafka's SCRAM grammar), "," and "=" among them; passwords of any Unicode but NUL (PLAIN's separator).
    store = credentials_for({user: password})
    for mechanism in ALL_MECHANISMS:
        auth = authenticator(store)
        assert log_in(auth, mechanism, user, password)["error_code"] == 0
        assert auth.complete and auth.principal == KafkaPrincipal("User", user)
