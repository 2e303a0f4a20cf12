"""Primitive encodings: unsigned varints, classic and compact strings/bytes, nulls, uuids."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker_core.protocol.errors import ProtocolError
from broker_core.protocol.types import Malformed, primitive_codec, read_uvarint, uvarint


@pytest.mark.parametrize("value,encoded", [
    (0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02"),
    (16383, b"\xff\x7f"), (16384, b"\x80\x80\x01"), (0xFFFFFFFF, b"\xff\xff\xff\xff\x0f"),
])
def test_unsigned_varints_match_kafkas_encoding(value, encoded):
    assert uvarint(value) == encoded
    assert read_uvarint(encoded + b"tail", 0) == (value, len(encoded))


@given(st.integers(min_value=0, max_value=0xFFFFFFFF))
def test_unsigned_varints_round_trip(value):
    assert read_uvarint(uvarint(value), 0) == (value, len(uvarint(value)))


def test_unsigned_varints_refuse_negative_and_oversized_values():
    for value in (-1, 1 << 32):
        with pytest.raises(ProtocolError):
            uvarint(value)


def test_an_unsigned_varint_longer_than_five_bytes_is_malformed():
    with pytest.raises(Malformed, match="longer than 5 bytes"):
        read_uvarint(b"\x80\x80\x80\x80\x80\x01", 0)


def _roundtrip(codec, value) -> tuple[bytes, object]:
    out: list = []
    codec.write(value, out)
    data = b"".join(out)
    decoded, end = codec.read(data, 0)
    assert end == len(data)
    return data, decoded


def test_classic_strings_have_an_int16_length_and_minus_one_for_null():
    codec = primitive_codec("string", compact=False, nullable=True)
    assert _roundtrip(codec, "kafka") == (b"\x00\x05kafka", "kafka")
    assert _roundtrip(codec, None) == (b"\xff\xff", None)


def test_compact_strings_have_a_varint_length_plus_one_and_zero_for_null():
    codec = primitive_codec("string", compact=True, nullable=True)
    assert _roundtrip(codec, "kafka") == (b"\x06kafka", "kafka")
    assert _roundtrip(codec, "") == (b"\x01", "")
    assert _roundtrip(codec, None) == (b"\x00", None)


def test_classic_bytes_have_an_int32_length():
    codec = primitive_codec("bytes", compact=False, nullable=False)
    assert _roundtrip(codec, b"\x01\x02") == (b"\x00\x00\x00\x02\x01\x02", b"\x01\x02")


def test_null_in_a_non_nullable_field_is_malformed():
    for compact, null in ((False, b"\xff\xff"), (True, b"\x00")):
        with pytest.raises(Malformed, match="not nullable"):
            primitive_codec("string", compact=compact, nullable=False).read(null, 0)


def test_a_length_past_the_end_of_the_frame_is_malformed():
    with pytest.raises(Malformed, match="runs past the end"):
        primitive_codec("records", compact=False, nullable=True).read(b"\x00\x00\x00\x10abc", 0)


@pytest.mark.parametrize("kind,value,fmt", [
    ("int8", -5, ">b"), ("int16", -300, ">h"), ("uint16", 65000, ">H"), ("int32", -70000, ">i"),
    ("uint32", 4_000_000_000, ">I"), ("int64", -(1 << 62), ">q"), ("float64", 2.5, ">d"),
])
def test_fixed_size_types_are_big_endian(kind, value, fmt):
    codec = primitive_codec(kind, compact=True, nullable=False)
    assert _roundtrip(codec, value) == (struct.pack(fmt, value), value)


def test_bools_read_any_non_zero_byte_as_true():
    codec = primitive_codec("bool", compact=False, nullable=False)
    assert codec.read(b"\x02", 0) == (True, 1)
    assert _roundtrip(codec, False) == (b"\x00", False)


def test_uuids_are_16_raw_bytes_and_accept_uuid_objects():
    codec = primitive_codec("uuid", compact=True, nullable=False)
    value = uuid.uuid4()
    assert _roundtrip(codec, value) == (value.bytes, value.bytes)
    assert _roundtrip(codec, None) == (bytes(16), bytes(16))
