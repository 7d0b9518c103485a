"""The Grafana dashboard: well-formed, every query valid PromQL over metrics the service
really exports, and covering what operators watch."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from tests.helm.artifacts import (
    DASHBOARD,
    exported_series,
    load_alert_rules,
    metric_names,
    run_tool,
    unknown_selector_labels,
)

BOARD: dict[str, Any] = json.loads(DASHBOARD.read_text())
PANELS = [p for p in BOARD["panels"] if p["type"] != "row"]


def _queries() -> dict[str, str]:
    queries = {
        f"{panel['title']} [{target['refId']}]": target["expr"]
        for panel in PANELS
        for target in panel["targets"]
    }
    for variable in BOARD["templating"]["list"]:
        if variable["type"] == "query":
            queries[f"${variable['name']}"] = variable["query"]["query"]
    return queries


QUERIES = _queries()

# What Grafana substitutes before a query reaches Prometheus.
_GRAFANA_VARIABLES = {
    "$__rate_interval": "2m",
    "$__range": "6h",
    "$pipeline": ".*",
    "$namespace": ".*",
    "$job": "sparkpoint",
}


def _as_prometheus_sees_it(expr: str) -> str:
    for variable, value in _GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"unexpected Grafana variable in {expr}"
    return expr


def test_the_dashboard_is_well_formed() -> None:
    assert BOARD["uid"] == "sparkpoint-coordinators"
    ids = [panel["id"] for panel in BOARD["panels"]]
    assert len(ids) == len(set(ids))
    for panel in PANELS:
        assert panel["targets"], f"panel {panel['title']} has no query"
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24


def test_every_query_reads_only_metrics_the_service_exports() -> None:
    exported = set(exported_series())
    for name, expr in QUERIES.items():
        used = metric_names(expr)
        assert used, f"{name} reads no sparkpoint metric"
        assert used <= exported, f"{name} reads unknown {used - exported}"
        assert unknown_selector_labels(expr) == set(), name


def test_the_rules_select_only_labels_their_series_carry() -> None:
    for rule in load_alert_rules():
        assert unknown_selector_labels(rule["expr"]) == set(), rule["alert"]


def test_every_query_is_valid_promql(tmp_path: Path) -> None:
    """promtool has no expression checker; it parses recording rules, so each query
    becomes one."""
    label_values = re.compile(r"^label_values\((.+),\s*[a-z_]+\)$")
    rules = []
    for index, query in enumerate(QUERIES.values()):
        expr = _as_prometheus_sees_it(query)
        match = label_values.match(expr)
        rules.append({"record": f"dashboard:query_{index}", "expr": match[1] if match else expr})
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    run_tool("promtool", "check", "rules", path)


def test_the_dashboard_shows_what_operators_watch() -> None:
    used = set().union(*map(metric_names, QUERIES.values()))
    assert {
        "sparkpoint_is_leader",  # which replica leads
        "sparkpoint_leader_term",
        "sparkpoint_leader_changes_total",  # failovers
        "sparkpoint_checkpoint_duration_seconds_bucket",
        "sparkpoint_last_completed_checkpoint_size_bytes",
        "sparkpoint_checkpoints_completed_total",
        "sparkpoint_checkpoints_failed_total",
        "sparkpoint_last_completed_checkpoint_timestamp_seconds",  # time since the last one
        "sparkpoint_zookeeper_connection_state",
    } <= used
