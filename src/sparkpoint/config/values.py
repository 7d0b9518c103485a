"""The pieces every settings section is made of: the one error type for a bad value, the
value parsers (Flink's spellings of durations included) and the field that ties an
attribute to its configuration key, parser and help text."""

from __future__ import annotations

import re
from dataclasses import field, fields
from typing import Any


class ConfigError(ValueError):
    """An invalid configuration value or checkpointing option: names the key, the value and
    the reason."""

    def __init__(self, key: str, value: object, reason: str) -> None:
        super().__init__(f"invalid configuration {key}={value!r}: {reason}")
        self.key, self.value, self.reason = key, value, reason


# --- value parsers ------------------------------------------------------------------------

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|milli|millis|s|sec|secs|min|m|h)?\s*$")
_UNIT_SECONDS = {
    None: 0.001, "ms": 0.001, "milli": 0.001, "millis": 0.001,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "min": 60.0, "m": 60.0, "h": 3600.0,
}  # fmt: skip


def parse_duration(key: str, value: object) -> float:
    """Seconds from ``"30 s"``, ``"500ms"``, ``"2 min"`` or a bare number of milliseconds."""
    if isinstance(value, bool):
        raise ConfigError(key, value, "expected a duration such as '30 s' or '500 ms'")
    if isinstance(value, int | float):
        return float(value) * 0.001
    match = _DURATION.match(str(value))
    if not match:
        raise ConfigError(key, value, "expected a duration such as '30 s' or '500 ms'")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def parse_int(key: str, value: object) -> int:
    if isinstance(value, bool):
        raise ConfigError(key, value, "expected an integer")
    try:
        return int(str(value).strip())
    except ValueError:
        raise ConfigError(key, value, "expected an integer") from None


def parse_bool(key: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"true", "yes", "1", "on"}:
        return True
    if text in {"false", "no", "0", "off"}:
        return False
    raise ConfigError(key, value, "expected true or false")


def parse_str(key: str, value: object) -> str:
    return str(value).strip()


_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")


def parse_quorum(key: str, value: object) -> str:
    """``host:port[,host:port…][/chroot]`` as ZooKeeper clients spell it."""
    text = str(value).strip()
    hosts, slash, chroot = text.partition("/")
    if not hosts:
        raise ConfigError(key, value, "expected host:port[,host:port...][/chroot]")
    for part in hosts.split(","):
        match = _HOST_PORT.match(part.strip())
        if not match:
            raise ConfigError(key, value, f"{part!r} is not host:port")
        if not 1 <= int(match.group(2)) <= 65535:
            raise ConfigError(key, value, f"port {match.group(2)} is outside 1..65535")
    if slash and (not chroot or chroot.endswith("/") or "//" in chroot):
        raise ConfigError(key, value, f"chroot '/{chroot}' is not a valid znode path")
    return text


_ZNODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def parse_znode_name(key: str, value: object) -> str:
    text = str(value).strip().strip("/")
    if not all(_ZNODE_NAME.match(part) for part in text.split("/")):
        raise ConfigError(key, value, "expected znode names of letters, digits, '.', '_', '-'")
    return text


def parse_ha_type(key: str, value: object) -> str:
    text = str(value).strip().lower()
    if text not in {"zookeeper", "none"}:
        raise ConfigError(key, value, "expected 'zookeeper' or 'none' (embedded, one process)")
    return text


def parse_port(key: str, value: object) -> int:
    port = parse_int(key, value)
    if not 0 <= port <= 65535:
        raise ConfigError(key, value, "expected a port in 0..65535 (0: any free port)")
    return port


def parse_dir(key: str, value: object) -> str:
    text = str(value).strip()
    if text and not (text.startswith("/") or "://" in text):
        raise ConfigError(key, value, "expected an absolute path or a file://, hdfs:// URI")
    return text


def parse_dir_list(key: str, value: object) -> str:
    """Comma-separated absolute paths or URIs (each as :func:`parse_dir` accepts)."""
    parts = [p.strip() for p in str(value).split(",") if p.strip()]
    for part in parts:
        if not (part.startswith("/") or "://" in part):
            raise ConfigError(key, value, f"{part!r} is not an absolute path or a URI")
    return ",".join(parts)


# --- sections -----------------------------------------------------------------------------


def setting(name: str, parser: Any, default: Any, help_: str) -> Any:
    """A section's field read from configuration key ``name`` by ``parser``."""
    return field(default=default, metadata={"key": name, "parser": parser, "help": help_})


def key_of(section: type, attr: str) -> str:
    """The configuration key of a section's field."""
    return {f.name: f.metadata["key"] for f in fields(section)}[attr]  # type: ignore[arg-type]


def fail(settings: object, attr: str, reason: str) -> None:
    """Refuse the value of ``attr`` in a section, naming its key."""
    meta = {f.name: f.metadata for f in fields(settings)}  # type: ignore[arg-type]
    raise ConfigError(meta[attr]["key"], getattr(settings, attr), reason)


def check_range(settings: object, attr: str, low: float, high: float) -> None:
    value = getattr(settings, attr)
    if not low <= value <= high:
        fail(settings, attr, f"must be between {low:g} and {high:g}")
