"""One typed configuration: YAML file < `SPARKPOINT_…` environment < command-line flags.

Key names follow Flink's where the concept is the same (docs/architecture.md §9). Every value
is checked at start-up; a bad one raises :class:`ConfigError` naming the key, the value
and why it is refused. Durations accept Flink's spelling (``500 ms``, ``30 s``, ``2 min``)
or a bare number of milliseconds.

The generic loader is ``loader``, the pieces of a section ``values``; the sections are
grouped by what they configure (``cluster``, ``checkpoints``, ``service``).

>>> cfg = load_config(overrides={"high-availability.zookeeper.quorum": "zk1:2181,zk2:2181"})
>>> cfg.zookeeper.quorum, cfg.zookeeper.session_timeout_s
('zk1:2181,zk2:2181', 30.0)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkpoint.config.checkpoints import (
    GRACE_PERIOD_KEY,
    CheckpointingSettings,
    StorageSettings,
    StoreSettings,
    timeout_beyond_grace,
)
from sparkpoint.config.cluster import (
    LEASE_MIN_RENEWALS,
    HASettings,
    ZooKeeperSettings,
    lease_timing_problem,
)
from sparkpoint.config.loader import (
    CONFIG_ENV,
    ENV_PREFIX,
    SYSTEM_CONFIG,
    config_file_location,
    env_name,
    keys_of,
    load_sections,
)
from sparkpoint.config.service import RestSettings, SecuritySettings, ServiceSettings
from sparkpoint.config.values import ConfigError, key_of


@dataclass(frozen=True, slots=True)
class Config:
    zookeeper: ZooKeeperSettings = field(default_factory=ZooKeeperSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    ha: HASettings = field(default_factory=HASettings)
    rest: RestSettings = field(default_factory=RestSettings)
    storage: StorageSettings = field(default_factory=StorageSettings)
    checkpointing: CheckpointingSettings = field(default_factory=CheckpointingSettings)
    service: ServiceSettings = field(default_factory=ServiceSettings)
    security: SecuritySettings = field(default_factory=SecuritySettings)

    def __post_init__(self) -> None:
        timeout_ms = self.job_option_defaults()["timeout_ms"]
        problem = timeout_beyond_grace(timeout_ms, self.store.orphan_grace_s)
        if problem:
            raise ConfigError(
                key_of(CheckpointingSettings, "timeout_s"), f"{timeout_ms} ms", problem
            )

    def job_option_defaults(self) -> dict[str, int]:
        """The checkpointing options of a job that sets none, as ``CheckpointingOptions``
        field names: the checkpointing section's and the number retained."""
        return {**self.checkpointing.option_defaults(), "max_retained": self.store.max_retained}


_SECTIONS: dict[str, type] = {
    "zookeeper": ZooKeeperSettings,
    "store": StoreSettings,
    "ha": HASettings,
    "rest": RestSettings,
    "storage": StorageSettings,
    "checkpointing": CheckpointingSettings,
    "service": ServiceSettings,
    "security": SecuritySettings,
}


def all_keys() -> dict[str, str]:
    """Every configuration key with its help text (for --help and docs)."""
    return keys_of(_SECTIONS)


def load_config(
    path: str | Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Merge file, environment and overrides (in rising precedence) and validate. With no
    ``path``, the file :func:`config_file_location` finds (if any)."""
    return Config(**load_sections(_SECTIONS, path, environ=environ, overrides=overrides))


__all__ = [
    "CONFIG_ENV",
    "ENV_PREFIX",
    "GRACE_PERIOD_KEY",
    "LEASE_MIN_RENEWALS",
    "SYSTEM_CONFIG",
    "CheckpointingSettings",
    "Config",
    "ConfigError",
    "HASettings",
    "RestSettings",
    "SecuritySettings",
    "ServiceSettings",
    "StorageSettings",
    "StoreSettings",
    "ZooKeeperSettings",
    "all_keys",
    "config_file_location",
    "env_name",
    "key_of",
    "lease_timing_problem",
    "load_config",
    "timeout_beyond_grace",
]
