"""The chart's security values, rendered by the real Helm engine: tokens and certificates
mounted from Secrets, a NetworkPolicy, and no Service outside the cluster by accident."""

from __future__ import annotations

from typing import Any

import helm_python as helm
import pytest

from tests.helm.chart import render, schema_errors

TOKENS = {"auth": {"existingSecret": "sparkpoint-tokens"}}


def _pod(values: dict[str, Any]) -> dict[str, Any]:
    return render(values).one("StatefulSet")["spec"]["template"]["spec"]


def test_tokens_and_certificates_come_from_secrets_and_probes_speak_https() -> None:
    values = {**TOKENS, "tls": {"enabled": True, "existingSecret": "sparkpoint-tls"}}
    rendered = render(values)
    pod = rendered.one("StatefulSet")["spec"]["template"]["spec"]
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    assert secrets == {"auth-tokens": "sparkpoint-tokens", "tls": "sparkpoint-tls"}
    (container,) = pod["containers"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["auth-tokens"]["readOnly"] and mounts["tls"]["readOnly"]
    config = rendered.one("ConfigMap", "sp-sparkpoint")["data"]["sparkpoint.yaml"]
    assert "rest.auth.token-file: /var/run/sparkpoint/auth/tokens" in config
    assert "security.ssl.rest.enabled: true" in config
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["scheme"] == "HTTPS"
    address = next(e for e in container["env"] if e["name"] == "SPARKPOINT_REST_ADDRESS")
    assert address["value"].startswith("https://")


def test_the_network_policy_admits_drivers_and_prometheus_and_reaches_zookeeper_and_hdfs() -> None:
    policy = render(TOKENS).one("NetworkPolicy")
    assert schema_errors(policy) == []
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    (ingress,) = spec["ingress"]
    labels = [peer.get("podSelector", {}).get("matchLabels", {}) for peer in ingress["from"]]
    assert {"sparkpoint.io/client": "true"} in labels
    assert {"app.kubernetes.io/name": "prometheus"} in labels
    assert ingress["ports"] == [{"port": "http", "protocol": "TCP"}]
    egress_ports = {p["port"] for rule in spec["egress"] for p in rule["ports"]}
    assert egress_ports == {53, 2181, 2281, 8020, 9864, 9865, 9866, 9870, 9871}


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({}, "auth.enabled needs auth.existingSecret"),
        ({**TOKENS, "service": {"type": "LoadBalancer", "port": 8081}}, "allowExternal"),
        ({**TOKENS, "service": {"type": "NodePort", "port": 8081}}, "allowExternal"),
        ({**TOKENS, "tls": {"enabled": True}}, "tls.existingSecret"),
        ({**TOKENS, "config": {"rest.auth.enabled": False}}, "use the auth and tls values"),
        ({**TOKENS, "service": {"type": "ExternalName", "port": 8081}}, "/service/type"),
    ],
)
def test_weakening_values_are_refused(values: dict[str, Any], complaint: str) -> None:
    with pytest.raises(helm.HelmError, match=complaint.replace(".", r"\.")):
        render(values)


def test_an_external_service_renders_when_asked_for_explicitly() -> None:
    values = {**TOKENS, "service": {"type": "LoadBalancer", "port": 8081, "allowExternal": True}}
    service = render(values).one("Service", "sp-sparkpoint")
    assert service["spec"]["type"] == "LoadBalancer"
