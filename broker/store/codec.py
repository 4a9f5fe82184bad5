"""Compression codecs of record batch v2 (attributes bits 0-2), as the Java client writes them."""

from __future__ import annotations

import gzip
import struct

import lz4.frame
import snappy
import zstandard

from broker.recordbatch import CODEC_NAMES
from broker.recordbatch import GZIP as GZIP  # re-exported: codec ids live with the header
from broker.recordbatch import LZ4 as LZ4
from broker.recordbatch import NONE as NONE
from broker.recordbatch import SNAPPY as SNAPPY
from broker.recordbatch import ZSTD as ZSTD
from broker.store.errors import CorruptRecordError, InvalidRecordError

NAMES = CODEC_NAMES

# Kafka's Java client frames snappy with xerial's SnappyOutputStream.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = struct.Struct(">8sii")
XERIAL_BLOCK = 32 * 1024
DECOMPRESSED_MAX = 256 * 1024 * 1024  # bound on what one batch may inflate to


def compress(codec_id: int, data: bytes) -> bytes:
    if codec_id == GZIP:
        return gzip.compress(data)
    if codec_id == SNAPPY:
        out = [XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1)]
        for start in range(0, len(data), XERIAL_BLOCK):
            block = snappy.compress(data[start : start + XERIAL_BLOCK])
            out.append(struct.pack(">i", len(block)))
            out.append(block)
        return b"".join(out)
    if codec_id == LZ4:
        result: bytes = lz4.frame.compress(data, block_linked=False, store_size=False)
        return result
    if codec_id == ZSTD:
        return zstandard.ZstdCompressor().compress(data)
    if codec_id == NONE:
        return data
    raise InvalidRecordError(f"unknown compression codec {codec_id}")


def decompress(codec_id: int, data: bytes) -> bytes:
    try:
        out = _decompress(codec_id, data)
    except (CorruptRecordError, InvalidRecordError):
        raise
    except Exception as e:  # each library raises its own error type
        name = NAMES.get(codec_id, codec_id)
        raise CorruptRecordError(f"{name} payload does not decompress: {e}") from e
    if len(out) > DECOMPRESSED_MAX:
        raise CorruptRecordError(f"batch inflates beyond {DECOMPRESSED_MAX} bytes")
    return out


def _decompress(codec_id: int, data: bytes) -> bytes:
    if codec_id == GZIP:
        return gzip.decompress(data)
    if codec_id == SNAPPY:
        if data.startswith(XERIAL_MAGIC):
            parts = []
            pos = XERIAL_HEADER.size
            while pos < len(data):
                (n,) = struct.unpack_from(">i", data, pos)
                pos += 4
                if n < 0 or pos + n > len(data):
                    raise CorruptRecordError("xerial snappy block runs past the payload")
                parts.append(snappy.decompress(data[pos : pos + n]))
                pos += n
            return b"".join(parts)
        result: bytes = snappy.decompress(data)
        return result
    if codec_id == LZ4:
        out: bytes = lz4.frame.decompress(data)
        return out
    if codec_id == ZSTD:
        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    if codec_id == NONE:
        return data
    raise CorruptRecordError(f"unknown compression codec {codec_id}")
