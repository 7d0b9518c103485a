"""The envelope every `_metadata` version shares: magic, version, body length, CRC-32.

::

    offset  size  field
    0       8     magic  89 53 50 4B 4D 44 0D 0A   ("\\x89SPKMD\\r\\n")
    8       2     format version, unsigned big-endian
    10      2     flags, unsigned big-endian; 0 (reserved)
    12      8     body length L, unsigned big-endian
    20      L     body (its layout depends on the version)
    20+L    4     CRC-32 (zlib/ISO-HDLC) of bytes 0 … 20+L-1, unsigned big-endian

The envelope stays fixed across versions so that any build can tell a file of a newer
version from a corrupt one.
"""

from __future__ import annotations

import struct
import zlib

from sparkpoint.metadata.errors import MetadataError

#: The high first byte catches 7-bit transfers; CR LF catches newline translation.
MAGIC = b"\x89SPKMD\r\n"
_HEADER = struct.Struct(">8sHHQ")
HEADER_SIZE = _HEADER.size  # 20
TRAILER_SIZE = 4


def frame(version: int, body: bytes) -> bytes:
    """Wrap ``body`` in the envelope of format ``version``."""
    head = _HEADER.pack(MAGIC, version, 0, len(body))
    crc = zlib.crc32(body, zlib.crc32(head))
    return b"".join((head, body, crc.to_bytes(TRAILER_SIZE, "big")))


def unframe(data: bytes, source: str, supported: range) -> tuple[int, int, int]:
    """Check the envelope of ``data``; return (version, body start, body end).

    Checks in an order that names the most useful defect: a file that is not `_metadata`
    at all, then one this build is too old for, then truncation and trailing bytes, and
    finally corruption anywhere (the checksum).
    """
    size = len(data)
    if size < len(MAGIC) or data[: len(MAGIC)] != MAGIC:
        if MAGIC.startswith(bytes(data[: len(MAGIC)])):
            raise MetadataError(
                source, f"truncated: {size} bytes, shorter than the {HEADER_SIZE}-byte header"
            )
        raise MetadataError(
            source,
            f"wrong magic number {bytes(data[: len(MAGIC)]).hex()} "
            f"(expected {MAGIC.hex()}): not a sparkpoint _metadata file",
        )
    if size < HEADER_SIZE:
        raise MetadataError(
            source, f"truncated: {size} bytes, shorter than the {HEADER_SIZE}-byte header"
        )
    _, version, flags, body_length = _HEADER.unpack_from(data)
    if version > supported.stop - 1:
        raise MetadataError(
            source,
            f"format version {version} is newer than this build reads "
            f"(versions {supported.start}..{supported.stop - 1}); upgrade sparkpoint",
        )
    if version not in supported:
        raise MetadataError(source, f"unknown format version {version}")
    expected = HEADER_SIZE + body_length + TRAILER_SIZE
    if size < expected:
        raise MetadataError(source, f"truncated: {size} bytes, the header announces {expected}")
    stored = int.from_bytes(data[expected - TRAILER_SIZE : expected], "big")
    computed = zlib.crc32(memoryview(data)[: expected - TRAILER_SIZE])
    if size > expected:
        if stored == computed:
            raise MetadataError(
                source, f"trailing garbage: {size - expected} bytes after the checksum"
            )
        raise MetadataError(
            source,
            f"corrupt: {size} bytes where the header announces {expected}, "
            "and the checksum does not match",
        )
    if stored != computed:
        raise MetadataError(
            source,
            f"checksum mismatch (stored {stored:08x}, computed {computed:08x}): "
            "the file is corrupt",
        )
    if flags != 0:
        raise MetadataError(source, f"unknown header flags {flags:#06x}")
    return version, HEADER_SIZE, HEADER_SIZE + body_length
