"""Invalid configuration is refused at start with the key, the value and the reason."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sparkpoint.config import ConfigError, env_name, load_config
from sparkpoint.ha import ZooKeeperLeaderElection


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("high-availability.zookeeper.quorum", "zk1", "is not host:port"),
        ("high-availability.zookeeper.quorum", "zk1:99999", "outside 1..65535"),
        ("high-availability.zookeeper.quorum", "zk1:2181/", "chroot"),
        ("high-availability.zookeeper.client.session-timeout", "0.5 s", "between 1 and 600"),
        ("high-availability.zookeeper.client.session-timeout", "2 fortnights", "duration"),
        ("high-availability.zookeeper.client.session-timeout", "3 h", "between 1 and 600"),
        ("state.checkpoints.num-retained", "0", "between 1 and 10000"),
        ("state.checkpoints.num-retained", "many", "expected an integer"),
        ("high-availability.zookeeper.client.acl", "creator", "digest-auth"),
        ("high-availability.cluster-id", "a b", "znode names"),
        ("no.such.key", "1", "unknown configuration key"),
        ("high-availability.zookeeper.client.ssl.enabled", "true", "ssl.ca-file"),
        ("high-availability.zookeeper.client.sasl-auth", "nocolon", "user:password"),
        ("state.savepoints.allowed-dirs", "/ok,relative", "not an absolute path"),
        ("security.ssl.rest.enabled", "true", "cert-file and key-file"),
        ("security.ssl.rest.client-auth", "true", "ca-file"),
        ("rest.auth.enabled", "maybe", "true or false"),
    ],
)
def test_invalid_values_name_key_value_and_reason(key: str, value: str, reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(overrides={key: value}, environ={})
    message = str(caught.value)
    assert key in message
    assert repr(value) in message
    assert reason in message


def test_precedence_file_then_environment_then_flags(tmp_path: Path) -> None:
    config_file = tmp_path / "sparkpoint.yaml"
    config_file.write_text(
        "high-availability:\n"
        "  zookeeper.quorum: file-zk:2181\n"
        "  cluster-id: from-file\n"
        "state.checkpoints.num-retained: 3\n"
    )
    environ = {env_name("high-availability.cluster-id"): "from-env"}
    config = load_config(
        config_file,
        environ=environ,
        overrides={"state.checkpoints.num-retained": "5"},
    )
    assert config.zookeeper.quorum == "file-zk:2181"
    assert config.zookeeper.cluster_id == "from-env"
    assert config.store.max_retained == 5
    assert env_name("high-availability.cluster-id") == "SPARKPOINT_HIGH_AVAILABILITY_CLUSTER_ID"


def test_durations_in_flink_spelling() -> None:
    key = "high-availability.zookeeper.client.session-timeout"
    for text, seconds in [("500 ms", None), ("45 s", 45.0), ("2 min", 120.0), (60000, 60.0)]:
        if seconds is None:
            with pytest.raises(ConfigError):
                load_config(overrides={key: text}, environ={})
        else:
            assert (
                load_config(overrides={key: text}, environ={}).zookeeper.session_timeout_s
                == seconds
            )


def test_unreadable_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot be read"):
        load_config(tmp_path / "missing.yaml", environ={})
    bad = tmp_path / "list.yaml"
    bad.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="not a mapping"):
        load_config(bad, environ={})


def test_one_lease_timing_rule_for_configuration_and_election(zk_conn) -> None:
    renew = "high-availability.lease.renew-interval"
    takeover = "high-availability.lease.takeover-timeout"
    rule = "must be at least 3 lease renewal intervals (1.5 s)"
    with pytest.raises(ConfigError, match=re.escape(rule)):
        load_config(overrides={renew: "500 ms", takeover: "1 s"}, environ={})
    with pytest.raises(ValueError, match=re.escape(rule)):
        ZooKeeperLeaderElection(
            zk_conn, instance_id="c", renew_interval_s=0.5, takeover_timeout_s=1.0
        )
    config = load_config(overrides={renew: "500 ms", takeover: "1500 ms"}, environ={})
    assert config.zookeeper.takeover_timeout_s == 1.5
    election = ZooKeeperLeaderElection(
        zk_conn, instance_id="c", renew_interval_s=0.5, takeover_timeout_s=1.5
    )
    assert election.takeover_timeout_s == 1.5
