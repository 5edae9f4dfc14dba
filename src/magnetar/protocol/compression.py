"""The five payload codecs of Pulsar: NONE, LZ4, ZLIB, ZSTD, SNAPPY.

Theory of operation: only the payload is compressed (for a batch: the whole
blob of records), never the metadata; ``MessageMetadata.uncompressed_size``
holds the original length. The formats are the ones the C++ client writes:

- LZ4: a raw LZ4 *block*, no frame and no size header (``lz4.block`` with
  ``store_size=False``); decoding needs the uncompressed size.
- ZLIB: a zlib stream with its 2-byte header (``zlib.compress``).
- ZSTD: a standard zstd frame.
- SNAPPY: raw snappy, not the framed format (``cramjam.snappy.*_raw``).

``decompress`` is bounded: it refuses an ``uncompressed_size`` above
``max_uncompressed_size`` and checks that the output has exactly that length,
so a hostile payload cannot make us allocate without limit. Every failure is a
``CorruptPayload`` (a RemoteProtocolError).

The codec libraries (lz4, zstandard, cramjam: a few MiB resident) are imported
by the first payload that needs one, so a process that never sees a
compressed payload never loads them.
"""

from __future__ import annotations

import io
import zlib

from magnetar.protocol.enums import CompressionType
from magnetar.protocol.errors import CorruptPayload, UnsupportedCompression

# A compressed payload never expands beyond a frame; 64 MiB is far above the 5 MiB default.
DEFAULT_MAX_UNCOMPRESSED_SIZE = 64 * 1024 * 1024
ZSTD_LEVEL = 3  # the C++ client's default level


def compress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Compress ``data`` with the given CompressionType."""
    try:
        codec = CompressionType(codec)
    except ValueError:
        raise UnsupportedCompression(f"unknown compression type {codec}") from None
    if codec is CompressionType.NONE:
        return bytes(data)
    if codec is CompressionType.LZ4:
        import lz4.block

        return lz4.block.compress(bytes(data), store_size=False)
    if codec is CompressionType.ZLIB:
        return zlib.compress(bytes(data))
    if codec is CompressionType.ZSTD:
        import zstandard

        return zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(bytes(data))
    import cramjam

    return bytes(cramjam.snappy.compress_raw(bytes(data)))


def decompress(
    codec: int,
    data: bytes | bytearray | memoryview,
    uncompressed_size: int,
    max_uncompressed_size: int = DEFAULT_MAX_UNCOMPRESSED_SIZE,
) -> bytes:
    """Decompress to exactly ``uncompressed_size`` bytes or raise CorruptPayload."""
    try:
        codec = CompressionType(codec)
    except ValueError:
        raise UnsupportedCompression(f"unknown compression type {codec}") from None
    if uncompressed_size < 0 or uncompressed_size > max_uncompressed_size:
        raise CorruptPayload(f"uncompressed size {uncompressed_size} out of bounds")
    raw = bytes(data)
    try:
        if codec is CompressionType.NONE:
            out = raw
        elif codec is CompressionType.LZ4:
            import lz4.block

            out = lz4.block.decompress(raw, uncompressed_size=uncompressed_size) if uncompressed_size else b""
        elif codec is CompressionType.ZLIB:
            inflater = zlib.decompressobj()
            out = inflater.decompress(raw, uncompressed_size + 1)
        elif codec is CompressionType.ZSTD:
            # A bounded streaming read: the frame header's content size is not trusted.
            import zstandard

            with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw)) as reader:
                out = reader.read(uncompressed_size + 1)
        else:
            import cramjam

            claimed = cramjam.snappy.decompress_raw_len(raw)
            if claimed != uncompressed_size:
                raise CorruptPayload(
                    f"SNAPPY payload claims {claimed} bytes, metadata says {uncompressed_size}"
                )
            out = bytes(cramjam.snappy.decompress_raw(raw))
    except CorruptPayload:
        raise
    except Exception as exc:  # each codec library has its own error types
        raise CorruptPayload(f"{codec.name} payload does not decompress: {exc}") from None
    if len(out) != uncompressed_size:
        raise CorruptPayload(
            f"{codec.name} payload decompressed to {len(out)} bytes, metadata says {uncompressed_size}"
        )
    return out
