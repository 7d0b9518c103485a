"""The settings of a submitted pipeline's driver (``sparkpoint run``), from its command
line and from Spark's configuration.

Every option ``--name`` is also the Spark setting ``spark.sparkpoint.name``, so a
cluster's ``spark-defaults.conf`` (or ``spark-submit --conf``) can carry it. An option
given on the command line wins over the same setting in Spark's configuration. A
``spark.sparkpoint.*`` key that names no option, a value that does not parse, and
settings that contradict each other (wherever each came from) are refused with a
:class:`SettingsError` that names them and says where each came from.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from sparkpoint.pipeline.state.backend import BACKEND_NAMES
from sparkpoint.runs.messages import RestoreMode

#: Spark settings under this prefix are the driver's options.
CONF_PREFIX = "spark.sparkpoint."


class SettingsError(ValueError):
    """Settings that cannot be used as given; the message names them."""


def _flag(text: str) -> bool:
    # Spark's own booleans: "true" / "false", any case.
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError("must be true or false")
    return lowered == "true"


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise ValueError("must be a positive whole number")
    return value


def _one_of(choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return text

    return parse


@dataclass(frozen=True)
class DriverSettings:
    """What ``sparkpoint run`` needs besides the pipeline. ``sources``: where each
    setting that is not None came from (``--name`` or ``spark.sparkpoint.name``)."""

    coordinator: str | None = None
    token_file: str | None = None
    ca_file: str | None = None
    checkpoint_dir: str | None = None
    savepoint_dir: str | None = None
    interval_ms: int = 1000
    standby: bool = False
    restore_from: str | None = None
    restore_mode: str | None = None
    state_backend: str | None = None
    progress: str | None = None
    sources: Mapping[str, str] = field(default_factory=dict)

    def source(self, name: str) -> str:
        return self.sources.get(name, option_name(name))

    @property
    def addresses(self) -> list[str]:
        return [a.strip() for a in (self.coordinator or "").split(",") if a.strip()]


#: How each setting's text from Spark's configuration becomes its value.
PARSERS: dict[str, Callable[[str], Any]] = {
    "coordinator": str,
    "token_file": str,
    "ca_file": str,
    "checkpoint_dir": str,
    "savepoint_dir": str,
    "interval_ms": _positive_int,
    "standby": _flag,
    "restore_from": str,
    "restore_mode": _one_of(tuple(m.value for m in RestoreMode)),
    "state_backend": _one_of(BACKEND_NAMES),
    "progress": str,
}
assert set(PARSERS) == {f.name for f in fields(DriverSettings)} - {"sources"}


def option_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def conf_key(name: str) -> str:
    return CONF_PREFIX + name.replace("_", "-")


def resolve(explicit: Mapping[str, Any], conf: Mapping[str, str]) -> DriverSettings:
    """The driver's settings: ``explicit`` (options given on the command line, by
    setting name; None means not given) over the ``spark.sparkpoint.*`` entries of
    ``conf`` (Spark's configuration, every key)."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    by_key = {conf_key(name): name for name in PARSERS}
    for key, text in sorted(conf.items()):
        if not key.startswith(CONF_PREFIX):
            continue
        name = by_key.get(key)
        if name is None:
            known = ", ".join(sorted(by_key))
            raise SettingsError(f"unknown Spark setting {key}; sparkpoint's are: {known}")
        try:
            values[name] = PARSERS[name](text)
        except ValueError as exc:
            raise SettingsError(f"Spark setting {key}={text!r}: {exc}") from None
        sources[name] = key
    for name, given in explicit.items():
        if name not in PARSERS:
            raise SettingsError(f"unknown option {option_name(name)}")
        if given is None:
            continue
        try:
            values[name] = PARSERS[name](given) if isinstance(given, str) else given
        except ValueError as exc:
            raise SettingsError(f"{option_name(name)} {given!r}: {exc}") from None
        sources[name] = option_name(name)
    settings = DriverSettings(**values, sources=sources)
    check_consistent(settings)
    return settings


def check_consistent(s: DriverSettings) -> None:
    """Refuse settings that contradict each other, naming each by where it was set."""
    if s.coordinator is not None and not s.addresses:
        raise SettingsError(f"{s.source('coordinator')} names no coordinator address")
    if s.addresses:
        for name in ("checkpoint_dir", "savepoint_dir"):
            if getattr(s, name) is not None:
                raise SettingsError(
                    f"{s.source(name)} contradicts {s.source('coordinator')}: with "
                    "coordinators, their state.checkpoints.dir and state.savepoints.dir "
                    f"say where checkpoints go; drop {s.source(name)}, or drop "
                    f"{s.source('coordinator')} to run with an embedded coordinator"
                )
        return
    if s.checkpoint_dir is None:
        raise SettingsError(
            f"say where checkpoints go: {option_name('coordinator')} "
            f"({conf_key('coordinator')}) for the coordinator service, or "
            f"{option_name('checkpoint_dir')} ({conf_key('checkpoint_dir')}) for an "
            "embedded coordinator"
        )
    for name in ("standby", "token_file", "ca_file"):
        if getattr(s, name):
            raise SettingsError(
                f"{s.source(name)} needs {option_name('coordinator')} "
                f"({conf_key('coordinator')}): only the coordinator service "
                + ("grants a standby driver the job" if name == "standby" else "is reached")
            )
