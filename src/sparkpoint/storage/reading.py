"""Finding and reading a `_metadata` from a pointer a person or the store gives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sparkpoint.checkpoint import CompletedCheckpoint
from sparkpoint.metadata import MetadataError, decode_metadata, metadata_checksum
from sparkpoint.storage.errors import FileNotFound
from sparkpoint.storage.filesystem import FileSystem
from sparkpoint.storage.location import METADATA_FILE_NAME
from sparkpoint.storage.uri import parse
from sparkpoint.storage.verify import FileCheck, verify_state_files


def resolve_metadata_uri(fs: FileSystem, pointer: str) -> str:
    """The `_metadata` a pointer means: a checkpoint or savepoint directory, or a
    `_metadata` file itself (any name, if it is a file)."""
    uri = parse(pointer)
    if uri.name == METADATA_FILE_NAME:
        return str(uri)
    try:
        status = fs.status(str(uri))
    except FileNotFound:
        raise FileNotFound(
            f"no checkpoint or savepoint at {pointer}: no such file or directory", path=pointer
        ) from None
    return str(uri.child(METADATA_FILE_NAME)) if status.is_dir else str(uri)


def read_metadata(fs: FileSystem, pointer: str, expected_checksum: str = "") -> CompletedCheckpoint:
    """Read and decode; relative paths (savepoints) resolve against where the file is.
    ``expected_checksum``: what the store recorded when the checkpoint completed (empty:
    nothing recorded); a file that differs raises :class:`MetadataError`."""
    return _read(fs, resolve_metadata_uri(fs, pointer), expected_checksum)[1]


def _read(fs: FileSystem, uri: str, expected_checksum: str) -> tuple[bytes, CompletedCheckpoint]:
    data = fs.read(uri)
    if expected_checksum and metadata_checksum(data) != expected_checksum:
        raise MetadataError(
            uri,
            f"checksum {metadata_checksum(data)} differs from {expected_checksum} recorded "
            "when the checkpoint completed",
        )
    return data, decode_metadata(data, source=uri, base_dir=str(parse(uri).parent))


@dataclass(frozen=True, slots=True)
class LoadedMetadata:
    """A `_metadata` as read: where it is, its size and checksum, and its content."""

    uri: str
    size: int
    checksum: str
    checkpoint: CompletedCheckpoint


def load_metadata(pointer: str, **fs_options: Any) -> LoadedMetadata:
    """Read the `_metadata` at any pointer, local or HDFS, with no storage configured
    (``sparkpoint metadata inspect``); ``fs_options`` as for :func:`filesystem_for`."""
    from sparkpoint.storage.registry import filesystem_for

    fs = filesystem_for(pointer, **fs_options)
    uri = resolve_metadata_uri(fs, pointer)
    data, checkpoint = _read(fs, uri, "")
    return LoadedMetadata(uri, len(data), metadata_checksum(data), checkpoint)


def check_state_files(checkpoint: CompletedCheckpoint, **fs_options: Any) -> list[FileCheck]:
    """:func:`verify_state_files` with filesystems made from ``fs_options``."""
    from sparkpoint.storage.registry import filesystem_for

    return verify_state_files(checkpoint, lambda uri: filesystem_for(uri, **fs_options))
