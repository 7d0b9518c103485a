"""The Helm chart, proved without a cluster: rendered by the real Helm engine for default
and non-default values, lint clean, every manifest valid against Kubernetes' schemas, and
what matters for a safe HA deployment asserted on what is rendered."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from sparkpoint.config import all_keys, env_name, load_config
from tests.helm.artifacts import ALERTS, CHART, DASHBOARD, run_tool
from tests.helm.chart import NAMESPACE, RELEASE, Rendered, lint, render, schema_errors

# The chart's defaults, with the one value they require: the Secret of API tokens.
DEFAULTS: dict[str, Any] = {"auth": {"existingSecret": "sparkpoint-tokens"}}
# Everything optional switched on, and most values changed.
PRODUCTION: dict[str, Any] = {
    "replicaCount": 5,
    "fullnameOverride": "checkpoints",
    "image": {"repository": "registry.example.com/sparkpoint", "tag": "0.2.0"},
    "zookeeper": {
        "quorum": "zk-0.zk:2181,zk-1.zk:2181,zk-2.zk:2181/platform",
        "root": "sp",
        "clusterId": "prod-eu",
        "sessionTimeout": "20 s",
        "acl": "creator",
        "auth": {"existingSecret": "sparkpoint-zk", "key": "digest"},
    },
    "storage": {
        "checkpointsDir": "hdfs://nn.example.com:8020/sparkpoint/checkpoints",
        "savepointsDir": "hdfs://nn.example.com:8020/sparkpoint/savepoints",
        "hdfsUser": "streaming",
    },
    "checkpointing": {"interval": "30 s", "numRetained": 3, "tolerableFailures": 2},
    "config": {"heartbeat.timeout": "20 s"},
    "extraEnv": [{"name": "TZ", "value": "UTC"}],
    "service": {"port": 9081},
    "serviceAccount": {"annotations": {"example.com/role": "sparkpoint"}},
    "affinity": {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "topologyKey": "topology.kubernetes.io/zone",
                    "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "sparkpoint"}},
                }
            ]
        }
    },
    "podAnnotations": {"example.com/team": "data-platform"},
    "auth": {"existingSecret": "sparkpoint-tokens", "key": "tokens.txt"},
    "priorityClassName": "high",
    "metrics": {
        "serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus"}},
        "prometheusRule": {
            "enabled": True,
            "runbookBaseUrl": "https://docs.example.com/sparkpoint/operations.html",
        },
        "dashboard": {"enabled": True},
    },
}
# The smallest footprint: one replica, no PodDisruptionBudget, an existing account.
SMALL: dict[str, Any] = {
    "replicaCount": 1,
    "serviceAccount": {"create": False, "name": "shared"},
    "podDisruptionBudget": {"enabled": False},
    "storage": {"checkpointsDir": "/mnt/shared/checkpoints"},
    "extraVolumes": [{"name": "shared", "persistentVolumeClaim": {"claimName": "checkpoints"}}],
    "extraVolumeMounts": [{"name": "shared", "mountPath": "/mnt/shared"}],
    "auth": {"enabled": False},
    "networkPolicy": {"enabled": False},
}
CASES = {"defaults": DEFAULTS, "production": PRODUCTION, "small": SMALL}


@pytest.fixture(scope="module", params=list(CASES))
def case(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any], Rendered]:
    return request.param, CASES[request.param], render(CASES[request.param])


def _statefulset(rendered: Rendered) -> dict[str, Any]:
    return rendered.one("StatefulSet")


def _container(rendered: Rendered) -> dict[str, Any]:
    (container,) = _statefulset(rendered)["spec"]["template"]["spec"]["containers"]
    return container


@pytest.mark.parametrize("name", list(CASES))
def test_lint_is_clean(name: str) -> None:
    assert lint(CASES[name]) == []


def test_every_manifest_is_valid_kubernetes(case: tuple[str, dict, Rendered]) -> None:
    _, _, rendered = case
    builtin = [m for m in rendered.manifests if not m["apiVersion"].startswith("monitoring.")]
    errors = [error for manifest in builtin for error in schema_errors(manifest)]
    assert errors == []
    for manifest in rendered.manifests:
        assert manifest["metadata"]["namespace"] == NAMESPACE
        labels = manifest["metadata"]["labels"]
        # The `helm test` pod is named apart: no selector of the release may match it.
        test_hook = manifest["metadata"].get("annotations", {}).get("helm.sh/hook") == "test"
        name, component = ("sparkpoint", "coordinator")
        if test_hook:
            name, component = ("sparkpoint-test", "test")
        assert labels["app.kubernetes.io/name"] == name
        assert labels["app.kubernetes.io/instance"] == RELEASE
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["app.kubernetes.io/component"] == component
        assert labels["app.kubernetes.io/part-of"] == "sparkpoint"
        assert "app.kubernetes.io/version" in labels


def test_what_each_case_renders(case: tuple[str, dict, Rendered]) -> None:
    name, _, rendered = case
    core = ["ConfigMap", "Pod", "Service", "Service", "StatefulSet"]  # Pod: `helm test`
    expected = {
        "defaults": [*core, "NetworkPolicy", "PodDisruptionBudget", "ServiceAccount"],
        "production": [
            *core,
            "ConfigMap",
            "NetworkPolicy",
            "PodDisruptionBudget",
            "PrometheusRule",
            "ServiceAccount",
            "ServiceMonitor",
        ],
        "small": core,
    }[name]
    assert rendered.kinds() == sorted(expected)


def test_the_statefulset_runs_replicas_safely(case: tuple[str, dict, Rendered]) -> None:
    _, values, rendered = case
    sts = _statefulset(rendered)
    spec = sts["spec"]
    assert spec["replicas"] == values.get("replicaCount", 3)
    headless = rendered.one("Service", f"{sts['metadata']['name']}-headless")
    assert spec["serviceName"] == headless["metadata"]["name"]
    # Rolling updates one pod at a time, each waiting for the last to be ready.
    assert spec["updateStrategy"] == {"type": "RollingUpdate"}
    assert spec["podManagementPolicy"] == "Parallel"
    assert spec["minReadySeconds"] > 0
    pod = spec["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 45
    assert pod["automountServiceAccountToken"] is False
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()


def test_probes_use_healthz_and_readyz_on_the_served_port(case: tuple[str, dict, Rendered]) -> None:
    _, values, rendered = case
    container = _container(rendered)
    (port,) = container["ports"]
    assert port == {
        "name": "http",
        "containerPort": values.get("service", {}).get("port", 8081),
        "protocol": "TCP",
    }
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}


def test_security_context_is_locked_down(case: tuple[str, dict, Rendered]) -> None:
    _, _, rendered = case
    pod = _statefulset(rendered)["spec"]["template"]["spec"]
    container = _container(rendered)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]


def _pod_environment(rendered: Rendered, pod_name: str) -> dict[str, str]:
    """The container's literal environment with Kubernetes' $(VAR) references expanded,
    as the kubelet would for pod ``pod_name``."""
    env: dict[str, str] = {"POD_NAME": pod_name, "POD_NAMESPACE": NAMESPACE}
    for var in _container(rendered)["env"]:
        if "value" in var:
            value = var["value"]
            for name, known in env.items():
                value = value.replace(f"$({name})", known)
            env[var["name"]] = value
    return env


def test_the_configmap_is_a_valid_sparkpoint_configuration(
    case: tuple[str, dict, Rendered], tmp_path: Path
) -> None:
    name, values, rendered = case
    sts = _statefulset(rendered)
    configmap = rendered.one("ConfigMap", sts["metadata"]["name"])
    config_file = tmp_path / "sparkpoint.yaml"
    config_file.write_text(configmap["data"]["sparkpoint.yaml"])
    assert set(yaml.safe_load(config_file.read_text())) <= set(all_keys())
    pod = f"{sts['metadata']['name']}-0"
    environ = _pod_environment(rendered, pod)
    if name == "production":  # the digest credentials come from the Secret
        environ[env_name("high-availability.zookeeper.client.digest-auth")] = "sp:secret"
    config = load_config(config_file, environ=environ)
    zookeeper = values.get("zookeeper", {})
    assert config.zookeeper.quorum == zookeeper.get("quorum", "zookeeper:2181")
    assert config.zookeeper.cluster_id == zookeeper.get("clusterId", RELEASE)
    assert config.ha.type == "zookeeper"
    assert config.ha.instance_id == pod
    port = values.get("service", {}).get("port", 8081)
    assert config.rest.port == port
    assert config.rest.bind_address == "0.0.0.0"
    headless = f"{sts['metadata']['name']}-headless"
    assert config.rest.address == f"http://{pod}.{headless}.{NAMESPACE}.svc.cluster.local:{port}"
    storage = values.get("storage", {})
    assert config.storage.checkpoints_dir == storage.get(
        "checkpointsDir", "hdfs://namenode:8020/sparkpoint/checkpoints"
    )
    assert environ["LOGNAME"] == storage.get("hdfsUser", "sparkpoint")
    if name == "production":
        assert config.zookeeper.session_timeout_s == 20.0
        assert config.zookeeper.acl == "creator"
        assert config.zookeeper.digest_auth == "sp:secret"
        assert config.storage.savepoints_dir.endswith("/savepoints")
        assert config.checkpointing.interval_s == 30.0
        assert config.store.max_retained == 3
        assert config.service.heartbeat_timeout_s == 20.0


def test_every_sparkpoint_variable_names_a_configuration_key(
    case: tuple[str, dict, Rendered],
) -> None:
    _, _, rendered = case
    known = {env_name(key) for key in all_keys()}
    names = {var["name"] for var in _container(rendered)["env"]}
    assert {n for n in names if n.startswith("SPARKPOINT_")} <= known


def test_digest_credentials_come_from_the_secret_only() -> None:
    rendered = render(PRODUCTION)
    (var,) = [
        v
        for v in _container(rendered)["env"]
        if v["name"] == env_name("high-availability.zookeeper.client.digest-auth")
    ]
    assert var["valueFrom"] == {"secretKeyRef": {"name": "sparkpoint-zk", "key": "digest"}}
    assert "digest" not in rendered.one("ConfigMap", "checkpoints")["data"]["sparkpoint.yaml"]


def test_services_headless_for_pod_names_and_one_for_clients(
    case: tuple[str, dict, Rendered],
) -> None:
    _, _, rendered = case
    sts = _statefulset(rendered)
    selector = sts["spec"]["selector"]["matchLabels"]
    headless = rendered.one("Service", f"{sts['metadata']['name']}-headless")
    client = rendered.one("Service", sts["metadata"]["name"])
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True
    assert "clusterIP" not in client["spec"]
    for service in (headless, client):
        assert service["spec"]["selector"] == selector
        assert [p["targetPort"] for p in service["spec"]["ports"]] == ["http"]


def test_the_disruption_budget_allows_one_coordinator_down() -> None:
    rendered = render(DEFAULTS)
    pdb = rendered.one("PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    sts = _statefulset(rendered)
    assert pdb["spec"]["selector"]["matchLabels"] == sts["spec"]["selector"]["matchLabels"]


def test_the_service_monitor_scrapes_every_replica_through_the_headless_service() -> None:
    rendered = render(PRODUCTION)
    monitor = rendered.one("ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus"
    headless = rendered.one("Service", "checkpoints-headless")
    client = rendered.one("Service", "checkpoints")
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= headless["metadata"]["labels"].items()
    assert not selector.items() <= client["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "http" and endpoint["path"] == "/metrics"
    assert endpoint["honorLabels"] is False  # the scrape job stays Prometheus' own


def _rules_with(overrides: dict[str, Any]) -> dict[str, Any]:
    values = copy.deepcopy(PRODUCTION)
    values["metrics"]["prometheusRule"].update(overrides)
    spec: dict[str, Any] = render(values).one("PrometheusRule")["spec"]
    return spec


def test_the_prometheus_rule_is_the_rules_file(tmp_path: Path) -> None:
    rules = yaml.safe_load(ALERTS.read_text())
    base = PRODUCTION["metrics"]["prometheusRule"]["runbookBaseUrl"]
    # Unscoped, only the runbook links change: absolute, at the base URL.
    spec = _rules_with({"scopeToRelease": False})
    for group, expected in zip(spec["groups"], rules["groups"], strict=True):
        for rule, source in zip(group["rules"], expected["rules"], strict=True):
            anchor = source["annotations"]["runbook_url"].partition("#")[2]
            assert rule["annotations"]["runbook_url"] == f"{base}#{anchor}"
            rule["annotations"]["runbook_url"] = source["annotations"]["runbook_url"]
    assert spec == rules
    # Without a base URL the links still are absolute: the source at the appVersion.
    default = _rules_with({"runbookBaseUrl": ""})
    url = default["groups"][0]["rules"][0]["annotations"]["runbook_url"]
    assert url.startswith("https://") and url.endswith("/docs/operations.md#sparkpointnoleader")
    extracted = tmp_path / "prometheusrule.yaml"
    extracted.write_text(yaml.safe_dump(render(PRODUCTION).one("PrometheusRule")["spec"]))
    run_tool("promtool", "check", "rules", extracted)


def test_the_rules_are_scoped_to_the_release(tmp_path: Path) -> None:
    """Scoped rules select only this release's scrape job and namespace: promtool sees
    the release without a leader fire, and another release's leaderless cluster not."""
    spec = _rules_with({})
    sts = render(PRODUCTION).one("StatefulSet")
    headless = sts["spec"]["serviceName"]
    for group in spec["groups"]:
        for rule in group["rules"]:
            assert f'job="{headless}", namespace="{NAMESPACE}"' in rule["expr"], rule["alert"]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(spec))
    mine = f'job="{headless}", namespace="{NAMESPACE}", instance="a:8081"'
    other = 'job="other-headless", namespace="other", instance="b:8081"'
    test = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": [
                {"series": f"sparkpoint_is_leader{{{mine}}}", "values": "0x10"},
                {"series": f"sparkpoint_is_leader{{{other}}}", "values": "0x10"},
            ],
            "alert_rule_test": [{
                "eval_time": "5m", "alertname": "SparkpointNoLeader",
                "exp_alerts": [{
                    "exp_labels": {"severity": "critical", "job": headless,
                                   "namespace": NAMESPACE},
                    "exp_annotations": {
                        "summary": f"sparkpoint cluster {headless} has no leader",
                        "description": (
                            f'No coordinator of scrape job {headless} (namespace '
                            f'"{NAMESPACE}") has reported leadership for over a minute. No '
                            "checkpoint is triggered or completed until one is elected."
                        ),
                        "runbook_url": PRODUCTION["metrics"]["prometheusRule"]["runbookBaseUrl"]
                        + "#sparkpointnoleader",
                    },
                }],
            }],
        }],
    }  # fmt: skip
    (tmp_path / "scoped.test.yaml").write_text(yaml.safe_dump(test))
    run_tool("promtool", "test", "rules", tmp_path / "scoped.test.yaml")


def test_alerts_are_tuned_from_values() -> None:
    spec = _rules_with(
        {
            "scopeToRelease": False,
            "alerts": {
                "SparkpointTooFewReplicas": {"threshold": 3, "for": "20m"},
                "SparkpointFencedWrites": {"enabled": False},
                "SparkpointRestoreFellBack": {"severity": "critical", "labels": {"team": "x"}},
            },
        }
    )
    rules = {r["alert"]: r for g in spec["groups"] for r in g["rules"]}
    assert "SparkpointFencedWrites" not in rules
    few = rules["SparkpointTooFewReplicas"]
    assert few["expr"].rstrip().endswith("< 3") and few["for"] == "20m"
    assert rules["SparkpointRestoreFellBack"]["labels"] == {"severity": "critical", "team": "x"}


@pytest.mark.parametrize(
    ("alerts", "message"),
    [
        ({"SparkpointNoSuchAlert": {"enabled": False}}, "SparkpointNoSuchAlert: no such alert"),
        ({"SparkpointAbsent": {"threshold": 2}}, "SparkpointAbsent.threshold"),
    ],
)
def test_a_wrong_alert_override_is_refused(alerts: dict, message: str) -> None:
    values = copy.deepcopy(PRODUCTION)
    values["metrics"]["prometheusRule"]["alerts"] = alerts
    with pytest.raises(Exception, match=message):
        render(values)


def test_the_chart_renders_as_a_subchart(tmp_path: Path) -> None:
    """A parent chart's `global` values and its own values under `sparkpoint:` reach the
    chart through the real Helm engine (the schema accepts `global`)."""
    parent = tmp_path / "parent"
    (parent / "charts").mkdir(parents=True)
    (parent / "Chart.yaml").write_text(
        "apiVersion: v2\nname: platform\nversion: 1.0.0\n"
        'dependencies:\n  - name: sparkpoint\n    version: "*"\n'
    )
    shutil.copytree(CHART, parent / "charts" / "sparkpoint")
    values = {"global": {"imageRegistry": "registry.example.com"},
              "sparkpoint": {"replicaCount": 5, **DEFAULTS}}  # fmt: skip
    with helm.Chart.load(parent) as chart:
        files = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    docs = [
        d for path, text in files.items() if not path.endswith("NOTES.txt")
        for d in yaml.safe_load_all(text) if d
    ]  # fmt: skip
    (sts,) = [d for d in docs if d.get("kind") == "StatefulSet"]
    assert sts["spec"]["replicas"] == 5


def test_the_dashboard_configmap_carries_the_dashboard_for_grafanas_sidecar() -> None:
    configmap = render(PRODUCTION).one("ConfigMap", "checkpoints-dashboard")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    (body,) = configmap["data"].values()
    rendered, source = json.loads(body), json.loads(DASHBOARD.read_text())
    # One dashboard per release: its own uid and title; the rest is the file.
    assert rendered.pop("uid") != source.pop("uid")
    assert rendered.pop("title").startswith(source.pop("title"))
    assert rendered == source


def test_notes_tell_how_to_reach_the_leader() -> None:
    notes = render(DEFAULTS).notes
    assert f"http://sp-sparkpoint.{NAMESPACE}.svc.cluster.local:8081" in notes
    assert "/v1/leader" in notes


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"replicaCount": 0}, "/replicaCount"),
        ({"zookeeper": {"quorum": "zookeeper"}}, "/zookeeper/quorum"),
        ({"zookeeper": {"sessionTimeout": "soon"}}, "/zookeeper/sessionTimeout"),
        ({"storage": {"checkpointsDir": "checkpoints"}}, "/storage/checkpointsDir"),
        ({"updateStrategy": {"type": "OnDelete"}}, "/updateStrategy/type"),
        (
            {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}}},
            "/updateStrategy/rollingUpdate/maxUnavailable",
        ),
        ({"replicas": 3}, "replicas"),  # a typo of replicaCount
        ({"zookeeper": {"acl": "creator"}}, "zookeeper.auth.existingSecret"),
        ({"config": {"rest.address": "http://x:1"}}, "config.rest.address cannot be set"),
        ({"config": {"high-availability.type": "none"}}, "config.high-availability.type"),
        ({"config": {"rest.port": 9000}}, "use service.port"),
        ({"config": {"high-availability.zookeeper.client.digest-auth": "a:b"}}, "existingSecret"),
    ],
)
def test_bad_values_are_refused_with_the_key(values: dict[str, Any], complaint: str) -> None:
    with pytest.raises(helm.HelmError, match=complaint.replace(".", r"\.")):
        render({**DEFAULTS, **values})
