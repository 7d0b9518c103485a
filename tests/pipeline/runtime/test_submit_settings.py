"""`sparkpoint run`'s settings: options over ``spark.sparkpoint.*`` Spark settings, and
clear errors for unknown keys, bad values and settings that contradict each other."""

from __future__ import annotations

import pytest

from sparkpoint.pipeline import Pipeline
from sparkpoint.pipeline.runtime.submit_settings import SettingsError, resolve
from sparkpoint.pipeline.runtime.submitted import load_pipeline

COORDINATORS = "coordinator-0:8081, coordinator-1:8081,coordinator-2:8081"


def test_spark_settings_are_the_options() -> None:
    settings = resolve(
        {},
        {
            "spark.master": "spark://spark-master:7077",  # Spark's own: not ours, ignored
            "spark.sparkpoint.coordinator": COORDINATORS,
            "spark.sparkpoint.token-file": "/etc/sparkpoint/driver-token",
            "spark.sparkpoint.ca-file": "/etc/sparkpoint/ca.crt",
            "spark.sparkpoint.interval-ms": "5000",
            "spark.sparkpoint.standby": "TRUE",
            "spark.sparkpoint.state-backend": "rocksdb",
        },
    )
    assert settings.addresses == [
        "coordinator-0:8081",
        "coordinator-1:8081",
        "coordinator-2:8081",
    ]
    assert (settings.token_file, settings.ca_file) == (
        "/etc/sparkpoint/driver-token",
        "/etc/sparkpoint/ca.crt",
    )
    assert (settings.interval_ms, settings.standby, settings.state_backend) == (
        5000,
        True,
        "rocksdb",
    )
    assert settings.source("interval_ms") == "spark.sparkpoint.interval-ms"


def test_options_given_win_over_spark_settings() -> None:
    settings = resolve(
        {"interval_ms": 2000, "standby": False, "coordinator": "c:1", "token_file": None},
        {
            "spark.sparkpoint.coordinator": COORDINATORS,
            "spark.sparkpoint.interval-ms": "5000",
            "spark.sparkpoint.standby": "true",
            "spark.sparkpoint.token-file": "/from/conf",
        },
    )
    assert (settings.coordinator, settings.interval_ms, settings.standby) == ("c:1", 2000, False)
    assert settings.token_file == "/from/conf"  # not given: the setting stands
    assert settings.source("interval_ms") == "--interval-ms"


@pytest.mark.parametrize(
    ("explicit", "conf", "names"),
    [
        ({}, {"spark.sparkpoint.coordinater": "c:1"}, ["spark.sparkpoint.coordinater"]),
        (
            {},
            {"spark.sparkpoint.coordinator": "c:1", "spark.sparkpoint.interval-ms": "5s"},
            ["spark.sparkpoint.interval-ms", "'5s'"],
        ),
        (
            {},
            {"spark.sparkpoint.coordinator": "c:1", "spark.sparkpoint.standby": "yes"},
            ["spark.sparkpoint.standby", "true or false"],
        ),
        ({"state_backend": "rocks", "checkpoint_dir": "/c"}, {}, ["--state-backend", "rocksdb"]),
        # A cluster's defaults name the coordinators; an embedded run's directory contradicts.
        (
            {"checkpoint_dir": "/tmp/ckpt"},
            {"spark.sparkpoint.coordinator": COORDINATORS},
            ["--checkpoint-dir contradicts spark.sparkpoint.coordinator"],
        ),
        (
            {},
            {"spark.sparkpoint.savepoint-dir": "/s", "spark.sparkpoint.coordinator": "c:1"},
            ["spark.sparkpoint.savepoint-dir contradicts spark.sparkpoint.coordinator"],
        ),
        (
            {"checkpoint_dir": "/c"},
            {"spark.sparkpoint.standby": "true"},
            ["spark.sparkpoint.standby needs --coordinator"],
        ),
        ({"token_file": "/t", "checkpoint_dir": "/c"}, {}, ["--token-file needs --coordinator"]),
        ({}, {}, ["--coordinator (spark.sparkpoint.coordinator)", "--checkpoint-dir"]),
        ({"coordinator": " , "}, {}, ["--coordinator names no coordinator address"]),
    ],
)
def test_clear_errors(explicit: dict, conf: dict, names: list[str]) -> None:
    with pytest.raises(SettingsError) as raised:
        resolve(explicit, conf)
    for name in names:
        assert name in str(raised.value)


def make_pipeline() -> Pipeline:
    from sparkpoint.examples.clicks import clicks_pipeline
    from sparkpoint.pipeline import ClickEventSource

    return clicks_pipeline("clicks", ClickEventSource(splits=1, users=1), "/tmp/unused")


NOT_A_PIPELINE = 42


def test_load_pipeline() -> None:
    here = __name__
    assert load_pipeline(f"{here}:make_pipeline").job_id == "clicks"  # a function of none
    for spec, message in [
        ("no_colon", "is not MODULE:ATTRIBUTE"),
        (f"{here}:", "is not MODULE:ATTRIBUTE"),
        ("no_such_module_here:pipeline", "no module 'no_such_module_here'"),
        (f"{here}:missing", "has no 'missing'"),
        (f"{here}:NOT_A_PIPELINE", "is a int, not a sparkpoint Pipeline"),
    ]:
        with pytest.raises(ValueError, match=message):
            load_pipeline(spec)
