"""Rendering the Helm chart with the real Helm engine (Helm's Go SDK, through
helm-python-sdk) and checking manifests against Kubernetes' own schemas."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import helm_python as helm
import kubernetes_validate
import yaml

from tests.helm.artifacts import CHART

RELEASE = "sp"
NAMESPACE = "streaming"
# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion) and the newest schemas.
KUBE_VERSIONS = ("1.25.0", kubernetes_validate.utils.latest_version())


@dataclass(frozen=True)
class Rendered:
    """One rendering of the chart: its manifests, by kind and name, and its notes."""

    manifests: list[dict[str, Any]]
    notes: str

    def one(self, kind: str, name: str | None = None) -> dict[str, Any]:
        found = [
            m
            for m in self.manifests
            if m["kind"] == kind and (name is None or m["metadata"]["name"] == name)
        ]
        assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
        return found[0]

    def kinds(self) -> list[str]:
        return sorted(m["kind"] for m in self.manifests)


def render(values: dict[str, Any]) -> Rendered:
    with helm.Chart.load(CHART) as chart:
        files = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    manifests: list[dict[str, Any]] = []
    notes = ""
    for path, text in sorted(files.items()):
        if path.endswith("NOTES.txt"):
            notes = text
            continue
        manifests += [doc for doc in yaml.safe_load_all(text) if doc]
    return Rendered(manifests, notes)


def lint(values: dict[str, Any]) -> list[dict[str, Any]]:
    """Lint findings above "info" (warnings and errors), strict as `helm lint --strict`."""
    report = helm.lint(CHART, values, strict=True, namespace=NAMESPACE)
    return [m for m in report["messages"] if m["severity"] >= 2] + [
        {"error": e} for e in report["errors"]
    ]


def schema_errors(manifest: dict[str, Any]) -> list[str]:
    """Validation errors of a manifest against Kubernetes' strict schemas (unknown fields
    refused), for every supported Kubernetes version in KUBE_VERSIONS."""
    errors = []
    for version in KUBE_VERSIONS:
        try:
            kubernetes_validate.validate(manifest, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(map(str, exc.path))
            errors.append(f"{manifest['kind']} against {version}: {path}: {exc.message}")
    return errors
