"""The settings of checkpoints: how many are retained and how leftovers are cleaned up
(store/, service/orphans.py), where they are written (storage/), and the checkpointing
options of jobs that set none (coordinator/options.py takes its keys and defaults from
here)."""

from __future__ import annotations

from dataclasses import dataclass

from sparkpoint.config.values import (
    check_range,
    fail,
    key_of,
    parse_dir,
    parse_dir_list,
    parse_duration,
    parse_int,
    setting,
)

#: The key of the grace period, named by every refusal of a checkpoint timeout beyond it.
GRACE_PERIOD_KEY = "state.checkpoints.orphan-cleanup.grace-period"


def timeout_beyond_grace(timeout_ms: int, grace_period_s: float) -> str | None:
    """The one rule tying a checkpoint's timeout to the collector's grace period (the
    configuration's defaults and every job's options obey it); None when it holds. A
    pending checkpoint's uploads to ``shared/`` are referenced by nothing retained until
    it completes, up to the timeout after its trigger: a longer timeout would let it
    complete referencing files the collector already deleted."""
    grace_ms = round(grace_period_s * 1000)
    if timeout_ms > grace_ms:
        return (
            f"must not exceed {GRACE_PERIOD_KEY} ({grace_ms} ms): a checkpoint pending that "
            "long could complete referencing shared files already deleted; lower the "
            "timeout or raise the grace period"
        )
    return None


@dataclass(frozen=True, slots=True)
class StoreSettings:
    max_retained: int = setting(
        "state.checkpoints.num-retained", parse_int, 1,
        "Completed checkpoints retained per job (>= 1).",
    )  # fmt: skip
    orphan_grace_s: float = setting(
        GRACE_PERIOD_KEY, parse_duration, 600.0,
        "A chk-<id> directory that is neither retained nor pending, or a shared file no "
        "checkpoint references, is deleted by the leader once so for this long (0.1 s .. "
        "30 days); no checkpoint timeout (execution.checkpointing.timeout) may exceed it.",
    )  # fmt: skip
    orphan_scan_interval_s: float = setting(
        "state.checkpoints.orphan-cleanup.interval", parse_duration, 60.0,
        "How often the leader looks for orphaned checkpoint directories (0.1 s .. 1 h).",
    )  # fmt: skip
    cleanup_delay_s: float = setting(
        "state.checkpoints.cleanup.delay", parse_duration, 0.0,
        "Each background deletion waits this long before it runs (0 .. 60 s): 0 in "
        "production; drills set it to act as a slow storage (a slow HDFS).",
    )  # fmt: skip

    def __post_init__(self) -> None:
        check_range(self, "max_retained", 1, 10_000)
        check_range(self, "cleanup_delay_s", 0.0, 60.0)
        check_range(self, "orphan_grace_s", 0.1, 30 * 86400.0)
        check_range(self, "orphan_scan_interval_s", 0.1, 3600.0)


@dataclass(frozen=True, slots=True)
class StorageSettings:
    checkpoints_dir: str = setting(
        "state.checkpoints.dir", parse_dir, "/tmp/sparkpoint/checkpoints",
        "Where checkpoints are written: a local path, file://, hdfs:// or webhdfs:// URI.",
    )  # fmt: skip
    savepoints_dir: str = setting(
        "state.savepoints.dir", parse_dir, "",
        "Default target of savepoints (empty: every savepoint must name its directory).",
    )  # fmt: skip

    savepoints_allowed_dirs: str = setting(
        "state.savepoints.allowed-dirs", parse_dir_list, "",
        "Comma-separated roots a savepoint's target_dir must lie under (empty: only "
        "state.savepoints.dir).",
    )  # fmt: skip

    def __post_init__(self) -> None:
        if not self.checkpoints_dir:
            fail(self, "checkpoints_dir", "must not be empty")

    @property
    def savepoint_roots(self) -> tuple[str, ...]:
        """Where savepoints may be written: the allowed dirs, else the savepoint dir."""
        if self.savepoints_allowed_dirs:
            return tuple(d.strip() for d in self.savepoints_allowed_dirs.split(","))
        return (self.savepoints_dir,) if self.savepoints_dir else ()


@dataclass(frozen=True, slots=True)
class CheckpointingSettings:
    """Defaults for jobs that do not set their own checkpointing options."""

    interval_s: float = setting(
        "execution.checkpointing.interval", parse_duration, 10.0,
        "Default time between periodic checkpoints of a job.",
    )  # fmt: skip
    timeout_s: float = setting(
        "execution.checkpointing.timeout", parse_duration, 600.0,
        "Default time after which a checkpoint still collecting acknowledgements expires; "
        "at most state.checkpoints.orphan-cleanup.grace-period (a job's own timeout too).",
    )  # fmt: skip
    min_pause_s: float = setting(
        "execution.checkpointing.min-pause", parse_duration, 0.0,
        "Default minimum time between the end of one checkpoint and the next trigger.",
    )  # fmt: skip
    max_concurrent: int = setting(
        "execution.checkpointing.max-concurrent-checkpoints", parse_int, 1,
        "Default maximum of periodic checkpoints in progress at once.",
    )  # fmt: skip
    tolerable_failures: int = setting(
        "execution.checkpointing.tolerable-failed-checkpoints", parse_int, 0,
        "Default consecutive checkpoint failures tolerated before a job is marked failing.",
    )  # fmt: skip

    def __post_init__(self) -> None:
        check_range(self, "interval_s", 0.01, 365 * 86400.0)
        check_range(self, "timeout_s", 0.01, 365 * 86400.0)
        check_range(self, "min_pause_s", 0.0, 365 * 86400.0)
        check_range(self, "max_concurrent", 1, 1000)
        check_range(self, "tolerable_failures", 0, 1_000_000)

    def option_defaults(self) -> dict[str, int]:
        """As ``CheckpointingOptions`` field names (milliseconds)."""
        return {
            option: round(getattr(self, attr) * factor)
            for attr, (option, factor) in _AS_OPTION.items()
        }

    @classmethod
    def option_keys(cls) -> dict[str, str]:
        """The configuration key of each ``CheckpointingOptions`` field defaulted here."""
        return {option: key_of(cls, attr) for attr, (option, _) in _AS_OPTION.items()}


#: Each field above as the job option it is the default of, with the factor from its unit
#: to the option's (seconds to milliseconds).
_AS_OPTION = {
    "interval_s": ("interval_ms", 1000),
    "timeout_s": ("timeout_ms", 1000),
    "min_pause_s": ("min_pause_ms", 1000),
    "max_concurrent": ("max_concurrent", 1),
    "tolerable_failures": ("tolerable_failures", 1),
}
