"""Whatever bytes arrive, parse_request either returns a Request or raises ProtocolError
(UnsupportedVersionError included): no IndexError, struct.error or UnicodeDecodeError."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_core.protocol import (
    ApiKey,
    ProtocolError,
    Request,
    UnsupportedVersionError,
    encode_request,
    encode_response,
    parse_request,
    parse_response,
)
from protocol_kit import ALL_CASES, message_of, sample_body

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

REQUEST_CASES = [(key, version) for key, kind, version in ALL_CASES if kind == "request"]


def _valid_request_frames() -> list[bytes]:
    frames = []
    for key, version in REQUEST_CASES:
        for nulls in (False, True):
            body = sample_body(message_of(key, "request"), version, nulls=nulls)
            frames.append(encode_request(key, version, 7, "fuzz", body)[4:])
    return frames


VALID_FRAMES = _valid_request_frames()


def _parse_only_protocol_errors(frame) -> Request | None:
    try:
        return parse_request(frame)
    except ProtocolError:
        return None


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes_raise_only_protocol_errors(frame):
    _parse_only_protocol_errors(frame)


@FUZZ
@given(st.sampled_from(REQUEST_CASES), st.binary(max_size=400), st.booleans())
def test_random_bodies_behind_a_valid_header_raise_only_protocol_errors(case, body, flexible_header):
    key, version = case
    header = struct.pack(">hhi", key, version, 1) + b"\x00\x01c" + (b"\x00" if flexible_header else b"")
    _parse_only_protocol_errors(header + body)


@FUZZ
@given(st.sampled_from(VALID_FRAMES), st.data())
def test_every_truncated_valid_frame_is_a_protocol_error(frame, data):
    cut = data.draw(st.integers(min_value=0, max_value=len(frame) - 1))
    with pytest.raises(ProtocolError) as caught:
        parse_request(frame[:cut])
    assert not isinstance(caught.value, UnsupportedVersionError)


@FUZZ
@given(st.sampled_from(VALID_FRAMES), st.data())
def test_corrupted_valid_frames_raise_only_protocol_errors(frame, data):
    mutable = bytearray(frame)
    for _ in range(data.draw(st.integers(min_value=1, max_value=6))):
        position = data.draw(st.integers(min_value=0, max_value=len(mutable) - 1))
        mutable[position] = data.draw(st.integers(min_value=0, max_value=255))
    _parse_only_protocol_errors(bytes(mutable))


@FUZZ
@given(st.sampled_from(VALID_FRAMES), st.binary(min_size=1, max_size=8), st.data())
def test_bytes_inserted_into_valid_frames_raise_only_protocol_errors(frame, inserted, data):
    position = data.draw(st.integers(min_value=0, max_value=len(frame)))
    _parse_only_protocol_errors(frame[:position] + inserted + frame[position:])


def test_every_prefix_of_a_produce_frame_is_a_protocol_error():
    body = sample_body(message_of(ApiKey.PRODUCE, "request"), 9)
    frame = encode_request(ApiKey.PRODUCE, 9, 1, "c", body)[4:]
    assert parse_request(frame).body["acks"] == body["acks"]
    for cut in range(len(frame)):
        with pytest.raises(ProtocolError):
            parse_request(frame[:cut])


@pytest.mark.parametrize("length", [b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\xff\xff\xff\xfe"])
def test_absurd_array_lengths_fail_fast(length):
    # ListGroups v4: StatesFilter is the first field, a compact array in v3+; DeleteGroups v1 a classic one.
    classic = struct.pack(">hhi", ApiKey.DELETE_GROUPS, 1, 1) + b"\xff\xff" + length
    with pytest.raises(ProtocolError, match="array"):
        parse_request(classic)
    compact = struct.pack(">hhi", ApiKey.LIST_GROUPS, 4, 1) + b"\xff\xff\x00" + b"\xff\xff\xff\xff\x0f"
    with pytest.raises(ProtocolError, match="array"):
        parse_request(compact)


def test_an_overlong_varint_is_a_protocol_error():
    frame = struct.pack(">hhi", ApiKey.LIST_GROUPS, 4, 1) + b"\xff\xff\x00" + b"\xff" * 12
    with pytest.raises(ProtocolError, match="varint"):
        parse_request(frame)


def test_invalid_utf8_in_a_string_is_a_protocol_error():
    frame = struct.pack(">hhi", ApiKey.HEARTBEAT, 3, 1) + b"\xff\xff" + b"\x00\x02\xc3\x28" + b"\x00" * 10
    with pytest.raises(ProtocolError, match="UTF-8.*group_id"):
        parse_request(frame)


RESPONSE_CASES = [(key, version) for key, kind, version in ALL_CASES if kind == "response"]


@FUZZ
@given(st.sampled_from(RESPONSE_CASES), st.data())
def test_truncated_or_corrupted_responses_raise_only_protocol_errors(case, data):
    key, version = case
    from broker_core.protocol import RequestHeader

    body = sample_body(message_of(key, "response"), version, nulls=data.draw(st.booleans()))
    frame = bytearray(encode_response(RequestHeader(key, version, 5, "c", 1), body)[4:])
    correlation_id, decoded = parse_response(key, version, bytes(frame))
    assert correlation_id == 5
    if data.draw(st.booleans()):
        frame = frame[: data.draw(st.integers(min_value=0, max_value=len(frame) - 1))]
        with pytest.raises(ProtocolError):
            parse_response(key, version, bytes(frame))
    else:
        position = data.draw(st.integers(min_value=0, max_value=len(frame) - 1))
        frame[position] ^= data.draw(st.integers(min_value=1, max_value=255))
        try:
            parse_response(key, version, bytes(frame))
        except ProtocolError:
            pass
