"""Real containers for the chart: podman (with runc) runs the pods the chart renders.

The images come from scripts/build-image.sh (rebuilt only when their inputs change). Each
test gets its own podman network; pods get fixed addresses on it, and `hostAliases` give
them the cluster DNS names the chart renders (what CoreDNS would answer in Kubernetes).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from dataclasses import dataclass, field
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

import yaml

from sparkpoint.ops.devcluster.zookeeper import free_port
from tests.helm.artifacts import ROOT, tool

# What podman needs on these machines: crun refuses their hybrid cgroup layout (hence
# runc), the default ulimits cannot be set inside them, and there is no systemd to manage
# cgroups. Written by the test support; scripts/podman.sh writes the same for the scripts.
CONTAINERS_CONF = """\
[containers]
default_ulimits = []

[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
"""


def _version() -> str:
    from sparkpoint import __version__

    return __version__


COORDINATOR_IMAGE = f"localhost/sparkpoint:{_version()}"
ZOOKEEPER_IMAGE = f"localhost/sparkpoint-zookeeper:{_version()}"


class Podman:
    def __init__(self, conf_dir: Path) -> None:
        conf = conf_dir / "containers.conf"
        conf.write_text(CONTAINERS_CONF)
        self.env = {**os.environ, "CONTAINERS_CONF": str(conf)}
        self.exe = tool("podman")

    def __call__(self, *args: str, check: bool = True, timeout: float = 120) -> str:
        done = subprocess.run(
            [self.exe, *args], env=self.env, capture_output=True, text=True,
            timeout=timeout, check=False,
        )  # fmt: skip
        if check:
            assert done.returncode == 0, (
                f"podman {' '.join(args)} failed ({done.returncode}):\n{done.stdout}{done.stderr}"
            )
        return done.stdout

    def build_images(self) -> None:
        """The coordinator and ZooKeeper images, as scripts/test.sh builds them (a no-op
        when their content hash is unchanged)."""
        done = subprocess.run(
            [str(ROOT / "scripts" / "build-image.sh"), "--zookeeper"], env=self.env,
            capture_output=True, text=True, timeout=1800, check=False, cwd=ROOT,
        )  # fmt: skip
        assert done.returncode == 0, f"build-image.sh failed:\n{done.stdout}{done.stderr}"

    def state(self, container: str) -> dict[str, Any]:
        out = self("container", "inspect", container, check=False)
        found = json.loads(out) if out.strip() else []
        return found[0] if found else {}


@dataclass
class Network:
    """A podman network of its own, and the next free address on it."""

    podman: Podman
    name: str
    subnet: IPv4Network = field(init=False)
    _next: int = 10

    def __post_init__(self) -> None:
        self.podman("network", "create", self.name)
        (info,) = json.loads(self.podman("network", "inspect", self.name))
        self.subnet = IPv4Network(info["subnets"][0]["subnet"])

    def address(self) -> str:
        self._next += 1
        return str(self.subnet[self._next])

    def remove(self) -> None:
        self.podman("network", "rm", "--force", self.name, check=False)


@dataclass
class PlayedPod:
    name: str
    ip: str
    spec: dict[str, Any]

    def container(self, name: str) -> str:
        return f"{self.name}-{name}"


@dataclass
class Pods:
    """Pods played with `podman kube play` on one network; removed by `remove_all`."""

    podman: Podman
    network: Network
    directory: Path
    played: list[PlayedPod] = field(default_factory=list)

    def play(self, pod: dict[str, Any], *, ip: str, extra: list[dict[str, Any]] = ()) -> PlayedPod:
        """Play one Pod (plus the ConfigMaps/Secrets it references) at address ``ip``."""
        name = pod["metadata"]["name"]
        path = self.directory / f"{name}.yaml"
        path.write_text(yaml.safe_dump_all([pod, *extra]))
        self.podman(
            "kube", "play", "--network", self.network.name, "--ip", ip, str(path), timeout=180
        )
        played = PlayedPod(name, ip, pod)
        self.played.append(played)
        return played

    def remove_all(self) -> None:
        for pod in reversed(self.played):
            self.podman("pod", "rm", "--force", "--time", "5", pod.name, check=False)


def pod_from_template(
    template: dict[str, Any], name: str, namespace: str, host_aliases: dict[str, list[str]]
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A StatefulSet pod template as the Pod the controller would create, and each probe
    the kubelet would run (by container): `$(VAR)` references and field references
    resolved as the kubelet resolves them. Probes are taken out of the pod: podman turns
    them into healthchecks that exec a shell tool the image does not have; the test plays
    the kubelet and polls the same endpoints instead. The one addition: host ports."""
    spec = copy.deepcopy(template["spec"])
    fields = {"metadata.name": name, "metadata.namespace": namespace}
    probes: dict[str, dict[str, Any]] = {}
    for container in spec["containers"]:
        env: dict[str, str] = {}
        resolved = []
        for var in container.get("env", []):
            if "valueFrom" in var:
                ref = var["valueFrom"].get("fieldRef")
                if ref is None:  # secretKeyRef and such: podman resolves those itself
                    resolved.append(var)
                    continue
                value = fields[ref["fieldPath"]]
            else:
                value = str(var["value"])
                for known, known_value in env.items():
                    value = value.replace(f"$({known})", known_value)
            env[var["name"]] = value
            resolved.append({"name": var["name"], "value": value})
        container["env"] = resolved
        for port in container.get("ports", []):
            # podman publishes every container port on the host: a free one per pod
            # (the test reaches the pods by their own addresses, never through these).
            port["hostPort"] = free_port()
        probes[container["name"]] = {
            kind: container.pop(kind)
            for kind in ("startupProbe", "livenessProbe", "readinessProbe")
            if kind in container
        }
    spec["hostAliases"] = [
        {"ip": ip, "hostnames": hostnames} for ip, hostnames in host_aliases.items()
    ]
    spec["restartPolicy"] = spec.get("restartPolicy", "Always")
    metadata = {"name": name, "labels": template["metadata"].get("labels", {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}, probes


def zookeeper_pod(name: str) -> dict[str, Any]:
    """A standalone ZooKeeper server pod, non-root, data in the container."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "securityContext": {"runAsUser": 10001, "runAsGroup": 10001},
            "containers": [
                {
                    "name": "zookeeper",
                    "image": ZOOKEEPER_IMAGE,
                    "args": ["2181", "/tmp/data"],
                }
            ],
        },
    }


def network_name() -> str:
    return f"sparkpoint-test-{os.getpid()}"
