"""A plain-data view of a checkpoint (JSON-ready) for `sparkpoint metadata inspect`.

Sizes come in Flink's two kinds: ``state_size`` is the full size (every byte of state
referenced, shared files included), ``checkpointed_size`` the bytes the checkpoint wrote.
"""

from __future__ import annotations

import base64
from typing import Any

from sparkpoint.checkpoint import (
    CompletedCheckpoint,
    FileStateHandle,
    IncrementalKeyedStateHandle,
    KeyedStateHandle,
    OperatorStateHandle,
    StreamStateHandle,
)


def _stream(stream: StreamStateHandle) -> dict[str, Any]:
    if isinstance(stream, FileStateHandle):
        return {"kind": "file", "path": stream.path, "size": stream.size}
    return {
        "kind": "inline",
        "name": stream.name,
        "size": stream.size,
        "data_base64": base64.b64encode(stream.data).decode("ascii"),
    }


def _keyed(handle: KeyedStateHandle) -> dict[str, Any]:
    if isinstance(handle, IncrementalKeyedStateHandle):
        return {
            "kind": "incremental",
            "key_groups": [handle.key_group_range.start, handle.key_group_range.end],
            "store_key_groups": [handle.store_range.start, handle.store_range.end],
            "instance": handle.instance,
            "shared": [
                {"name": f.name, "stream": _stream(f.stream), "reused": f.name in handle.reused}
                for f in handle.shared
            ],
            "private": [{"name": f.name, "stream": _stream(f.stream)} for f in handle.private],
        }
    return {
        "key_groups": [handle.key_group_range.start, handle.key_group_range.end],
        "offsets": list(handle.offsets),
        "stream": _stream(handle.stream),
    }


def _operator(handle: OperatorStateHandle) -> dict[str, Any]:
    return {
        "states": {
            name: {"mode": info.mode.value, "offsets": list(info.offsets)}
            for name, info in sorted(handle.states.items())
        },
        "stream": _stream(handle.stream),
    }


def describe_checkpoint(checkpoint: CompletedCheckpoint) -> dict[str, Any]:
    """Everything in ``checkpoint`` as dicts, lists, strings and numbers."""
    return {
        "job_id": checkpoint.job_id,
        "checkpoint_id": checkpoint.checkpoint_id,
        "kind": checkpoint.kind.value,
        "trigger_timestamp_ms": checkpoint.trigger_timestamp_ms,
        "completion_timestamp_ms": checkpoint.completion_timestamp_ms,
        "state_size": checkpoint.state_size,
        "checkpointed_size": checkpoint.checkpointed_size,
        "operators": [
            {
                "uid": uid,
                "parallelism": state.parallelism,
                "max_parallelism": state.max_parallelism,
                "state_size": state.state_size,
                "checkpointed_size": state.checkpointed_size,
                "subtasks": [
                    {
                        "index": index,
                        "state_size": sub.state_size,
                        "checkpointed_size": sub.checkpointed_size,
                        "keyed": [_keyed(h) for h in sub.keyed],
                        "operator": [_operator(h) for h in sub.operator],
                    }
                    for index, sub in sorted(state.subtask_states.items())
                ],
            }
            for uid, state in checkpoint.operator_states.items()
        ],
    }
