"""A job's checkpointing options: the service's defaults under what the job registered."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sparkpoint.config import ConfigError
from sparkpoint.coordinator import OPTION_KEYS, CheckpointingOptions

_BY_KEY = {key: name for name, key in OPTION_KEYS.items()}


def job_options(defaults: Mapping[str, int], config: Mapping[str, Any]) -> CheckpointingOptions:
    """``config`` may use field names (``interval_ms``) or Flink keys; what it leaves out
    comes from ``defaults`` (field names). Raises ConfigError naming the key."""
    if not isinstance(config, Mapping):
        raise ConfigError("checkpoint_config", config, "must be an object of options")
    CheckpointingOptions.from_dict(config)  # unknown keys, duplicates, bad values: refused
    named = {(key if key in OPTION_KEYS else _BY_KEY[key]): value for key, value in config.items()}
    return CheckpointingOptions(**{**defaults, **named})
