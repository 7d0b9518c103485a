"""The generic loader: YAML file < `SPARKPOINT_…` environment < overrides, into sections.

Knows no product key: the sections (dataclasses of :func:`~sparkpoint.config.values.setting`
fields) say which keys exist and how each is parsed and checked.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

import yaml

from sparkpoint.config.values import ConfigError

ENV_PREFIX = "SPARKPOINT_"


def keys_of(sections: Mapping[str, type]) -> dict[str, str]:
    """Every configuration key of ``sections`` with its help text."""
    return {
        f.metadata["key"]: f.metadata["help"]
        for section in sections.values()
        for f in fields(section)  # type: ignore[arg-type]
    }


def env_name(key: str) -> str:
    """``high-availability.cluster-id`` → ``SPARKPOINT_HIGH_AVAILABILITY_CLUSTER_ID``."""
    return ENV_PREFIX + re.sub(r"[.-]", "_", key).upper()


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for name, value in data.items():
        key = f"{prefix}{name}"
        if isinstance(value, Mapping):
            flat.update(_flatten(value, key + "."))
        else:
            flat[key] = value
    return flat


#: Names the configuration file when no path is given (as --config does).
CONFIG_ENV = "SPARKPOINT_CONFIG"
#: Read, the first that exists, when neither a path nor SPARKPOINT_CONFIG names a file:
#: the user's, then the machine's (where the Helm chart mounts its ConfigMap).
SYSTEM_CONFIG = Path("/etc/sparkpoint/sparkpoint.yaml")


def config_file_location(environ: Mapping[str, str]) -> Path | None:
    """The configuration file to read when none is given: ``SPARKPOINT_CONFIG`` (which
    must exist), else ``$XDG_CONFIG_HOME/sparkpoint/sparkpoint.yaml`` (default
    ``~/.config``), else ``/etc/sparkpoint/sparkpoint.yaml``, else none."""
    named = environ.get(CONFIG_ENV)
    if named:
        if not Path(named).is_file():
            raise ConfigError(CONFIG_ENV, named, "names no file")
        return Path(named)
    candidates = []
    config_home = environ.get("XDG_CONFIG_HOME") or (
        str(Path(environ["HOME"]) / ".config") if environ.get("HOME") else ""
    )
    if config_home:
        candidates.append(Path(config_home) / "sparkpoint" / "sparkpoint.yaml")
    candidates.append(SYSTEM_CONFIG)
    return next((c for c in candidates if c.is_file()), None)


def load_sections(
    sections: Mapping[str, type],
    path: str | Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Merge file, environment and overrides (in rising precedence) and build each section
    (which checks its values). With no ``path``, the file :func:`config_file_location`
    finds (if any)."""
    raw: dict[str, Any] = {}
    environ = os.environ if environ is None else environ
    if path is None:
        path = config_file_location(environ)
    if path is not None:
        try:
            loaded = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError("config-file", str(path), f"cannot be read: {exc}") from exc
        if not isinstance(loaded, Mapping):
            raise ConfigError("config-file", str(path), "is not a mapping of keys to values")
        raw.update(_flatten(loaded))
    known = keys_of(sections)
    for key in known:
        if env_name(key) in environ:
            raw[key] = environ[env_name(key)]
    raw.update({k: v for k, v in (overrides or {}).items() if v is not None})
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise ConfigError(unknown[0], raw[unknown[0]], "unknown configuration key")

    built: dict[str, Any] = {}
    for name, section in sections.items():
        values: dict[str, Any] = {}
        for f in fields(section):  # type: ignore[arg-type]
            if f.metadata["key"] in raw:
                values[f.name] = f.metadata["parser"](f.metadata["key"], raw[f.metadata["key"]])
        try:
            built[name] = section(**values)
        except ConfigError as exc:
            # Report the value as the user wrote it ("0.5 s"), not as parsed (0.5).
            raise ConfigError(exc.key, raw.get(exc.key, exc.value), exc.reason) from None
    return built
