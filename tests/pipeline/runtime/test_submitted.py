"""A pipeline file run by the real spark-submit with sparkpoint's ``__main__.py`` as the
main file (`sparkpoint run my_pipeline:pipeline`), its settings from the cluster's
``spark-defaults.conf`` and ``--conf`` as well as its own options; output exactly once.
Settings that contradict each other stop it before any job, naming both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import sparkpoint
from sparkpoint.examples.clicks import expected_output
from sparkpoint.pipeline import ClickEventSource, TransactionalFileSink

pytestmark = pytest.mark.slow

PIPELINE_FILE = """\
from sparkpoint.examples.clicks import clicks_pipeline
from sparkpoint.pipeline import ClickEventSource

def source():
    return ClickEventSource(splits=2, users=40, records_per_epoch=100, records_per_split=150)

pipeline = clicks_pipeline("clicks", source(), {output!r}, parallelism=2)
"""


def spark_submit(
    tmp_path: Path, conf_dir: Path, submit_args: list[str], run_args: list[str]
) -> subprocess.CompletedProcess[str]:
    venv_bin = Path(sys.executable).parent
    main_file = Path(sparkpoint.__file__).parent / "__main__.py"
    env = {
        **os.environ,
        "SPARK_CONF_DIR": str(conf_dir),
        "PATH": f"{venv_bin}{os.pathsep}{os.environ['PATH']}",
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    env.pop("PYSPARK_PYTHON", None)  # the run fills it in: this Python
    return subprocess.run(
        [str(venv_bin / "spark-submit"), "--master", "local[2]",
         "--py-files", str(tmp_path / "my_pipeline.py"), *submit_args,
         str(main_file), "run", "my_pipeline:pipeline", *run_args],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def test_spark_submit_runs_a_pipeline_file_with_settings_from_spark_conf(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (tmp_path / "my_pipeline.py").write_text(PIPELINE_FILE.format(output=str(out)))
    # The cluster's defaults (the suite's quick-JVM ones kept) say where checkpoints go.
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    suite_defaults = Path(os.environ["SPARK_CONF_DIR"]) / "spark-defaults.conf"
    (conf_dir / "spark-defaults.conf").write_text(
        (suite_defaults.read_text() if suite_defaults.exists() else "")
        + f"spark.sparkpoint.checkpoint-dir {tmp_path / 'ckpt'}\n"
        + "spark.sparkpoint.interval-ms 60000\n"
    )
    progress = tmp_path / "progress.jsonl"
    done = spark_submit(
        tmp_path, conf_dir,
        ["--conf", f"spark.sparkpoint.progress={progress}"],
        ["--interval-ms", "300"],  # the option wins over the defaults' minute
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert "job clicks: finished" in done.stdout
    reports = [json.loads(line) for line in progress.read_text().splitlines()]
    assert reports[-1]["event"] == "finished"
    # Checkpoints every 300 ms, not every minute: several completed before the last one.
    assert len({r["last_completed"] for r in reports if r["last_completed"]}) >= 2
    assert (tmp_path / "ckpt" / "clicks").is_dir()
    records = ClickEventSource(
        splits=2, users=40, records_per_epoch=100, records_per_split=150
    ).all_records()
    committed = TransactionalFileSink(str(out)).committed_lines()
    assert sorted(committed) == sorted(expected_output(records))

    # The same defaults with the coordinators named too: refused before any job runs.
    refused = spark_submit(
        tmp_path, conf_dir, ["--conf", "spark.sparkpoint.coordinator=127.0.0.1:1"], []
    )
    # (spark-submit passes the Python driver's stderr on as its stdout)
    assert refused.returncode == 2, refused.stdout[-2000:] + refused.stderr[-4000:]
    assert "spark.sparkpoint.checkpoint-dir contradicts spark.sparkpoint.coordinator" in (
        refused.stdout
    )
