"""ZooKeeper over TLS with SASL (DIGEST-MD5) and creator-only ACLs, against a real server
started with a secure client port and a JAAS login file; certificates made at run time.

A real coordinator replica process writes the cluster's znodes as its identity; another
identity, and an anonymous client, are then refused every change there.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from kazoo.exceptions import NoAuthError

from sparkpoint.config import ZooKeeperSettings
from sparkpoint.ha import NotConnectedError, ZooKeeperConnection
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper, ServerTLS
from tests.service.support import spawn_replica, wait_leader
from tests.support.certs import CertificateAuthority
from tests.support.zk import settings_for

USERS = {"coordinators": "coordinators-secret", "intruder": "intruder-secret"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("zk-pki")
    ours, theirs = CertificateAuthority(root, "zk-ca"), CertificateAuthority(root, "other-ca")
    return {
        "ca": ours,
        "other_ca": theirs,
        "server": ours.issue("zookeeper"),
        "client": ours.issue("coordinator", client=True),
    }


@pytest.fixture(scope="module")
def secure_zk(tmp_path_factory: pytest.TempPathFactory, pki: dict) -> Iterator[LocalZooKeeper]:
    tls = ServerTLS(keystore=pki["server"].combined, truststore=pki["ca"].cert)
    server = LocalZooKeeper(
        tmp_path_factory.mktemp("secure-zk"), tick_time_ms=200, tls=tls, sasl_users=USERS
    )
    server.start()
    yield server
    server.stop()


def _tls(pki: dict, ca: str = "ca") -> dict[str, object]:
    return {
        "ssl_enabled": True,
        "ssl_ca_file": str(pki[ca].cert),
        "ssl_cert_file": str(pki["client"].cert),
        "ssl_key_file": str(pki["client"].key),
    }


# kazoo 2.11 drops the socket of a failed TLS handshake without closing it; only that
# report (an unclosed SSL socket) is ignored, in this test alone.
@pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <ssl.SSLSocket:pytest.PytestUnraisableExceptionWarning"
)
def test_a_tls_client_works_and_refuses_a_server_certificate_from_another_ca(
    secure_zk: LocalZooKeeper, pki: dict
) -> None:
    settings = settings_for(secure_zk.secure_connect_string, **_tls(pki))
    with ZooKeeperConnection(settings) as conn:
        conn.client.ensure_path(f"{settings.base_path}/probe")
        assert conn.client.exists(f"{settings.base_path}/probe")
    distrustful = replace(
        settings_for(secure_zk.secure_connect_string, **_tls(pki, "other_ca")),
        connection_timeout_s=2.0,
    )
    refused = ""
    with _kazoo_messages() as messages:
        try:
            ZooKeeperConnection(distrustful).start()
        except NotConnectedError as exc:  # not kept: its traceback holds the socket
            refused = str(exc)
    assert refused, "a client trusting another CA connected"
    assert any("CERTIFICATE_VERIFY_FAILED" in m for m in messages), messages


@contextmanager
def _kazoo_messages() -> Iterator[list[str]]:
    """kazoo's log lines as text only: a kept record would keep the failed socket alive
    through its exception's traceback."""
    messages: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    logger = logging.getLogger("kazoo.client")
    handler, propagate = Keep(), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def test_only_the_coordinators_identity_can_change_the_clusters_znodes(
    secure_zk: LocalZooKeeper, pki: dict, tmp_path: Path
) -> None:
    cluster_id = f"secure-{uuid.uuid4().hex[:8]}"
    tls = _tls(pki)
    replica = spawn_replica(
        tmp_path / "replicas",
        "r1",
        quorum=secure_zk.secure_connect_string,
        cluster_id=cluster_id,
        checkpoints_dir=tmp_path / "checkpoints",
        settings={
            "high-availability.zookeeper.client.sasl-auth": "coordinators:coordinators-secret",
            "high-availability.zookeeper.client.acl": "creator",
            "high-availability.zookeeper.client.ssl.enabled": "true",
            "high-availability.zookeeper.client.ssl.ca-file": str(tls["ssl_ca_file"]),
            "high-availability.zookeeper.client.ssl.cert-file": str(tls["ssl_cert_file"]),
            "high-availability.zookeeper.client.ssl.key-file": str(tls["ssl_key_file"]),
        },
    )
    try:
        wait_leader([replica])  # it wrote leader/epoch and leader/info as its identity
        base = ZooKeeperSettings(quorum=secure_zk.connect_string, cluster_id=cluster_id)
        intruder = ZooKeeperSettings(
            quorum=secure_zk.connect_string,
            cluster_id=cluster_id,
            sasl_auth="intruder:intruder-secret",
        )
        for who in (intruder, base):  # another identity, and nobody at all
            with ZooKeeperConnection(who) as conn:
                zk, paths = conn.client, conn.paths
                attempts = [
                    (zk.set, paths.epoch, b"999"),
                    (zk.delete, paths.leader_info),
                    (zk.create, f"{paths.base}/planted", b"x"),
                    (zk.create, f"{paths.leader}/planted", b"x"),
                    (zk.get, paths.leader_info),
                ]
                for call, *args in attempts:
                    with pytest.raises(NoAuthError):
                        call(*args)
        owner = ZooKeeperSettings(
            quorum=secure_zk.connect_string,
            cluster_id=cluster_id,
            sasl_auth="coordinators:coordinators-secret",
        )
        with ZooKeeperConnection(owner) as conn:  # the same identity may, as a control
            data, _ = conn.client.get(conn.paths.leader_info)
            assert b"r1" in data
        assert replica.state() == "leader", replica.log()
    finally:
        replica.kill()
