"""The settings of the service: its REST API and who may call it (service/api), and how
the leader watches drivers (service/)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sparkpoint.config.values import (
    check_range,
    fail,
    parse_bool,
    parse_duration,
    parse_port,
    parse_str,
    setting,
)


@dataclass(frozen=True, slots=True)
class RestSettings:
    bind_address: str = setting(
        "rest.bind-address", parse_str, "127.0.0.1",
        "Address the REST API listens on (0.0.0.0: every interface).",
    )  # fmt: skip
    port: int = setting(
        "rest.port", parse_port, 8081,
        "Port of the REST API (0: any free port).",
    )  # fmt: skip
    address: str = setting(
        "rest.address", parse_str, "",
        "Address published in leader/info for redirects, http://host:port (default: derived "
        "from the bind address, or the host name when binding every interface).",
    )  # fmt: skip

    def __post_init__(self) -> None:
        if not self.bind_address:
            fail(self, "bind_address", "must not be empty")
        if self.address and not re.match(r"^https?://[^/\s]+$", self.address):
            fail(self, "address", "expected http://host:port (no path)")


@dataclass(frozen=True, slots=True)
class ServiceSettings:
    heartbeat_timeout_s: float = setting(
        "heartbeat.timeout", parse_duration, 10.0,
        "A job whose driver sends no heartbeat for this long is disconnected (not triggered).",
    )  # fmt: skip
    tick_interval_s: float = setting(
        "sparkpoint.coordinator.tick-interval", parse_duration, 0.02,
        "How often the leader checks every job for due triggers and expiries.",
    )  # fmt: skip
    driver_takeover_timeout_s: float = setting(
        "driver.takeover-timeout", parse_duration, 3.0,
        "A job's driver run silent this long is ended; its standby driver is granted the run.",
    )  # fmt: skip
    driver_probe_after_s: float = setting(
        "driver.probe-after", parse_duration, 0.3,
        "A driver run with a standby, silent this long, is probed at its registered address: "
        "a refused connection (its process is gone) grants the standby at once. 0: off.",
    )  # fmt: skip

    def __post_init__(self) -> None:
        check_range(self, "heartbeat_timeout_s", 0.1, 3600.0)
        check_range(self, "tick_interval_s", 0.001, 10.0)
        check_range(self, "driver_takeover_timeout_s", 0.1, 3600.0)
        check_range(self, "driver_probe_after_s", 0.0, 3600.0)


@dataclass(frozen=True, slots=True)
class SecuritySettings:
    """Who may call the REST API and how it is encrypted (docs/security.md)."""

    auth_enabled: bool = setting(
        "rest.auth.enabled", parse_bool, True,
        "Require a bearer token on every call but the probes (off only for local use).",
    )  # fmt: skip
    token_file: str = setting(
        "rest.auth.token-file", parse_str, "",
        "File of accepted tokens, one '<role> <name> <token>' per line (docs/security.md).",
    )  # fmt: skip
    protect_metrics: bool = setting(
        "rest.auth.protect-metrics", parse_bool, False,
        "Require a token (any role) for /metrics too.",
    )  # fmt: skip
    ssl_enabled: bool = setting(
        "security.ssl.rest.enabled", parse_bool, False,
        "Serve the REST API over TLS (https).",
    )  # fmt: skip
    ssl_cert_file: str = setting(
        "security.ssl.rest.cert-file", parse_str, "",
        "PEM certificate (chain) of the REST server.",
    )  # fmt: skip
    ssl_key_file: str = setting(
        "security.ssl.rest.key-file", parse_str, "",
        "PEM private key of the REST server's certificate.",
    )  # fmt: skip
    ssl_ca_file: str = setting(
        "security.ssl.rest.ca-file", parse_str, "",
        "PEM CA(s) that client certificates must be signed by (with client-auth).",
    )  # fmt: skip
    ssl_client_auth: bool = setting(
        "security.ssl.rest.client-auth", parse_bool, False,
        "Require a client certificate signed by security.ssl.rest.ca-file.",
    )  # fmt: skip

    def __post_init__(self) -> None:
        if self.ssl_enabled and not (self.ssl_cert_file and self.ssl_key_file):
            fail(self, "ssl_enabled", "needs security.ssl.rest.cert-file and key-file")
        if self.ssl_client_auth and not (self.ssl_enabled and self.ssl_ca_file):
            fail(self, "ssl_client_auth", "needs TLS on and security.ssl.rest.ca-file")
