"""State handles as JSON-ready dicts (for restore plans sent over HTTP or printed).

Inline bytes travel as base64. Every ``*_from_dict`` raises
:class:`~sparkpoint.checkpoint.InvalidCheckpointValue` on anything malformed.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from sparkpoint.checkpoint import (
    DistributionMode,
    FileStateHandle,
    IncrementalKeyedStateHandle,
    InlineStateHandle,
    InvalidCheckpointValue,
    KeyedStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorStateHandle,
    StateMetaInfo,
    StoreFile,
    StreamStateHandle,
)


def _malformed(what: str, exc: Exception) -> InvalidCheckpointValue:
    return InvalidCheckpointValue(f"malformed {what}: {exc!r}")


def range_to_list(r: KeyGroupRange) -> list[int]:
    return [r.start, r.end]


def range_from_list(data: Any) -> KeyGroupRange:
    try:
        start, end = data
        return KeyGroupRange(int(start), int(end))
    except (TypeError, ValueError) as exc:
        if isinstance(exc, InvalidCheckpointValue):
            raise
        raise _malformed("key group range", exc) from exc


def stream_to_dict(stream: StreamStateHandle) -> dict[str, Any]:
    if isinstance(stream, FileStateHandle):
        return {"file": stream.path, "size": stream.size}
    return {"inline": stream.name, "data": base64.b64encode(stream.data).decode("ascii")}


def stream_from_dict(data: Any) -> StreamStateHandle:
    try:
        if "file" in data:
            return FileStateHandle(str(data["file"]), int(data["size"]))
        return InlineStateHandle(str(data["inline"]), base64.b64decode(data["data"], validate=True))
    except (KeyError, TypeError, ValueError, binascii.Error) as exc:
        if isinstance(exc, InvalidCheckpointValue):
            raise
        raise _malformed("stream handle", exc) from exc


def keyed_to_dict(handle: KeyedStateHandle) -> dict[str, Any]:
    if isinstance(handle, IncrementalKeyedStateHandle):
        return {
            "kind": "incremental",
            "key_groups": range_to_list(handle.key_group_range),
            "store_key_groups": range_to_list(handle.store_range),
            "instance": handle.instance,
            "shared": [_store_file_to_dict(f) for f in handle.shared],
            "private": [_store_file_to_dict(f) for f in handle.private],
            "reused": sorted(handle.reused),
        }
    return {
        "key_groups": range_to_list(handle.key_group_range),
        "offsets": list(handle.offsets),
        "stream": stream_to_dict(handle.stream),
    }


def _store_file_to_dict(f: StoreFile) -> dict[str, Any]:
    return {"name": f.name, "stream": stream_to_dict(f.stream)}


def keyed_from_dict(data: Any) -> KeyedStateHandle:
    try:
        if data.get("kind") == "incremental":
            return IncrementalKeyedStateHandle(
                range_from_list(data["key_groups"]),
                range_from_list(data["store_key_groups"]),
                str(data["instance"]),
                tuple(
                    StoreFile(str(f["name"]), stream_from_dict(f["stream"])) for f in data["shared"]
                ),
                tuple(
                    StoreFile(str(f["name"]), stream_from_dict(f["stream"]))
                    for f in data["private"]
                ),
                frozenset(str(name) for name in data.get("reused", ())),
            )
        return KeyGroupsStateHandle(
            range_from_list(data["key_groups"]),
            tuple(int(o) for o in data["offsets"]),
            stream_from_dict(data["stream"]),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        if isinstance(exc, InvalidCheckpointValue):
            raise
        raise _malformed("keyed state handle", exc) from exc


def operator_to_dict(handle: OperatorStateHandle) -> dict[str, Any]:
    return {
        "states": {
            name: {"mode": info.mode.value, "offsets": list(info.offsets)}
            for name, info in handle.states.items()
        },
        "stream": stream_to_dict(handle.stream),
    }


def operator_from_dict(data: Any) -> OperatorStateHandle:
    try:
        states = {
            str(name): StateMetaInfo(
                tuple(int(o) for o in info["offsets"]), DistributionMode(info["mode"])
            )
            for name, info in data["states"].items()
        }
        return OperatorStateHandle(states, stream_from_dict(data["stream"]))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        if isinstance(exc, InvalidCheckpointValue):
            raise
        raise _malformed("operator state handle", exc) from exc
