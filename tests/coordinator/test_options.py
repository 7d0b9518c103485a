"""Checkpointing options: Flink's defaults and keys; every bad value named with its reason."""

from __future__ import annotations

import pytest

from sparkpoint.config import ConfigError
from sparkpoint.coordinator import OPTION_KEYS, CheckpointingOptions


def test_defaults_follow_flink() -> None:
    opts = CheckpointingOptions()
    assert (opts.timeout_ms, opts.min_pause_ms, opts.max_concurrent) == (600_000, 0, 1)
    assert (opts.tolerable_failures, opts.max_retained, opts.history_size) == (0, 1, 10)


def test_from_dict_accepts_field_names_and_flink_keys() -> None:
    opts = CheckpointingOptions.from_dict(
        {"interval_ms": 500, "execution.checkpointing.max-concurrent-checkpoints": 2}
    )
    assert (opts.interval_ms, opts.max_concurrent) == (500, 2)
    assert CheckpointingOptions.from_dict(opts.to_dict()) == opts


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("interval_ms", 5, "at least 10"),
        ("timeout_ms", "600", "must be an integer"),
        ("min_pause_ms", -1, "at least 0"),
        ("max_concurrent", 0, "at least 1"),
        ("tolerable_failures", True, "must be an integer"),
        ("max_retained", 0, "at least 1"),
        ("history_size", -3, "at least 0"),
    ],
)
def test_invalid_values_name_key_value_and_reason(field: str, value: object, reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        CheckpointingOptions.from_dict({field: value})
    err = caught.value
    assert (err.key, err.value) == (OPTION_KEYS[field], value)
    assert reason in err.reason and OPTION_KEYS[field] in str(err)


def test_unknown_or_repeated_keys_are_refused() -> None:
    with pytest.raises(ConfigError, match="must be an object"):
        CheckpointingOptions.from_dict([1, 2])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown checkpointing option"):
        CheckpointingOptions.from_dict({"execution.checkpointing.intervall": 100})
    with pytest.raises(ConfigError, match="given twice"):
        CheckpointingOptions.from_dict(
            {"interval_ms": 100, "execution.checkpointing.interval": 200}
        )
