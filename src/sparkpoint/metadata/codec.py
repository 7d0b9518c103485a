"""Encode and decode whole `_metadata` files, any version this build knows."""

from __future__ import annotations

import hashlib

from sparkpoint.checkpoint import CompletedCheckpoint
from sparkpoint.metadata import envelope, v1
from sparkpoint.metadata.errors import MetadataError
from sparkpoint.metadata.wire import Reader

#: The version :func:`encode_metadata` writes.
FORMAT_VERSION = v1.VERSION
#: Every version :func:`decode_metadata` reads (each has golden files in tests/metadata).
SUPPORTED_VERSIONS = range(1, FORMAT_VERSION + 1)
_BODY_DECODERS = {1: v1.decode_body_v1, 2: v1.decode_body_v2, 3: v1.decode_body}


def encode_metadata(checkpoint: CompletedCheckpoint, *, relative_to: str | None = None) -> bytes:
    """The `_metadata` bytes of ``checkpoint`` in the current format version.

    File handles under directory ``relative_to`` are written relative to it (savepoints, so
    that they can be moved); :func:`decode_metadata` resolves them against its ``base_dir``.
    """
    return envelope.frame(FORMAT_VERSION, v1.encode_body(checkpoint, relative_to))


def decode_metadata(
    data: bytes, *, source: str, base_dir: str | None = None
) -> CompletedCheckpoint:
    """The checkpoint in ``data``, or a :class:`MetadataError` naming ``source`` and the
    defect; never a partial result.

    Relative file paths are resolved against ``base_dir`` (the directory the file was read
    from); without it they stay relative.
    """
    data = bytes(data)
    version, start, end = envelope.unframe(data, source, SUPPORTED_VERSIONS)
    return _BODY_DECODERS[version](Reader(data, source, start, end), base_dir)


def metadata_checksum(data: bytes) -> str:
    """The checksum recorded in a checkpoint's store pointer: SHA-256 of the whole file,
    so ``sha256sum _metadata`` shows the same digits.

    >>> metadata_checksum(b"")[:15]
    'sha256:e3b0c442'
    """
    return "sha256:" + hashlib.sha256(data).hexdigest()


__all__ = [
    "FORMAT_VERSION",
    "SUPPORTED_VERSIONS",
    "MetadataError",
    "decode_metadata",
    "encode_metadata",
    "metadata_checksum",
]
