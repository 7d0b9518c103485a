"""Checkpointing options of one job, with Flink's key names and defaults.

Every invalid value is refused with the key, the value and the reason (docs/architecture.md §9)
as a :class:`~sparkpoint.config.ConfigError`, the configuration's own error,
so a registration or a configuration file can be rejected with a message a person can act on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from sparkpoint.config import CheckpointingSettings, Config, ConfigError, StoreSettings, key_of

#: Flink's configuration key for each option, used in error messages and accepted as input:
#: the service's configuration keys of the defaults (sparkpoint.config), and one of its own.
OPTION_KEYS: Mapping[str, str] = {
    **CheckpointingSettings.option_keys(),
    "max_retained": key_of(StoreSettings, "max_retained"),
    "history_size": "web.checkpoints.history",
}

#: The defaults of the configuration (a service may set its own, see Config).
_DEFAULTS = Config().job_option_defaults()


@dataclass(frozen=True, slots=True)
class CheckpointingOptions:
    """How often and how patiently one job is checkpointed. Times are milliseconds.

    Defaults follow Flink where Flink has one (timeout 10 min, no min pause, one checkpoint
    at a time, no tolerated failure, one retained checkpoint, a history of 10); Flink has no
    default interval (checkpointing is off), so sparkpoint picks 10 s.

    >>> CheckpointingOptions.from_dict({"execution.checkpointing.interval": 500}).interval_ms
    500
    """

    interval_ms: int = _DEFAULTS["interval_ms"]
    timeout_ms: int = _DEFAULTS["timeout_ms"]
    min_pause_ms: int = _DEFAULTS["min_pause_ms"]
    max_concurrent: int = _DEFAULTS["max_concurrent"]
    tolerable_failures: int = _DEFAULTS["tolerable_failures"]
    max_retained: int = _DEFAULTS["max_retained"]
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
                raise ConfigError(OPTION_KEYS[name], value, "must be an integer")
            if value < minimum:
                raise ConfigError(OPTION_KEYS[name], value, f"must be at least {minimum}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CheckpointingOptions:
        """Options from field names (``interval_ms``) or Flink keys; unknown keys are refused
        rather than ignored, since a misspelt key would silently keep a default."""
        if not isinstance(data, Mapping):
            raise ConfigError("checkpoint config", data, "must be an object of options")
        by_key = {key: name for name, key in OPTION_KEYS.items()}
        values: dict[str, Any] = {}
        for key, value in data.items():
            name = key if key in OPTION_KEYS else by_key.get(key)
            if name is None:
                raise ConfigError(key, value, "unknown checkpointing option")
            if name in values:
                raise ConfigError(key, value, "given twice (by field name and key)")
            values[name] = value
        return cls(**values)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))
