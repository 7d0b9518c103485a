"""The Prometheus alert rules: valid, unit-tested with promtool, complete, and reading only
metrics the service exports."""

from __future__ import annotations

import pytest
import yaml

from tests.helm.artifacts import (
    ALERTS,
    RULE_TESTS,
    exported_series,
    load_alert_rules,
    metric_names,
    run_tool,
)

RULES = load_alert_rules()
GROUPS = sorted({rule["group"] for rule in RULES})


def test_promtool_accepts_the_rules_file() -> None:
    done = run_tool("promtool", "check", "rules", ALERTS)
    assert f"SUCCESS: {len(RULES)} rules found" in done.stdout


@pytest.mark.parametrize("group", GROUPS)
def test_promtool_unit_tests_pass(group: str) -> None:
    test_file = RULE_TESTS / f"{group.removeprefix('sparkpoint-')}.test.yaml"
    assert test_file.exists(), f"alert group {group} has no promtool test file {test_file}"
    done = run_tool("promtool", "test", "rules", test_file)
    assert "SUCCESS" in done.stdout


def test_every_alert_is_tested_firing_and_not_firing() -> None:
    firing: set[str] = set()
    quiet: set[str] = set()
    for test_file in RULE_TESTS.glob("*.test.yaml"):
        for case in yaml.safe_load(test_file.read_text())["tests"]:
            for check in case.get("alert_rule_test", []):
                (firing if check.get("exp_alerts") else quiet).add(check["alertname"])
    names = {rule["alert"] for rule in RULES}
    assert names - firing == set(), "alerts never seen firing in a promtool test"
    assert names - quiet == set(), "alerts never seen staying quiet in a promtool test"


EXPECTED_ALERTS = {
    "SparkpointNoLeader",
    "SparkpointReplicaDown",
    "SparkpointTooFewReplicas",
    "SparkpointAbsent",
    "SparkpointMultipleLeaders",
    "SparkpointFrequentLeaderChanges",
    "SparkpointZooKeeperDisconnected",
    "SparkpointFencedWrites",
    "SparkpointCheckpointsFailing",
    "SparkpointCheckpointOverdue",
    "SparkpointCheckpointDurationHigh",
    "SparkpointRestoreFellBack",
    "SparkpointOrphanedCheckpointFilesGrowing",
    "SparkpointUndecodableCheckpointPointer",
}


def test_the_rules_file_has_the_alerts_operators_are_promised() -> None:
    assert {rule["alert"] for rule in RULES} == EXPECTED_ALERTS


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule["alert"])
def test_each_alert_has_severity_summary_description_and_runbook(rule: dict) -> None:
    assert rule["labels"]["severity"] in {"critical", "warning"}
    annotations = rule["annotations"]
    for key in ("summary", "description"):
        assert "{{ $labels." in annotations[key], f"{key} does not name the alert's labels"
    assert annotations["runbook_url"] == f"docs/operations.md#{rule['alert'].lower()}"


def test_rules_read_only_metrics_the_service_exports() -> None:
    exported = exported_series()
    for rule in RULES:
        used = metric_names(rule["expr"])
        assert used, f"{rule['alert']} reads no sparkpoint metric"
        assert used <= set(exported), f"{rule['alert']} reads unknown {used - set(exported)}"


def test_rules_group_per_job_alerts_by_the_job_id_label() -> None:
    """Per-job metrics label the pipeline's job id `job_id` (not `job`, which is
    Prometheus' own). Rules on those metrics must aggregate by `job_id`."""
    exported = exported_series()
    assert all("job" not in labels for labels in exported.values())
    for rule in RULES:
        per_job = any("job_id" in exported[name] for name in metric_names(rule["expr"]))
        if per_job:
            assert "job_id" in rule["expr"], rule["alert"]
