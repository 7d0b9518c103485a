"""One typed configuration: YAML file < `SPARKPOINT_…` environment < command-line flags.

Key names follow Flink's where the concept is the same (docs/architecture.md §9). Every value
is checked at start-up; a bad one raises :class:`ConfigError` naming the key, the value
and why it is refused. Durations accept Flink's spelling (``500 ms``, ``30 s``, ``2 min``)
or a bare number of milliseconds.

>>> cfg = load_config(overrides={"high-availability.zookeeper.quorum": "zk1:2181,zk2:2181"})
>>> cfg.zookeeper.quorum, cfg.zookeeper.session_timeout_s
('zk1:2181,zk2:2181', 30.0)
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

ENV_PREFIX = "SPARKPOINT_"


class ConfigError(ValueError):
    """An invalid configuration value: names the key, the value and the reason."""

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


# --- the configuration --------------------------------------------------------------------


def _key(name: str, parser: Any, default: Any, help_: str) -> Any:
    return field(default=default, metadata={"key": name, "parser": parser, "help": help_})


#: A takeover timeout spans at least this many renewal intervals, so one or two lost
#: renewals never cost a failover.
LEASE_MIN_RENEWALS = 3


def lease_timing_problem(takeover_timeout_s: float, renew_interval_s: float) -> str | None:
    """The one rule tying a lease's takeover timeout to its renewal interval (the
    configuration and the election both apply it); None when it holds."""
    if takeover_timeout_s < LEASE_MIN_RENEWALS * renew_interval_s:
        return (
            f"must be at least {LEASE_MIN_RENEWALS} lease renewal intervals "
            f"({LEASE_MIN_RENEWALS * renew_interval_s:g} s)"
        )
    return None


@dataclass(frozen=True, slots=True)
class ZooKeeperSettings:
    quorum: str = _key(
        "high-availability.zookeeper.quorum", parse_quorum, "127.0.0.1:2181",
        "ZooKeeper connect string, host:port[,host:port...][/chroot].",
    )  # fmt: skip
    root: str = _key(
        "high-availability.zookeeper.path.root", parse_znode_name, "sparkpoint",
        "Root znode under which every cluster keeps its data.",
    )  # fmt: skip
    cluster_id: str = _key(
        "high-availability.cluster-id", parse_znode_name, "default",
        "Cluster id: coordinators with the same root and id form one cluster.",
    )  # fmt: skip
    session_timeout_s: float = _key(
        "high-availability.zookeeper.client.session-timeout", parse_duration, 30.0,
        "ZooKeeper session timeout (1 s .. 10 min).",
    )  # fmt: skip
    connection_timeout_s: float = _key(
        "high-availability.zookeeper.client.connection-timeout", parse_duration, 15.0,
        "How long to wait for the first connection.",
    )  # fmt: skip
    retry_wait_s: float = _key(
        "high-availability.zookeeper.client.retry-wait", parse_duration, 0.1,
        "First back-off between retries of an idempotent ZooKeeper call.",
    )  # fmt: skip
    max_retry_attempts: int = _key(
        "high-availability.zookeeper.client.max-retry-attempts", parse_int, 5,
        "Retries of an idempotent ZooKeeper call before giving up.",
    )  # fmt: skip
    acl: str = _key(
        "high-availability.zookeeper.client.acl", parse_str, "open",
        "'open' (world-readable znodes) or 'creator' (only the authenticated creator).",
    )  # fmt: skip
    digest_auth: str = _key(
        "high-availability.zookeeper.client.digest-auth", parse_str, "",
        "Digest credentials user:password (use a Secret; empty for none).",
    )  # fmt: skip

    sasl_auth: str = _key(
        "high-availability.zookeeper.client.sasl-auth", parse_str, "",
        "SASL DIGEST-MD5 credentials user:password (use a Secret; empty for none); with "
        "acl 'creator' only this identity may change the cluster's znodes.",
    )  # fmt: skip
    ssl_enabled: bool = _key(
        "high-availability.zookeeper.client.ssl.enabled", parse_bool, False,
        "Connect to ZooKeeper's secure client port over TLS (verifying the server).",
    )  # fmt: skip
    ssl_ca_file: str = _key(
        "high-availability.zookeeper.client.ssl.ca-file", parse_str, "",
        "PEM file of the CA(s) that signed the ZooKeeper servers' certificates.",
    )  # fmt: skip
    ssl_cert_file: str = _key(
        "high-availability.zookeeper.client.ssl.cert-file", parse_str, "",
        "PEM client certificate presented to ZooKeeper (empty: none).",
    )  # fmt: skip
    ssl_key_file: str = _key(
        "high-availability.zookeeper.client.ssl.key-file", parse_str, "",
        "PEM private key of the client certificate.",
    )  # fmt: skip

    lease_renew_interval_s: float = _key(
        "high-availability.lease.renew-interval", parse_duration, 0.5,
        "How often the leader renews its lease (a fenced write of leader/info).",
    )  # fmt: skip
    takeover_timeout_s: float = _key(
        "high-availability.lease.takeover-timeout", parse_duration, 2.0,
        "A follower that sees no lease renewal for this long takes over; 0 disables "
        "leases (failover then waits for the leader's session to expire).",
    )  # fmt: skip

    def __post_init__(self) -> None:
        _check_range(self, "session_timeout_s", 1.0, 600.0)
        _check_range(self, "lease_renew_interval_s", 0.05, 60.0)
        if self.takeover_timeout_s:
            problem = lease_timing_problem(self.takeover_timeout_s, self.lease_renew_interval_s)
            if problem:
                _fail(self, "takeover_timeout_s", problem)
            if self.takeover_timeout_s >= self.session_timeout_s:
                _fail(self, "takeover_timeout_s", "must be below the session timeout "
                      f"({self.session_timeout_s:g} s)")  # fmt: skip
        _check_range(self, "connection_timeout_s", 0.1, 600.0)
        _check_range(self, "retry_wait_s", 0.0, 60.0)
        _check_range(self, "max_retry_attempts", 0, 100)
        if self.acl not in {"open", "creator"}:
            _fail(self, "acl", "expected 'open' or 'creator'")
        if self.acl == "creator" and not (self.digest_auth or self.sasl_auth):
            _fail(self, "acl", "'creator' needs digest-auth or sasl-auth credentials")
        if self.digest_auth and ":" not in self.digest_auth:
            _fail(self, "digest_auth", "expected user:password")
        if self.sasl_auth and ":" not in self.sasl_auth:
            _fail(self, "sasl_auth", "expected user:password")
        if self.ssl_enabled and not self.ssl_ca_file:
            _fail(self, "ssl_enabled", "TLS needs ssl.ca-file to verify the servers")
        if bool(self.ssl_cert_file) != bool(self.ssl_key_file):
            _fail(self, "ssl_cert_file", "a client certificate needs both cert-file and key-file")

    @property
    def base_path(self) -> str:
        return f"/{self.root}/{self.cluster_id}"


@dataclass(frozen=True, slots=True)
class StoreSettings:
    max_retained: int = _key(
        "state.checkpoints.num-retained", parse_int, 1,
        "Completed checkpoints retained per job (>= 1).",
    )  # fmt: skip
    orphan_grace_s: float = _key(
        "state.checkpoints.orphan-cleanup.grace-period", parse_duration, 600.0,
        "A chk-<id> directory that is neither retained nor pending is deleted by the leader "
        "once nothing in it changed for this long (0.1 s .. 30 days).",
    )  # fmt: skip
    orphan_scan_interval_s: float = _key(
        "state.checkpoints.orphan-cleanup.interval", parse_duration, 60.0,
        "How often the leader looks for orphaned checkpoint directories (0.1 s .. 1 h).",
    )  # fmt: skip
    cleanup_delay_s: float = _key(
        "state.checkpoints.cleanup.delay", parse_duration, 0.0,
        "Each background deletion waits this long before it runs (0 .. 60 s): 0 in "
        "production; drills set it to act as a slow storage (a slow HDFS).",
    )  # fmt: skip

    def __post_init__(self) -> None:
        _check_range(self, "max_retained", 1, 10_000)
        _check_range(self, "cleanup_delay_s", 0.0, 60.0)
        _check_range(self, "orphan_grace_s", 0.1, 30 * 86400.0)
        _check_range(self, "orphan_scan_interval_s", 0.1, 3600.0)


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


@dataclass(frozen=True, slots=True)
class HASettings:
    type: str = _key(
        "high-availability.type", parse_ha_type, "zookeeper",
        "'zookeeper' (replicas elect a leader) or 'none' (embedded: one process, in memory).",
    )  # fmt: skip
    instance_id: str = _key(
        "high-availability.instance-id", parse_str, "",
        "Name of this replica in leader/info (default: host name and process id).",
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class RestSettings:
    bind_address: str = _key(
        "rest.bind-address", parse_str, "127.0.0.1",
        "Address the REST API listens on (0.0.0.0: every interface).",
    )  # fmt: skip
    port: int = _key(
        "rest.port", parse_port, 8081,
        "Port of the REST API (0: any free port).",
    )  # fmt: skip
    address: str = _key(
        "rest.address", parse_str, "",
        "Address published in leader/info for redirects, http://host:port (default: derived "
        "from the bind address, or the host name when binding every interface).",
    )  # fmt: skip

    def __post_init__(self) -> None:
        if not self.bind_address:
            _fail(self, "bind_address", "must not be empty")
        if self.address and not re.match(r"^https?://[^/\s]+$", self.address):
            _fail(self, "address", "expected http://host:port (no path)")


@dataclass(frozen=True, slots=True)
class StorageSettings:
    checkpoints_dir: str = _key(
        "state.checkpoints.dir", parse_dir, "/tmp/sparkpoint/checkpoints",
        "Where checkpoints are written: a local path, file://, hdfs:// or webhdfs:// URI.",
    )  # fmt: skip
    savepoints_dir: str = _key(
        "state.savepoints.dir", parse_dir, "",
        "Default target of savepoints (empty: every savepoint must name its directory).",
    )  # fmt: skip

    savepoints_allowed_dirs: str = _key(
        "state.savepoints.allowed-dirs", parse_dir_list, "",
        "Comma-separated roots a savepoint's target_dir must lie under (empty: only "
        "state.savepoints.dir).",
    )  # fmt: skip

    def __post_init__(self) -> None:
        if not self.checkpoints_dir:
            _fail(self, "checkpoints_dir", "must not be empty")

    @property
    def savepoint_roots(self) -> tuple[str, ...]:
        """Where savepoints may be written: the allowed dirs, else the savepoint dir."""
        if self.savepoints_allowed_dirs:
            return tuple(d.strip() for d in self.savepoints_allowed_dirs.split(","))
        return (self.savepoints_dir,) if self.savepoints_dir else ()


@dataclass(frozen=True, slots=True)
class CheckpointingSettings:
    """Defaults for jobs that do not set their own checkpointing options."""

    interval_s: float = _key(
        "execution.checkpointing.interval", parse_duration, 10.0,
        "Default time between periodic checkpoints of a job.",
    )  # fmt: skip
    timeout_s: float = _key(
        "execution.checkpointing.timeout", parse_duration, 600.0,
        "Default time after which a checkpoint still collecting acknowledgements expires.",
    )  # fmt: skip
    min_pause_s: float = _key(
        "execution.checkpointing.min-pause", parse_duration, 0.0,
        "Default minimum time between the end of one checkpoint and the next trigger.",
    )  # fmt: skip
    max_concurrent: int = _key(
        "execution.checkpointing.max-concurrent-checkpoints", parse_int, 1,
        "Default maximum of periodic checkpoints in progress at once.",
    )  # fmt: skip
    tolerable_failures: int = _key(
        "execution.checkpointing.tolerable-failed-checkpoints", parse_int, 0,
        "Default consecutive checkpoint failures tolerated before a job is marked failing.",
    )  # fmt: skip

    def __post_init__(self) -> None:
        _check_range(self, "interval_s", 0.01, 365 * 86400.0)
        _check_range(self, "timeout_s", 0.01, 365 * 86400.0)
        _check_range(self, "min_pause_s", 0.0, 365 * 86400.0)
        _check_range(self, "max_concurrent", 1, 1000)
        _check_range(self, "tolerable_failures", 0, 1_000_000)

    def option_defaults(self) -> dict[str, int]:
        """As ``CheckpointingOptions`` field names (milliseconds)."""
        return {
            "interval_ms": round(self.interval_s * 1000),
            "timeout_ms": round(self.timeout_s * 1000),
            "min_pause_ms": round(self.min_pause_s * 1000),
            "max_concurrent": self.max_concurrent,
            "tolerable_failures": self.tolerable_failures,
        }


@dataclass(frozen=True, slots=True)
class ServiceSettings:
    heartbeat_timeout_s: float = _key(
        "heartbeat.timeout", parse_duration, 10.0,
        "A job whose driver sends no heartbeat for this long is disconnected (not triggered).",
    )  # fmt: skip
    tick_interval_s: float = _key(
        "sparkpoint.coordinator.tick-interval", parse_duration, 0.02,
        "How often the leader checks every job for due triggers and expiries.",
    )  # fmt: skip
    driver_takeover_timeout_s: float = _key(
        "driver.takeover-timeout", parse_duration, 3.0,
        "A job's driver run silent this long is ended; its standby driver is granted the run.",
    )  # fmt: skip
    driver_probe_after_s: float = _key(
        "driver.probe-after", parse_duration, 0.3,
        "A driver run with a standby, silent this long, is probed at its registered address: "
        "a refused connection (its process is gone) grants the standby at once. 0: off.",
    )  # fmt: skip

    def __post_init__(self) -> None:
        _check_range(self, "heartbeat_timeout_s", 0.1, 3600.0)
        _check_range(self, "tick_interval_s", 0.001, 10.0)
        _check_range(self, "driver_takeover_timeout_s", 0.1, 3600.0)
        _check_range(self, "driver_probe_after_s", 0.0, 3600.0)


@dataclass(frozen=True, slots=True)
class SecuritySettings:
    """Who may call the REST API and how it is encrypted (docs/security.md)."""

    auth_enabled: bool = _key(
        "rest.auth.enabled", parse_bool, True,
        "Require a bearer token on every call but the probes (off only for local use).",
    )  # fmt: skip
    token_file: str = _key(
        "rest.auth.token-file", parse_str, "",
        "File of accepted tokens, one '<role> <name> <token>' per line (docs/security.md).",
    )  # fmt: skip
    protect_metrics: bool = _key(
        "rest.auth.protect-metrics", parse_bool, False,
        "Require a token (any role) for /metrics too.",
    )  # fmt: skip
    ssl_enabled: bool = _key(
        "security.ssl.rest.enabled", parse_bool, False,
        "Serve the REST API over TLS (https).",
    )  # fmt: skip
    ssl_cert_file: str = _key(
        "security.ssl.rest.cert-file", parse_str, "",
        "PEM certificate (chain) of the REST server.",
    )  # fmt: skip
    ssl_key_file: str = _key(
        "security.ssl.rest.key-file", parse_str, "",
        "PEM private key of the REST server's certificate.",
    )  # fmt: skip
    ssl_ca_file: str = _key(
        "security.ssl.rest.ca-file", parse_str, "",
        "PEM CA(s) that client certificates must be signed by (with client-auth).",
    )  # fmt: skip
    ssl_client_auth: bool = _key(
        "security.ssl.rest.client-auth", parse_bool, False,
        "Require a client certificate signed by security.ssl.rest.ca-file.",
    )  # fmt: skip

    def __post_init__(self) -> None:
        if self.ssl_enabled and not (self.ssl_cert_file and self.ssl_key_file):
            _fail(self, "ssl_enabled", "needs security.ssl.rest.cert-file and key-file")
        if self.ssl_client_auth and not (self.ssl_enabled and self.ssl_ca_file):
            _fail(self, "ssl_client_auth", "needs TLS on and security.ssl.rest.ca-file")


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


def _fail(settings: object, attr: str, reason: str) -> None:
    meta = {f.name: f.metadata for f in fields(settings)}  # type: ignore[arg-type]
    raise ConfigError(meta[attr]["key"], getattr(settings, attr), reason)


def _check_range(settings: object, attr: str, low: float, high: float) -> None:
    value = getattr(settings, attr)
    if not low <= value <= high:
        _fail(settings, attr, f"must be between {low:g} and {high:g}")


def all_keys() -> dict[str, str]:
    """Every configuration key with its help text (for --help and docs)."""
    return {
        f.metadata["key"]: f.metadata["help"]
        for section in _SECTIONS.values()
        for f in fields(section)
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


def load_config(
    path: str | Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Merge file, environment and overrides (in rising precedence) and validate. With no
    ``path``, the file :func:`config_file_location` finds (if any)."""
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
    known = all_keys()
    for key in known:
        if env_name(key) in environ:
            raw[key] = environ[env_name(key)]
    raw.update({k: v for k, v in (overrides or {}).items() if v is not None})
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise ConfigError(unknown[0], raw[unknown[0]], "unknown configuration key")

    sections: dict[str, Any] = {}
    for name, section in _SECTIONS.items():
        values: dict[str, Any] = {}
        for f in fields(section):
            if f.metadata["key"] in raw:
                values[f.name] = f.metadata["parser"](f.metadata["key"], raw[f.metadata["key"]])
        try:
            sections[name] = section(**values)
        except ConfigError as exc:
            # Report the value as the user wrote it ("0.5 s"), not as parsed (0.5).
            raise ConfigError(exc.key, raw.get(exc.key, exc.value), exc.reason) from None
    return Config(**sections)
