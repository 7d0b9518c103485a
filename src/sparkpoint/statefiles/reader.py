"""Reading the state-file format the writers of ``statefiles.writers`` produce.

Bytes in, keys and values out: a key group's entries from its group's bytes, a group's
length from its header, an operator-state element from its stream. No I/O and no restore
logic: ``sparkpoint.recovery.reader`` fetches the bytes (local or HDFS) and names the file
in the errors it raises.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

from sparkpoint.statefiles.keygroups import key_group_for_key_bytes
from sparkpoint.statefiles.keys import Key, KeyEncodingError, decode_key_from
from sparkpoint.statefiles.writers import GROUP_HEADER, GROUP_MAGIC, U32


class StateFormatError(ValueError):
    """Bytes that do not hold what the state-file format says; the message says what is
    wrong, the caller says where."""


def key_group_length(header: bytes) -> int:
    """The length of a key group (header and body) from its header's bytes."""
    magic, _, _, body_length, _ = GROUP_HEADER.unpack(header)
    if magic != GROUP_MAGIC:
        raise StateFormatError(f"no key-group header at its offset (found {magic!r})")
    return GROUP_HEADER.size + body_length


def parse_key_group(
    data: bytes, key_group: int, max_parallelism: int | None = None
) -> Iterator[tuple[Key, bytes]]:
    """Every ``(key, value)`` of one key group, ``data`` being the group's bytes from its
    header on. With ``max_parallelism``, every key is checked to hash into ``key_group``."""
    if len(data) < GROUP_HEADER.size:
        raise StateFormatError("shorter than a group header (its offsets are wrong)")
    magic, group, entries, body_length, crc = GROUP_HEADER.unpack_from(data, 0)
    if magic != GROUP_MAGIC:
        raise StateFormatError(f"no key-group header at its offset (found {magic!r})")
    if group != key_group:
        raise StateFormatError(f"the offset points at key group {group}")
    body = memoryview(data)[GROUP_HEADER.size :]
    if len(body) != body_length or zlib.crc32(body) != crc:
        raise StateFormatError("checksum mismatch, the state file is corrupted")
    pos = 0
    for _ in range(entries):
        start = pos
        try:
            key, pos = decode_key_from(body, pos)
        except KeyEncodingError as exc:
            raise StateFormatError(f"bad key: {exc}") from exc
        if max_parallelism is not None:
            actual = key_group_for_key_bytes(bytes(body[start:pos]), max_parallelism)
            if actual != key_group:
                raise StateFormatError(f"holds a key of key group {actual}")
        if pos + U32.size > len(body):
            raise StateFormatError("entry truncated after its key")
        (size,) = U32.unpack_from(body, pos)
        pos += U32.size
        if pos + size > len(body):
            raise StateFormatError(f"value of {size} bytes runs past the group")
        yield key, bytes(body[pos : pos + size])
        pos += size
    if pos != len(body):
        raise StateFormatError(f"{len(body) - pos} bytes after the last entry")


def operator_element(data: bytes, offset: int, name: str) -> bytes:
    """The element of operator state ``name`` at ``offset`` of its stream's bytes."""
    if offset + U32.size > len(data):
        raise StateFormatError(f"element of {name!r} at {offset} is beyond the end")
    (size,) = U32.unpack_from(data, offset)
    if offset + U32.size + size > len(data):
        raise StateFormatError(f"element of {name!r} at {offset} is truncated")
    return data[offset + U32.size : offset + U32.size + size]
