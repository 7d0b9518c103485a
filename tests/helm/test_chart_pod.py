"""The pod the chart renders, run outside Kubernetes: its command, its configuration file
and its environment start a real coordinator against a real ZooKeeper, the probes the
chart declares answer on the port it declares, its /metrics page passes promtool, and
SIGTERM stops it cleanly."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper, free_port
from tests.helm.artifacts import run_tool
from tests.helm.chart import NAMESPACE, render
from tests.support.waiting import wait_until

CONFIG_MOUNT = "/etc/sparkpoint"


def _probe(port: int, path: str) -> int | None:
    try:
        return httpx.get(f"http://127.0.0.1:{port}{path}", timeout=2).status_code
    except httpx.HTTPError:
        return None


@pytest.mark.slow
def test_the_rendered_pod_runs_a_coordinator(tmp_path: Path, zk_server: LocalZooKeeper) -> None:
    port = free_port()
    rendered = render(
        {
            "zookeeper": {"quorum": zk_server.connect_string, "clusterId": f"pod-{port}"},
            "storage": {"checkpointsDir": str(tmp_path / "checkpoints")},
            "service": {"port": port},
            "auth": {"existingSecret": "sparkpoint-tokens"},
        }
    )
    sts = rendered.one("StatefulSet")
    pod = sts["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    # The ConfigMap, where the pod mounts it (here: a directory standing in for the mount).
    (config_volume,) = [v for v in pod["volumes"] if "configMap" in v]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == config_volume["name"]]
    assert mount["mountPath"] == CONFIG_MOUNT
    configmap = rendered.one("ConfigMap", config_volume["configMap"]["name"])
    config_dir = tmp_path / "etc-sparkpoint"
    config_dir.mkdir()
    # The token Secret, where the pod mounts it (here: a directory standing in for it).
    (tokens_mount,) = [m for m in container["volumeMounts"] if m["name"] == "auth-tokens"]
    tokens_dir = tmp_path / "auth-tokens"
    tokens_dir.mkdir()
    (tokens_dir / "tokens").write_text("read prometheus 0123456789abcdef0123\n")
    for name, text in configmap["data"].items():
        (config_dir / name).write_text(text.replace(tokens_mount["mountPath"], str(tokens_dir)))
    # The environment as the kubelet builds it (no Secret reaches it in these values).
    env = {"PATH": os.environ["PATH"], "POD_NAME": f"{sts['metadata']['name']}-0"}
    env["POD_NAMESPACE"] = NAMESPACE
    for var in container["env"]:
        if "value" in var:
            value = var["value"]
            for name in ("POD_NAME", "POD_NAMESPACE"):
                value = value.replace(f"$({name})", env[name])
            env[var["name"]] = value
    env["HOME"] = env["TMPDIR"] = str(tmp_path)  # the pod's emptyDir
    command = [
        arg.replace(CONFIG_MOUNT, str(config_dir))
        for arg in container["command"] + container["args"]
    ]
    executable = shutil.which(command[0], path=str(Path(sys.executable).parent))
    assert executable, f"{command[0]} is not installed next to {sys.executable}"
    (port_spec,) = container["ports"]
    assert port_spec["containerPort"] == port
    log_path = tmp_path / "coordinator.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([executable, *command[1:]], env=env, stdout=log, stderr=log)
    try:
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            path = container[probe]["httpGet"]["path"]
            wait_until(
                lambda path=path: proc.poll() is not None or _probe(port, path) == 200,
                timeout=60, message=f"{probe} {path} to answer 200",
            )  # fmt: skip
            assert proc.poll() is None, log_path.read_text()
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).content
        assert b"sparkpoint_is_leader 1.0" in metrics
        # The coordinator's own /metrics endpoint passes promtool's checks too.
        assert run_tool("promtool", "check", "metrics", stdin=metrics).stdout.strip() == ""
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log_path.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
