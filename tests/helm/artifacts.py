"""Where the operations artefacts live, the tools that check them, and what the service
really exports (read from ``sparkpoint.metrics`` itself, never from a copied list)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.metrics import MetricWrapperBase

from sparkpoint import metrics

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "sparkpoint"
ALERTS = CHART / "files" / "alerts.yaml"
DASHBOARD = CHART / "files" / "dashboard.json"
RULE_TESTS = Path(__file__).resolve().parent / "rules"
OPERATIONS_DOC = ROOT / "docs" / "operations.md"

# Samples a metric family of each type produces (prometheus-client's exposition).
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "stateset": ("",),
    "info": ("_info",),
}


def exported_series() -> dict[str, frozenset[str]]:
    """Every series name ``sparkpoint.metrics`` can expose, with its label names."""
    series: dict[str, frozenset[str]] = {}
    for value in vars(metrics).values():
        if not isinstance(value, MetricWrapperBase):
            continue
        labels = tuple(value._labelnames)
        for family in value.describe():
            for suffix in _SUFFIXES[family.type]:
                extra: tuple[str, ...] = ()
                if suffix == "_bucket":
                    extra = ("le",)
                elif family.type == "stateset":
                    extra = (family.name,)
                elif family.type == "info":
                    extra = ("version",)
                series[family.name + suffix] = frozenset(labels + extra)
    return series


_METRIC_NAME = re.compile(r"\b(sparkpoint_[a-z0-9_]+)\b")


def metric_names(promql: str) -> set[str]:
    """The sparkpoint series a PromQL expression reads (label names are never metric
    names here: the only label spelled like one is the Enum's own, equal to its name)."""
    return set(_METRIC_NAME.findall(promql))


# Labels Prometheus attaches to every scraped series (a ServiceMonitor adds the last four).
TARGET_LABELS = frozenset(
    {"job", "instance", "namespace", "pod", "service", "endpoint", "container"}
)
_SELECTOR = re.compile(r"\b(sparkpoint_[a-z0-9_]+)\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")


def unknown_selector_labels(promql: str) -> set[str]:
    """Labels a selector matches on that its series never carries once scraped."""
    exported = exported_series()
    unknown = set()
    for name, matchers in _SELECTOR.findall(promql):
        own = set(exported.get(name, ()))
        for label in _MATCHER.findall(matchers):
            if label not in own | TARGET_LABELS:
                unknown.add(f"{name}{{{label}}}")
    return unknown


def load_alert_rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [rule | {"group": group["name"]} for group in groups for rule in group["rules"]]


def tool(name: str) -> str:
    """Path of a command-line tool; fails with the way to install it when it is missing."""
    path = shutil.which(name)
    if path is None:
        raise AssertionError(
            f"{name} is not installed: it comes with Debian's prometheus package "
            "(scripts/test.sh installs it; by hand: apt-get install -y prometheus)"
        )
    return path


def run_tool(*args: str | Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    """Run a tool and fail with its output unless it succeeds."""
    command = [tool(str(args[0])), *map(str, args[1:])]
    done = subprocess.run(
        command, input=stdin.decode() if stdin is not None else None,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, (
        f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    )
    return done
