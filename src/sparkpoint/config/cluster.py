"""The settings of the cluster's coordination: ZooKeeper (ha/connection.py) and the
election among replicas (ha/election.py)."""

from __future__ import annotations

from dataclasses import dataclass

from sparkpoint.config.values import (
    check_range,
    fail,
    parse_bool,
    parse_duration,
    parse_ha_type,
    parse_int,
    parse_quorum,
    parse_str,
    parse_znode_name,
    setting,
)

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
    quorum: str = setting(
        "high-availability.zookeeper.quorum", parse_quorum, "127.0.0.1:2181",
        "ZooKeeper connect string, host:port[,host:port...][/chroot].",
    )  # fmt: skip
    root: str = setting(
        "high-availability.zookeeper.path.root", parse_znode_name, "sparkpoint",
        "Root znode under which every cluster keeps its data.",
    )  # fmt: skip
    cluster_id: str = setting(
        "high-availability.cluster-id", parse_znode_name, "default",
        "Cluster id: coordinators with the same root and id form one cluster.",
    )  # fmt: skip
    session_timeout_s: float = setting(
        "high-availability.zookeeper.client.session-timeout", parse_duration, 30.0,
        "ZooKeeper session timeout (1 s .. 10 min).",
    )  # fmt: skip
    connection_timeout_s: float = setting(
        "high-availability.zookeeper.client.connection-timeout", parse_duration, 15.0,
        "How long to wait for the first connection.",
    )  # fmt: skip
    retry_wait_s: float = setting(
        "high-availability.zookeeper.client.retry-wait", parse_duration, 0.1,
        "First back-off between retries of an idempotent ZooKeeper call.",
    )  # fmt: skip
    max_retry_attempts: int = setting(
        "high-availability.zookeeper.client.max-retry-attempts", parse_int, 5,
        "Retries of an idempotent ZooKeeper call before giving up.",
    )  # fmt: skip
    acl: str = setting(
        "high-availability.zookeeper.client.acl", parse_str, "open",
        "'open' (world-readable znodes) or 'creator' (only the authenticated creator).",
    )  # fmt: skip
    digest_auth: str = setting(
        "high-availability.zookeeper.client.digest-auth", parse_str, "",
        "Digest credentials user:password (use a Secret; empty for none).",
    )  # fmt: skip

    sasl_auth: str = setting(
        "high-availability.zookeeper.client.sasl-auth", parse_str, "",
        "SASL DIGEST-MD5 credentials user:password (use a Secret; empty for none); with "
        "acl 'creator' only this identity may change the cluster's znodes.",
    )  # fmt: skip
    ssl_enabled: bool = setting(
        "high-availability.zookeeper.client.ssl.enabled", parse_bool, False,
        "Connect to ZooKeeper's secure client port over TLS (verifying the server).",
    )  # fmt: skip
    ssl_ca_file: str = setting(
        "high-availability.zookeeper.client.ssl.ca-file", parse_str, "",
        "PEM file of the CA(s) that signed the ZooKeeper servers' certificates.",
    )  # fmt: skip
    ssl_cert_file: str = setting(
        "high-availability.zookeeper.client.ssl.cert-file", parse_str, "",
        "PEM client certificate presented to ZooKeeper (empty: none).",
    )  # fmt: skip
    ssl_key_file: str = setting(
        "high-availability.zookeeper.client.ssl.key-file", parse_str, "",
        "PEM private key of the client certificate.",
    )  # fmt: skip

    lease_renew_interval_s: float = setting(
        "high-availability.lease.renew-interval", parse_duration, 0.5,
        "How often the leader renews its lease (a fenced write of leader/info).",
    )  # fmt: skip
    takeover_timeout_s: float = setting(
        "high-availability.lease.takeover-timeout", parse_duration, 2.0,
        "A follower that sees no lease renewal for this long takes over; 0 disables "
        "leases (failover then waits for the leader's session to expire).",
    )  # fmt: skip

    def __post_init__(self) -> None:
        check_range(self, "session_timeout_s", 1.0, 600.0)
        check_range(self, "lease_renew_interval_s", 0.05, 60.0)
        if self.takeover_timeout_s:
            problem = lease_timing_problem(self.takeover_timeout_s, self.lease_renew_interval_s)
            if problem:
                fail(self, "takeover_timeout_s", problem)
            if self.takeover_timeout_s >= self.session_timeout_s:
                fail(self, "takeover_timeout_s", "must be below the session timeout "
                      f"({self.session_timeout_s:g} s)")  # fmt: skip
        check_range(self, "connection_timeout_s", 0.1, 600.0)
        check_range(self, "retry_wait_s", 0.0, 60.0)
        check_range(self, "max_retry_attempts", 0, 100)
        if self.acl not in {"open", "creator"}:
            fail(self, "acl", "expected 'open' or 'creator'")
        if self.acl == "creator" and not (self.digest_auth or self.sasl_auth):
            fail(self, "acl", "'creator' needs digest-auth or sasl-auth credentials")
        if self.digest_auth and ":" not in self.digest_auth:
            fail(self, "digest_auth", "expected user:password")
        if self.sasl_auth and ":" not in self.sasl_auth:
            fail(self, "sasl_auth", "expected user:password")
        if self.ssl_enabled and not self.ssl_ca_file:
            fail(self, "ssl_enabled", "TLS needs ssl.ca-file to verify the servers")
        if bool(self.ssl_cert_file) != bool(self.ssl_key_file):
            fail(self, "ssl_cert_file", "a client certificate needs both cert-file and key-file")

    @property
    def base_path(self) -> str:
        return f"/{self.root}/{self.cluster_id}"


@dataclass(frozen=True, slots=True)
class HASettings:
    type: str = setting(
        "high-availability.type", parse_ha_type, "zookeeper",
        "'zookeeper' (replicas elect a leader) or 'none' (embedded: one process, in memory).",
    )  # fmt: skip
    instance_id: str = setting(
        "high-availability.instance-id", parse_str, "",
        "Name of this replica in leader/info (default: host name and process id).",
    )  # fmt: skip
