"""The record the completed-checkpoint store keeps: where `_metadata` is, plus a summary.

The state itself never goes to ZooKeeper, only this small pointer (docs/architecture.md §3).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sparkpoint.checkpoint.errors import InvalidCheckpointValue
from sparkpoint.checkpoint.ids import validate_checkpoint_id, validate_job_id
from sparkpoint.checkpoint.status import CheckpointKind

_POINTER_FORMAT = 1
#: ``checkpointed_size`` not given: the full size (as read from pointers written before
#: the two sizes were told apart).
AS_FULL_SIZE = -1


@dataclass(frozen=True, slots=True)
class CheckpointPointer:
    """A completed checkpoint as the store knows it.

    ``metadata_uri`` is the location of its ``_metadata`` file (``file:///…``, a plain path,
    ``hdfs://…`` or ``webhdfs://…``). Times are milliseconds since the Unix epoch.
    ``state_size`` is the full size (every byte of state the checkpoint references),
    ``checkpointed_size`` the part of it the checkpoint wrote itself.
    """

    job_id: str
    checkpoint_id: int
    kind: CheckpointKind
    trigger_timestamp_ms: int
    completion_timestamp_ms: int
    metadata_uri: str
    state_size: int = 0
    metadata_checksum: str = ""
    checkpointed_size: int = AS_FULL_SIZE

    def __post_init__(self) -> None:
        if self.checkpointed_size == AS_FULL_SIZE:
            object.__setattr__(self, "checkpointed_size", self.state_size)
        validate_job_id(self.job_id)
        validate_checkpoint_id(self.checkpoint_id)
        if not isinstance(self.kind, CheckpointKind):
            raise InvalidCheckpointValue(f"kind {self.kind!r} is not a CheckpointKind")
        if (
            self.trigger_timestamp_ms < 0
            or self.completion_timestamp_ms < self.trigger_timestamp_ms
        ):
            raise InvalidCheckpointValue(
                f"checkpoint {self.checkpoint_id}: completion time {self.completion_timestamp_ms} "
                f"precedes trigger time {self.trigger_timestamp_ms}"
            )
        if not self.metadata_uri:
            raise InvalidCheckpointValue(f"checkpoint {self.checkpoint_id}: empty metadata uri")
        if self.state_size < 0:
            raise InvalidCheckpointValue(
                f"checkpoint {self.checkpoint_id}: negative state size {self.state_size}"
            )
        if not 0 <= self.checkpointed_size <= self.state_size:
            raise InvalidCheckpointValue(
                f"checkpoint {self.checkpoint_id}: checkpointed size {self.checkpointed_size} "
                f"is not within 0..{self.state_size} (its full size)"
            )

    @property
    def is_savepoint(self) -> bool:
        return self.kind is CheckpointKind.SAVEPOINT

    @property
    def duration_ms(self) -> int:
        return self.completion_timestamp_ms - self.trigger_timestamp_ms

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": _POINTER_FORMAT,
            "job_id": self.job_id,
            "checkpoint_id": self.checkpoint_id,
            "kind": self.kind.value,
            "trigger_timestamp_ms": self.trigger_timestamp_ms,
            "completion_timestamp_ms": self.completion_timestamp_ms,
            "metadata_uri": self.metadata_uri,
            "state_size": self.state_size,
            "checkpointed_size": self.checkpointed_size,
            "metadata_checksum": self.metadata_checksum,
        }

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckpointPointer:
        if not isinstance(data, dict):
            raise InvalidCheckpointValue(
                f"checkpoint pointer is {type(data).__name__}, not an object"
            )
        fmt = data.get("format")
        if fmt != _POINTER_FORMAT:
            raise InvalidCheckpointValue(f"unknown checkpoint pointer format {fmt!r}")
        try:
            return cls(
                job_id=data["job_id"],
                checkpoint_id=data["checkpoint_id"],
                kind=CheckpointKind(data["kind"]),
                trigger_timestamp_ms=int(data["trigger_timestamp_ms"]),
                completion_timestamp_ms=int(data["completion_timestamp_ms"]),
                metadata_uri=data["metadata_uri"],
                state_size=int(data.get("state_size", 0)),
                metadata_checksum=str(data.get("metadata_checksum", "")),
                checkpointed_size=int(data.get("checkpointed_size", AS_FULL_SIZE)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, InvalidCheckpointValue):
                raise
            raise InvalidCheckpointValue(f"malformed checkpoint pointer: {exc!r}") from exc

    @classmethod
    def from_bytes(cls, raw: bytes) -> CheckpointPointer:
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InvalidCheckpointValue(f"checkpoint pointer is not JSON: {exc}") from exc
        return cls.from_dict(data)
