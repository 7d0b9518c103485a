"""Finding and reading a `_metadata` from a pointer a person or the store gives."""

from __future__ import annotations

from sparkpoint.checkpoint import CompletedCheckpoint
from sparkpoint.metadata import decode_metadata
from sparkpoint.storage.errors import FileNotFound
from sparkpoint.storage.filesystem import FileSystem
from sparkpoint.storage.location import METADATA_FILE_NAME
from sparkpoint.storage.uri import parse


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


def read_metadata(fs: FileSystem, pointer: str) -> CompletedCheckpoint:
    """Read and decode; relative paths (savepoints) resolve against where the file is."""
    uri = resolve_metadata_uri(fs, pointer)
    data = fs.read(uri)
    return decode_metadata(data, source=uri, base_dir=str(parse(uri).parent))
