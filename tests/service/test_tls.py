"""The REST API over TLS, with client certificates required: a real server, real
handshakes, certificates made at run time by two unrelated authorities."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkpoint.client import CoordinatorClient, Credentials, Unavailable
from sparkpoint.config import load_config
from sparkpoint.service import Service, start_service
from tests.support.certs import CertificateAuthority, Issued
from tests.support.waiting import wait_until

TOKEN = "read-token-0123456789abcdef"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("pki")
    ours, theirs = CertificateAuthority(root, "ours"), CertificateAuthority(root, "theirs")
    return {
        "ca": ours,
        "other_ca": theirs,
        "server": ours.issue("coordinator"),
        "client": ours.issue("driver", client=True),
        "foreign_client": theirs.issue("driver", client=True),
    }


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, pki: dict) -> Iterator[Service]:
    root: Path = tmp_path_factory.mktemp("tls")
    (root / "tokens").write_text(f"read reader {TOKEN}\n")
    server: Issued = pki["server"]
    config = load_config(
        overrides={
            "high-availability.type": "none",
            "rest.port": "0",
            "rest.auth.token-file": str(root / "tokens"),
            "security.ssl.rest.enabled": "true",
            "security.ssl.rest.cert-file": str(server.cert),
            "security.ssl.rest.key-file": str(server.key),
            "security.ssl.rest.ca-file": str(pki["ca"].cert),
            "security.ssl.rest.client-auth": "true",
            "state.checkpoints.dir": str(root / "checkpoints"),
        },
        environ={},
    )
    svc = start_service(config)
    wait_until(svc.replica.is_ready, timeout=20, message="replica leads")
    yield svc
    svc.stop()


def _client(service: Service, ca: Path, client_cert: Issued | None) -> CoordinatorClient:
    creds = Credentials(
        token=TOKEN,
        ca_file=str(ca),
        cert_file=str(client_cert.cert) if client_cert else None,
        key_file=str(client_cert.key) if client_cert else None,
    )
    port = service.address.rsplit(":", 1)[1]
    # No scheme given: a CA file makes the client speak https.
    return CoordinatorClient(f"127.0.0.1:{port}", retry_for_s=0.5, credentials=creds)


def test_the_server_speaks_https_and_a_trusting_client_with_a_certificate_gets_in(
    service: Service, pki: dict
) -> None:
    assert service.address.startswith("https://")
    with _client(service, pki["ca"].cert, pki["client"]) as client:
        assert client.jobs() == []


def test_the_client_refuses_a_server_certificate_from_another_ca(
    service: Service, pki: dict
) -> None:
    client = _client(service, pki["other_ca"].cert, pki["client"])
    with client, pytest.raises(Unavailable, match="CERTIFICATE_VERIFY_FAILED"):
        client.jobs()


@pytest.mark.parametrize("which", ["none", "foreign"])
def test_the_server_refuses_a_client_without_a_certificate_it_trusts(
    service: Service, pki: dict, which: str
) -> None:
    cert = None if which == "none" else pki["foreign_client"]
    client = _client(service, pki["ca"].cert, cert)
    with client, pytest.raises(Unavailable) as refused:
        client.jobs()
    # TLS 1.3: the server checks the client's certificate after the client's half of the
    # handshake, so the client sees its request dropped (the trusted client above is not).
    message = str(refused.value).lower()
    assert "certificate" in message or "disconnected without sending a response" in message
