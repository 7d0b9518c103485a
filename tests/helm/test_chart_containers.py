"""The chart in real containers: what Helm renders, run by podman from the image
scripts/build-image.sh builds.

A ZooKeeper pod; the StatefulSet's pod template as three Pods with the ConfigMap it mounts,
its securityContext (non-root, read-only root filesystem) and its probes' endpoints (polled
as the kubelet would); a driver outside (the real client in this process) checkpointing
through them; the leader's container killed; /metrics scraped by a real Prometheus; and the
chart's `helm test` hook pod run the same way.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from sparkpoint.ops.devcluster.zookeeper import server_mode
from tests.helm.chart import NAMESPACE, Rendered, render
from tests.helm.podman import (
    Network,
    PlayedPod,
    Podman,
    Pods,
    network_name,
    pod_from_template,
    zookeeper_pod,
)
from tests.helm.test_prometheus_integration import SCRAPE_JOB, Prometheus
from tests.service.support import Driver, make_graph
from tests.support.waiting import wait_until

PIPELINE = "clicks"
PORT = 8081


@pytest.fixture(scope="module")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Podman:
    podman = Podman(tmp_path_factory.mktemp("podman"))
    podman.build_images()
    return podman


@dataclass
class Cluster:
    rendered: Rendered
    zookeeper: PlayedPod
    coordinators: list[PlayedPod]
    probes: dict[str, dict[str, Any]]
    aliases: dict[str, list[str]]
    pods: Pods

    def url(self, pod: PlayedPod, path: str) -> str:
        return f"http://{pod.ip}:{PORT}{path}"

    def status(self, pod: PlayedPod, path: str) -> int | None:
        try:
            return httpx.get(self.url(pod, path), timeout=2).status_code
        except httpx.HTTPError:
            return None

    def leaders(self) -> list[PlayedPod]:
        found = []
        for pod in self.coordinators:
            try:
                page = httpx.get(self.url(pod, "/metrics"), timeout=2).text
            except httpx.HTTPError:
                continue
            if "\nsparkpoint_is_leader 1.0" in page:
                found.append(pod)
        return found


def _dns(rendered: Rendered, name: str) -> str:
    headless = rendered.one("StatefulSet")["spec"]["serviceName"]
    return f"{name}.{headless}.{NAMESPACE}.svc.cluster.local"


@pytest.fixture
def cluster(podman: Podman, tmp_path: Path) -> Iterator[Cluster]:
    network = Network(podman, network_name())
    pods = Pods(podman, network, tmp_path)
    try:
        zk_ip = network.address()
        zookeeper = pods.play(zookeeper_pod(f"zk-{uuid.uuid4().hex[:8]}"), ip=zk_ip)
        wait_until(lambda: server_mode(zk_ip, 2181), timeout=120, message="ZooKeeper serving")
        checkpoints = tmp_path / "checkpoints"
        checkpoints.mkdir(mode=0o777)
        checkpoints.chmod(0o777)  # the pods write as uid 10001
        rendered = render(
            {
                "zookeeper": {
                    "quorum": f"{zk_ip}:2181",
                    "clusterId": f"pods-{uuid.uuid4().hex[:8]}",
                    "sessionTimeout": "6 s",
                },
                "storage": {"checkpointsDir": "/checkpoints"},
                # Podman 4.3 (Debian bookworm) crashes playing a Pod with a Secret
                # volume, so the token Secret cannot be mounted here. Authentication is
                # tested against real coordinators (tests/service/test_auth.py) and the
                # chart's Secret wiring by rendering (test_chart_security.py); the hook
                # pod's check reads only the open probes either way.
                "auth": {"enabled": False},
                "extraVolumes": [{"name": "checkpoints", "hostPath": {"path": str(checkpoints)}}],
                "extraVolumeMounts": [{"name": "checkpoints", "mountPath": "/checkpoints"}],
            }
        )
        sts = rendered.one("StatefulSet")
        configmap = rendered.one("ConfigMap")
        names = [f"{sts['metadata']['name']}-{i}" for i in range(sts["spec"]["replicas"])]
        ips = [network.address() for _ in names]
        # What cluster DNS answers: each pod's name on the headless Service; the client
        # Service (one address here: a follower's, so the test goes through a follower).
        aliases = {ip: [_dns(rendered, name)] for ip, name in zip(ips, names, strict=True)}
        service = rendered.one("Service", sts["metadata"]["name"])["metadata"]["name"]
        aliases[ips[1]].append(f"{service}.{NAMESPACE}.svc.cluster.local")
        coordinators = []
        probes: dict[str, dict[str, Any]] = {}
        for name, ip in zip(names, ips, strict=True):
            pod, probes = pod_from_template(sts["spec"]["template"], name, NAMESPACE, aliases)
            coordinators.append(pods.play(pod, ip=ip, extra=[configmap]))
        yield Cluster(rendered, zookeeper, coordinators, probes["coordinator"], aliases, pods)
    finally:
        pods.remove_all()
        network.remove()


@pytest.mark.slow
def test_the_chart_runs_in_containers(cluster: Cluster, podman: Podman, tmp_path: Path) -> None:
    # The pods run as the chart says: non-root, read-only root filesystem.
    for pod in cluster.coordinators:
        state = podman.state(pod.container("coordinator"))
        assert state["Config"]["User"].split(":")[0] == "10001"
        assert state["HostConfig"]["ReadonlyRootfs"] is True
    # Every probe the chart declares answers 200 on every pod (startup, then the others).
    for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
        probe = cluster.probes[kind]["httpGet"]
        assert probe["port"] == "http"
        for pod in cluster.coordinators:
            wait_until(
                lambda pod=pod, path=probe["path"]: cluster.status(pod, path) == 200,
                timeout=180, message=f"{kind} {probe['path']} of {pod.name}", interval=0.5,
            )  # fmt: skip
    (leader,) = wait_until(
        lambda: (found := cluster.leaders()) and len(found) == 1 and found,
        timeout=60, message="one leader",
    )  # fmt: skip

    prometheus_dir = tmp_path / "prometheus"
    prometheus_dir.mkdir()
    prometheus = Prometheus(prometheus_dir, [f"{p.ip}:{PORT}" for p in cluster.coordinators])
    driver = Driver([f"{p.ip}:{PORT}" for p in cluster.coordinators], make_graph(PIPELINE))
    try:
        wait_until(prometheus.ready, timeout=60, message="prometheus ready", interval=0.2)
        driver.start()
        wait_until(
            lambda: len(driver.completed) >= 2, timeout=120,
            message="checkpoints completed through the pods",
        )  # fmt: skip
        # The hook pod `helm test` runs: asks the client Service (a follower) who leads,
        # then the leader's /readyz, from inside the network by the cluster DNS names.
        assert _run_test_hook(cluster) == 0

        # Kill the leader's container: another pod leads, and the driver keeps going.
        epoch_before = max(e for e, _ in driver.completed)
        podman("kill", "--signal", "KILL", leader.container("coordinator"))
        (new_leader,) = wait_until(
            lambda: (found := [p for p in cluster.leaders() if p is not leader])
            and len(found) == 1 and found,
            timeout=120, message="another pod to lead",
        )  # fmt: skip
        wait_until(
            lambda: any(e > epoch_before for e, _ in driver.completed), timeout=120,
            message="a checkpoint completed by the new leader",
        )  # fmt: skip
        assert new_leader is not leader

        # Prometheus scrapes the pods: one leader, the pipeline's checkpoints by job_id.
        wait_until(
            lambda: prometheus.query(
                f'sparkpoint_checkpoints_completed_total{{job="{SCRAPE_JOB}",'
                f' job_id="{PIPELINE}"}} > 0'
            ),
            timeout=60, message="the pipeline's completed checkpoints in Prometheus",
            interval=0.5,
        )  # fmt: skip
        wait_until(
            lambda: [
                r["value"][1]
                for r in prometheus.query(f'sum(sparkpoint_is_leader{{job="{SCRAPE_JOB}"}})')
            ] == ["1"],
            timeout=60, message="Prometheus to see one leader", interval=0.5,
        )  # fmt: skip
    finally:
        driver.stop()
        prometheus.stop()


def _run_test_hook(cluster: Cluster) -> int:
    hooks = [
        m for m in cluster.rendered.manifests
        if m["metadata"].get("annotations", {}).get("helm.sh/hook") == "test"
    ]  # fmt: skip
    (hook,) = hooks
    spec = dict(hook["spec"])
    spec["hostAliases"] = [{"ip": ip, "hostnames": h} for ip, h in cluster.aliases.items()]
    pod = {**hook, "spec": spec}
    pods = cluster.pods
    played = pods.play(pod, ip=pods.network.address())
    (container,) = spec["containers"]
    name = played.container(container["name"])
    state = wait_until(
        lambda: (s := pods.podman.state(name)) and s["State"]["Status"] == "exited" and s,
        timeout=120, message="the helm test pod to finish", interval=0.5,
    )  # fmt: skip
    code = int(state["State"]["ExitCode"])
    assert code == 0, pods.podman("logs", name, check=False)
    return code
