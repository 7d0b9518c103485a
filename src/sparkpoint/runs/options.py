"""A job's checkpointing options: the service's defaults under what the job registered."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from sparkpoint.config import ConfigError, timeout_beyond_grace
from sparkpoint.coordinator import OPTION_KEYS, CheckpointingOptions

log = logging.getLogger(__name__)

_BY_KEY = {key: name for name, key in OPTION_KEYS.items()}


def job_options(
    defaults: Mapping[str, int],
    config: Mapping[str, Any],
    *,
    grace_period_s: float | None = None,
) -> CheckpointingOptions:
    """``config`` may use field names (``interval_ms``) or Flink keys; what it leaves out
    comes from ``defaults`` (field names). ``grace_period_s``: the orphan collector's
    grace period, which the checkpoint timeout may not exceed (None: no collector).
    Raises ConfigError naming the key."""
    if not isinstance(config, Mapping):
        raise ConfigError("checkpoint_config", config, "must be an object of options")
    CheckpointingOptions.from_dict(config)  # unknown keys, duplicates, bad values: refused
    named = {(key if key in OPTION_KEYS else _BY_KEY[key]): value for key, value in config.items()}
    options = CheckpointingOptions(**{**defaults, **named})
    problem = (
        None if grace_period_s is None else timeout_beyond_grace(options.timeout_ms, grace_period_s)
    )
    if problem:
        spellings = ("timeout_ms", OPTION_KEYS["timeout_ms"])
        given = next((key for key in config if key in spellings), None)
        key = given or f"{OPTION_KEYS['timeout_ms']} (the service's default)"
        raise ConfigError(key, options.timeout_ms, problem)
    return options


def stored_job_options(
    defaults: Mapping[str, int],
    config: Mapping[str, Any],
    *,
    grace_period_s: float | None = None,
) -> CheckpointingOptions:
    """The options of a job registered earlier (its record), as :func:`job_options`, but
    a timeout beyond the grace period — registered before the rule, or before the grace
    period was lowered — is cut down to it instead of refused: the job keeps running."""
    options = job_options(defaults, config)
    if grace_period_s is None or not timeout_beyond_grace(options.timeout_ms, grace_period_s):
        return options
    grace_ms = round(grace_period_s * 1000)
    log.warning(
        "a registered job's checkpoint timeout of %d ms exceeds %s (%d ms): cut down to it",
        options.timeout_ms,
        "state.checkpoints.orphan-cleanup.grace-period",
        grace_ms,
    )
    return dataclasses.replace(options, timeout_ms=grace_ms)
