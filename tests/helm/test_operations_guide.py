"""docs/operations.md: a runbook section for every alert, and only real configuration keys."""

from __future__ import annotations

import re

import yaml

from sparkpoint.config import all_keys
from tests.helm.artifacts import OPERATIONS_DOC, load_alert_rules
from tests.helm.chart import lint, render

RULES = load_alert_rules()


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    anchors = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*$", markdown, flags=re.MULTILINE):
        text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
        anchors.add(text.replace(" ", "-"))
    return anchors


def test_every_runbook_url_points_at_a_section_of_the_operations_guide() -> None:
    anchors = _anchors(OPERATIONS_DOC.read_text())
    missing = {
        rule["alert"]: rule["annotations"]["runbook_url"]
        for rule in RULES
        if rule["annotations"]["runbook_url"].partition("#")[2] not in anchors
    }
    assert missing == {}


def test_the_operations_guide_names_only_real_configuration_keys() -> None:
    keys = set(all_keys())
    named = set(re.findall(r"`((?:high-availability|state|execution|rest|heartbeat)\.[a-z.-]+)`",
                           OPERATIONS_DOC.read_text()))  # fmt: skip
    assert named, "the guide names no configuration key"
    assert named - keys == set()


def test_the_guides_values_file_renders_and_lints_clean() -> None:
    blocks = re.findall(r"```yaml\n(# prod-values\.yaml\n.*?)```", OPERATIONS_DOC.read_text(), re.S)
    assert len(blocks) == 1, "the guide's example values file is missing"
    values = yaml.safe_load(blocks[0])
    assert lint(values) == []
    rendered = render(values)
    assert rendered.one("StatefulSet")["spec"]["replicas"] == 3
    assert rendered.one("PrometheusRule") and rendered.one("ServiceMonitor")
