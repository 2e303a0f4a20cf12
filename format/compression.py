"""Compression codecs of a RecordBatch's records section, through cramjam.

Kafka compresses everything after the 61-byte batch header as one stream.
The streams are the ones Kafka's Java client and librdkafka produce:

* gzip — a gzip member stream;
* snappy — Kafka's Java client writes snappy-java's "xerial" framing (a magic
  header, then length-prefixed raw snappy blocks); librdkafka may write a
  single raw snappy block. Both are read, as Kafka reads both; xerial is written;
* lz4 — the LZ4 frame format with independent blocks and no content checksum,
  as Kafka's ``KafkaLZ4BlockOutputStream`` writes;
* zstd — a zstd frame.
"""

from __future__ import annotations

import enum
import struct

import cramjam

from .errors import CorruptRecordError, UnsupportedCompressionError

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK_LEN = struct.Struct(">i")
XERIAL_BLOCK_SIZE = 32 * 1024  # snappy-java's default block size


class CompressionType(enum.IntEnum):
    """The codec id in the low three bits of a batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_id(cls, codec_id: int) -> "CompressionType":
        found = _BY_ID.get(codec_id)
        if found is None:
            raise UnsupportedCompressionError(f"unknown compression codec id {codec_id}")
        return found

    @classmethod
    def from_name(cls, name: str) -> "CompressionType":
        """Kafka's ``compression.type`` names: none, gzip, snappy, lz4, zstd."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise UnsupportedCompressionError(
                f"unknown compression type {name!r}; expected one of none, gzip, snappy, lz4, zstd") from None


# Looked up once per batch read: a dict is several times faster than calling the enum.
_BY_ID = {codec.value: codec for codec in CompressionType}


def compress(codec: CompressionType, data: bytes) -> bytes:
    """Compress a records section the way Kafka's Java client does."""
    if codec == CompressionType.NONE:
        return bytes(data)
    if codec == CompressionType.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == CompressionType.SNAPPY:
        return _xerial_compress(data)
    if codec == CompressionType.LZ4:
        compressor = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        compressor.compress(data)
        return bytes(compressor.finish())
    if codec == CompressionType.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise UnsupportedCompressionError(f"unknown compression codec {codec!r}")


def decompress(codec: CompressionType, data) -> bytes:
    """Decompress a records section; any codec failure is a CorruptRecordError."""
    if codec == CompressionType.NONE:
        return bytes(data)
    try:
        if codec == CompressionType.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == CompressionType.SNAPPY:
            return _snappy_decompress(data)
        if codec == CompressionType.LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == CompressionType.ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except CorruptRecordError:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError and ValueError
        raise CorruptRecordError(f"cannot decompress {codec.name.lower()} records: {exc}") from exc
    raise UnsupportedCompressionError(f"unknown compression codec {codec!r}")


def _xerial_compress(data: bytes) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1)]
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start:start + XERIAL_BLOCK_SIZE]))
        parts.append(_XERIAL_BLOCK_LEN.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    pos = _XERIAL_HEADER.size
    if len(view) < pos:
        raise CorruptRecordError("truncated xerial snappy header")
    out = []
    while pos < len(view):
        if pos + 4 > len(view):
            raise CorruptRecordError(f"truncated xerial snappy block length at {pos}")
        (length,) = _XERIAL_BLOCK_LEN.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > len(view):
            raise CorruptRecordError(f"xerial snappy block of {length} bytes at {pos - 4} runs past the end")
        out.append(bytes(cramjam.snappy.decompress_raw(view[pos:pos + length])))
        pos += length
    return b"".join(out)
