import struct

import pytest

from broker_core.offsets_topic import (
    GroupMetadataKey, GroupMetadataValue, InvalidOffsetsRecordError, MemberMetadata, OffsetCommitKey, OffsetCommitValue,
    UnknownRecordTypeError, decode_group_metadata_value, decode_key, decode_offset_commit_value, decode_record,
    encode_group_metadata, encode_group_metadata_value, encode_key, encode_offset_commit, encode_offset_commit_value,
    java_string_hash_code, partition_for_group)


def kstr(s: str) -> bytes:
    """A non-flexible string: int16 length, UTF-8."""
    data = s.encode()
    return struct.pack(">h", len(data)) + data


def cstr(s: str) -> bytes:
    """A compact string (flexible versions): unsigned varint of length + 1; short strings fit one byte."""
    data = s.encode()
    assert len(data) + 1 < 0x80
    return bytes([len(data) + 1]) + data


# --- the group's partition --------------------------------------------------------


@pytest.mark.parametrize("s, expected", [
    ("", 0),
    ("a", 97),
    ("Aa", 2112),  # 65*31 + 97, Java's textbook collision with "BB"
    ("BB", 2112),  # 66*31 + 66
    ("abc", 96354),  # (97*31 + 98)*31 + 99
    ("hello", 99162322),
    # U+1F600 is two UTF-16 units, 0xD83D and 0xDE00: 55357*31 + 56832.
    ("\U0001F600", 1772899),
    # "é" is one unit (0xE9 = 233): 97*31 + 233.
    ("aé", 3240),
    ("polygenelubricants", -2**31),  # the string whose hashCode is Integer.MIN_VALUE
])
def test_string_hash_matches_java(s, expected):
    assert java_string_hash_code(s) == expected


def test_string_hash_wraps_to_int32_as_java_does():
    s = "consumer-group-with-a-long-name"
    units = [ord(c) for c in s]
    total = sum(u * 31 ** (len(units) - 1 - i) for i, u in enumerate(units)) % 2**32
    expected = total - 2**32 if total >= 2**31 else total
    assert java_string_hash_code(s) == expected


def test_partition_for_group_is_abs_hash_modulo_partitions():
    assert partition_for_group("abc") == 96354 % 50 == 4
    assert partition_for_group("\U0001F600") == 1772899 % 50 == 49
    assert partition_for_group("abc", 7) == 96354 % 7
    # Utils.abs(Integer.MIN_VALUE) is 0, not a negative number.
    assert partition_for_group("polygenelubricants") == 0


def test_partition_for_a_negative_hash_uses_its_absolute_value():
    group = next(g for g in (f"group-{i}" for i in range(1000)) if java_string_hash_code(g) < 0)
    assert partition_for_group(group, 50) == abs(java_string_hash_code(group)) % 50


def test_partition_for_group_refuses_zero_partitions():
    with pytest.raises(ValueError, match="at least one partition"):
        partition_for_group("g", 0)


# --- byte layouts --------------------------------------------------------------


def test_offset_commit_key_and_value_bytes_are_kafkas():
    key, value = encode_offset_commit(OffsetCommitKey("grp", "orders", 7),
                                      OffsetCommitValue(1234, -1, "meta", 1_700_000_000_000))
    assert key == struct.pack(">h", 1) + kstr("grp") + kstr("orders") + struct.pack(">i", 7)
    assert value == struct.pack(">hqi", 3, 1234, -1) + kstr("meta") + struct.pack(">q", 1_700_000_000_000)


def test_an_expire_timestamp_is_written_as_version_1():
    value = encode_offset_commit_value(OffsetCommitValue(5, -1, "", 100, expire_timestamp=200))
    assert value == struct.pack(">hq", 1, 5) + kstr("") + struct.pack(">qq", 100, 200)


def test_an_offset_commit_value_version_4_is_written_flexible():
    value = encode_offset_commit_value(OffsetCommitValue(1234, 6, "meta", 1_700_000_000_000), version=4)
    assert value == struct.pack(">hqi", 4, 1234, 6) + cstr("meta") + struct.pack(">q", 1_700_000_000_000) + b"\x00"


GROUP = GroupMetadataValue("consumer", 7, "range", "m-1", 1_700_000_000_000, (
    MemberMetadata("m-1", "client", "/10.0.0.1", 10_000, 60_000, b"su", b"a", "instance-1"),
    MemberMetadata("m-2", "client", "/10.0.0.2", 10_000, 60_000, b"", b"", None)))


def test_group_metadata_value_bytes_are_kafkas():
    # Version 3 (what Kafka writes): int16 strings, int32 bytes and array lengths, group.instance.id nullable.
    members = (kstr("m-1") + kstr("instance-1") + kstr("client") + kstr("/10.0.0.1")
               + struct.pack(">ii", 60_000, 10_000)
               + struct.pack(">i", 2) + b"su" + struct.pack(">i", 1) + b"a"
               + kstr("m-2") + struct.pack(">h", -1) + kstr("client") + kstr("/10.0.0.2")
               + struct.pack(">iiii", 60_000, 10_000, 0, 0))
    assert encode_group_metadata_value(GROUP) == (struct.pack(">h", 3) + kstr("consumer") + struct.pack(">i", 7)
                                                  + kstr("range") + kstr("m-1") + struct.pack(">q", 1_700_000_000_000)
                                                  + struct.pack(">i", 2) + members)


def test_group_metadata_value_version_4_is_written_flexible():
    # Compact lengths (varint of n + 1, 0 for null) and an empty tagged-field section after every struct.
    members = (cstr("m-1") + cstr("instance-1") + cstr("client") + cstr("/10.0.0.1")
               + struct.pack(">ii", 60_000, 10_000)
               + b"\x03su" + b"\x02a" + b"\x00"
               + cstr("m-2") + b"\x00" + cstr("client") + cstr("/10.0.0.2") + struct.pack(">ii", 60_000, 10_000)
               + b"\x01\x01" + b"\x00")
    assert encode_group_metadata_value(GROUP, 4) == (struct.pack(">h", 4) + cstr("consumer") + struct.pack(">i", 7)
                                                     + cstr("range") + cstr("m-1")
                                                     + struct.pack(">q", 1_700_000_000_000) + b"\x03" + members
                                                     + b"\x00")


def test_group_metadata_key_bytes_are_kafkas():
    assert encode_key(GroupMetadataKey("grp")) == struct.pack(">h", 2) + kstr("grp")
    assert decode_key(struct.pack(">h", 2) + kstr("grp")) == GroupMetadataKey("grp")


def test_offset_commit_key_version_0_reads_like_version_1():
    body = kstr("g") + kstr("t") + struct.pack(">i", 3)
    assert decode_key(struct.pack(">h", 0) + body) == decode_key(struct.pack(">h", 1) + body) \
        == OffsetCommitKey("g", "t", 3)


@pytest.mark.parametrize("data, expected", [
    (struct.pack(">hq", 0, 42) + kstr("m") + struct.pack(">q", 1000),
     OffsetCommitValue(42, -1, "m", 1000)),
    (struct.pack(">hq", 1, 42) + kstr("m") + struct.pack(">qq", 1000, 2000),
     OffsetCommitValue(42, -1, "m", 1000, 2000)),
    (struct.pack(">hq", 1, 42) + kstr("m") + struct.pack(">qq", 1000, -1),
     OffsetCommitValue(42, -1, "m", 1000)),
    (struct.pack(">hq", 2, 42) + kstr("m") + struct.pack(">q", 1000),
     OffsetCommitValue(42, -1, "m", 1000)),
    (struct.pack(">hqi", 3, 42, 9) + kstr("m") + struct.pack(">q", 1000),
     OffsetCommitValue(42, 9, "m", 1000)),
    # Version 4 is flexible: a compact metadata string and an empty tagged-field section.
    (struct.pack(">hqi", 4, 42, 9) + cstr("m") + struct.pack(">q", 1000) + b"\x00",
     OffsetCommitValue(42, 9, "m", 1000)),
    # ... and tags it does not know are skipped (tag 5, two bytes).
    (struct.pack(">hqi", 4, 42, 9) + cstr("m") + struct.pack(">q", 1000) + b"\x01\x05\x02zz",
     OffsetCommitValue(42, 9, "m", 1000)),
])
def test_every_offset_commit_value_version_decodes(data, expected):
    assert decode_offset_commit_value(data) == expected


def test_group_metadata_value_version_0_bytes_decode():
    data = (struct.pack(">h", 0) + kstr("consumer") + struct.pack(">i", 3) + kstr("range") + kstr("m-1")
            + struct.pack(">i", 1) + kstr("m-1") + kstr("client") + kstr("/10.0.0.1")
            + struct.pack(">i", 10_000) + struct.pack(">i", 2) + b"su" + struct.pack(">i", 1) + b"a")
    value = decode_group_metadata_value(data)
    assert value == GroupMetadataValue("consumer", 3, "range", "m-1", -1, (
        # Version 0 has no rebalance timeout: the session timeout stands in, as in Kafka.
        MemberMetadata("m-1", "client", "/10.0.0.1", 10_000, 10_000, b"su", b"a"),))


def test_group_metadata_value_with_null_protocol_and_leader_decodes():
    data = (struct.pack(">h", 2) + kstr("consumer") + struct.pack(">ihhq", 0, -1, -1, 55) + struct.pack(">i", 0))
    assert decode_group_metadata_value(data) == GroupMetadataValue("consumer", 0, None, None, 55, ())


# --- round trips -----------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_offset_commit_values_round_trip_at_every_version(version):
    value = OffsetCommitValue(2**40, 7 if version >= 3 else -1, "métadonnées", 1_700_000_000_123,
                              1_700_000_999_000 if version == 1 else None)
    assert decode_offset_commit_value(encode_offset_commit_value(value, version)) == value


MEMBER = MemberMetadata("consumer-1-6a0e", "consumer-1", "/127.0.0.1", 45_000, 300_000, b"\x00\x01sub",
                        b"\x00\x01assign")


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_group_metadata_values_round_trip(version):
    instance = "instance-a" if version >= 3 else None
    value = GroupMetadataValue("consumer", 12, "cooperative-sticky", MEMBER.member_id,
                               1_700_000_000_000 if version >= 2 else -1,
                               (MEMBER, MemberMetadata("m2", "c2", "/h2", 10, 20, b"", b"", instance)))
    assert decode_group_metadata_value(encode_group_metadata_value(value, version)) == value


def test_group_metadata_value_version_0_round_trips_without_rebalance_timeout():
    member = MemberMetadata("m", "c", "/h", 10_000, 10_000, b"s", b"a")
    value = GroupMetadataValue("consumer", 1, "range", "m", -1, (member,))
    assert decode_group_metadata_value(encode_group_metadata_value(value, 0)) == value


def test_keys_round_trip():
    for key in (OffsetCommitKey("g", "orders", 0), OffsetCommitKey("grüppe", "t.x_y-z", 2**31 - 1),
                GroupMetadataKey("g"), GroupMetadataKey("")):
        assert decode_key(encode_key(key)) == key


def test_a_null_value_is_a_tombstone():
    key_bytes, value_bytes = encode_offset_commit(OffsetCommitKey("g", "t", 1), None)
    assert value_bytes is None
    assert decode_record(key_bytes, None) == (OffsetCommitKey("g", "t", 1), None)
    key_bytes, value_bytes = encode_group_metadata(GroupMetadataKey("g"), None)
    assert value_bytes is None and decode_record(key_bytes, None) == (GroupMetadataKey("g"), None)


def test_decode_record_picks_the_value_type_from_the_key():
    group = GroupMetadataValue("consumer", 1, "range", "m", 5, ())
    assert decode_record(*encode_group_metadata(GroupMetadataKey("g"), group)) == (GroupMetadataKey("g"), group)
    offset = OffsetCommitValue(1, -1, "", 2)
    assert decode_record(*encode_offset_commit(OffsetCommitKey("g", "t", 0), offset)) == \
        (OffsetCommitKey("g", "t", 0), offset)


# --- what cannot be read -------------------------------------------------------------


def test_other_record_types_are_reported_as_unknown():
    # Version 3+ keys are Kafka's newer coordinator records (consumer group protocol).
    with pytest.raises(UnknownRecordTypeError) as info:
        decode_key(struct.pack(">h", 3) + kstr("g"))
    assert info.value.version == 3


@pytest.mark.parametrize("data, message", [
    (b"\x00", "no version"),
    (struct.pack(">h", 1) + kstr("g") + struct.pack(">h", 10) + b"abc",
     r"OffsetCommitKey v1: string of 10 bytes runs past the end .* at topic"),
])
def test_truncated_keys_raise(data, message):
    with pytest.raises(InvalidOffsetsRecordError, match=message):
        decode_key(data)


def test_a_truncated_value_raises():
    with pytest.raises(InvalidOffsetsRecordError, match="OffsetCommitValue v3"):
        decode_offset_commit_value(struct.pack(">hqi", 3, 1, -1) + kstr("m"))


def test_an_unsupported_value_version_raises():
    with pytest.raises(InvalidOffsetsRecordError, match="version 5 is not supported"):
        decode_offset_commit_value(struct.pack(">hq", 5, 1))


def test_a_null_protocol_type_is_refused():
    with pytest.raises(InvalidOffsetsRecordError, match="GroupMetadataValue v3: .*null.* at protocol_type"):
        decode_group_metadata_value(struct.pack(">hh", 3, -1))


def test_an_expire_timestamp_needs_version_1():
    with pytest.raises(InvalidOffsetsRecordError, match="only version 1"):
        encode_offset_commit_value(OffsetCommitValue(1, -1, "", 2, 3), version=3)
