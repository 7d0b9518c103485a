"""Checkpointing options of one job, with Flink's key names and defaults.

Every invalid value is refused with the key, the value and the reason (docs/architecture.md §9),
so a registration or a configuration file can be rejected with a message a person can act on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from sparkpoint.store import DEFAULT_MAX_RETAINED

#: Flink's configuration key for each option, used in error messages and accepted as input.
OPTION_KEYS: Mapping[str, str] = {
    "interval_ms": "execution.checkpointing.interval",
    "timeout_ms": "execution.checkpointing.timeout",
    "min_pause_ms": "execution.checkpointing.min-pause",
    "max_concurrent": "execution.checkpointing.max-concurrent-checkpoints",
    "tolerable_failures": "execution.checkpointing.tolerable-failed-checkpoints",
    "max_retained": "state.checkpoints.num-retained",
    "history_size": "web.checkpoints.history",
}


class InvalidOptionError(ValueError):
    """A checkpointing option with a value it cannot take."""

    def __init__(self, key: str, value: object, reason: str) -> None:
        super().__init__(f"{key}={value!r}: {reason}")
        self.key = key
        self.value = value
        self.reason = reason


@dataclass(frozen=True, slots=True)
class CheckpointingOptions:
    """How often and how patiently one job is checkpointed. Times are milliseconds.

    Defaults follow Flink where Flink has one (timeout 10 min, no min pause, one checkpoint
    at a time, no tolerated failure, one retained checkpoint, a history of 10); Flink has no
    default interval (checkpointing is off), so sparkpoint picks 10 s.

    >>> CheckpointingOptions.from_dict({"execution.checkpointing.interval": 500}).interval_ms
    500
    """

    interval_ms: int = 10_000
    timeout_ms: int = 600_000
    min_pause_ms: int = 0
    max_concurrent: int = 1
    tolerable_failures: int = 0
    max_retained: int = DEFAULT_MAX_RETAINED
    history_size: int = 10

    def __post_init__(self) -> None:
        minimums = {
            "interval_ms": 10,  # Flink's lower bound: below it a checkpoint never finishes
            "timeout_ms": 10,
            "min_pause_ms": 0,
            "max_concurrent": 1,
            "tolerable_failures": 0,
            "max_retained": 1,
            "history_size": 0,
        }
        for name, minimum in minimums.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidOptionError(OPTION_KEYS[name], value, "must be an integer")
            if value < minimum:
                raise InvalidOptionError(OPTION_KEYS[name], value, f"must be at least {minimum}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CheckpointingOptions:
        """Options from field names (``interval_ms``) or Flink keys; unknown keys are refused
        rather than ignored, since a misspelt key would silently keep a default."""
        if not isinstance(data, Mapping):
            raise InvalidOptionError("checkpoint config", data, "must be an object of options")
        by_key = {key: name for name, key in OPTION_KEYS.items()}
        values: dict[str, Any] = {}
        for key, value in data.items():
            name = key if key in OPTION_KEYS else by_key.get(key)
            if name is None:
                raise InvalidOptionError(key, value, "unknown checkpointing option")
            if name in values:
                raise InvalidOptionError(key, value, "given twice (by field name and key)")
            values[name] = value
        return cls(**values)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))
