import numpy as np
import pytest
from hypothesis import given, strategies as st

from format.errors import CorruptRecordError
from format.varint import decode_varint, decode_varlong, encode_varint, encode_varlong, size_of_varint
from format.varint_arrays import decode_varints_at

INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)


@pytest.mark.parametrize("value, encoded", [
    (0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-64, b"\x7f"), (64, b"\x80\x01"),
    (300, b"\xd8\x04"), ((1 << 31) - 1, b"\xfe\xff\xff\xff\x0f"), (-(1 << 31), b"\xff\xff\xff\xff\x0f"),
])
def test_varint_matches_kafkas_zigzag_encoding(value, encoded):
    assert encode_varint(value) == encoded
    assert decode_varint(encoded, 0) == (value, len(encoded))


@given(INT32)
def test_varint_round_trips(value):
    data = b"\xaa" + encode_varint(value) + b"\xbb"
    assert decode_varint(data, 1) == (value, len(data) - 1)
    assert size_of_varint(value) == len(data) - 2


@given(INT64)
def test_varlong_round_trips(value):
    data = encode_varlong(value)
    assert decode_varlong(data, 0) == (value, len(data))
    assert len(data) <= 10


def test_varint_out_of_int32_is_refused():
    with pytest.raises(ValueError):
        encode_varint(1 << 31)


def test_truncated_varint_is_corruption():
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x80\x80", 0)


def test_overlong_varint_is_corruption():
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x80\x80\x80\x80\x80\x01", 0)


@given(st.lists(INT64, min_size=1, max_size=50))
def test_vectorized_decoder_agrees_with_scalar(values):
    data = b"".join(encode_varlong(v) for v in values)
    positions = []
    pos = 0
    for _ in values:
        positions.append(pos)
        pos = decode_varlong(data, pos)[1]
    decoded, ends = decode_varints_at(np.frombuffer(data, np.uint8), np.array(positions, dtype=np.int64))
    assert decoded.tolist() == values
    assert ends.tolist() == positions[1:] + [len(data)]


def test_vectorized_decoder_reports_a_varint_running_off_the_end():
    data = np.frombuffer(b"\x02\x80\x80", np.uint8)
    with pytest.raises(CorruptRecordError) as err:
        decode_varints_at(data, np.array([0, 1], dtype=np.int64))
    assert err.value.position == 1


@given(st.lists(st.integers(min_value=-8192, max_value=8191), min_size=1, max_size=50))
def test_vectorized_decoder_agrees_with_scalar_on_one_and_two_byte_varints(values):
    data = b"".join(encode_varint(v) for v in values)
    positions = []
    pos = 0
    for _ in values:
        positions.append(pos)
        pos = decode_varint(data, pos)[1]
    decoded, ends = decode_varints_at(np.frombuffer(data, np.uint8), np.array(positions, dtype=np.int64), 5)
    assert decoded.tolist() == values
    assert ends.tolist() == positions[1:] + [len(data)]


def test_vectorized_decoder_reports_a_varint_whose_first_byte_ends_the_buffer():
    data = np.frombuffer(b"\x02\x04\x81", np.uint8)
    with pytest.raises(CorruptRecordError) as err:
        decode_varints_at(data, np.array([0, 1, 2], dtype=np.int64))
    assert err.value.position == 2
