"""`sparkpoint package`: a virtualenv packed by venv-pack (sparkpoint in, the cluster's
PySpark and py4j out) and the spark-submit line that runs the pipeline with it."""

from __future__ import annotations

import shlex
import subprocess
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from sparkpoint.ops.cli.main import main
from tests.support.pipeline_venv import ROOT, pipeline_venv

SITE = "lib/python3.11/site-packages"


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # sparkpoint alone (its dependencies are not what this test is about), and PySpark
    # and py4j, which the archive must leave to the cluster.
    home = tmp_path_factory.mktemp("venv")
    return pipeline_venv(home / "env", "pyspark==4.3.0", "py4j")


def test_package_packs_the_venv_and_prints_spark_submit(venv: Path, tmp_path: Path) -> None:
    pipeline_file = tmp_path / "my_pipeline.py"
    pipeline_file.write_text("pipeline = None\n")
    archive = tmp_path / "pipeline-env.tar.gz"
    result = CliRunner().invoke(
        main,
        ["package", f"{pipeline_file}:pipeline", "--venv", str(venv), "--output", str(archive),
         "--master", "spark://spark-master:7077", "--coordinator", "c0:8081,c1:8081"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output + result.stderr
    venv = venv.resolve()
    assert shlex.split(result.stdout) == [
        "spark-submit", "--master", "spark://spark-master:7077", "--deploy-mode", "client",
        "--archives", f"{archive}#environment",
        "--conf", "spark.pyspark.python=./environment/bin/python",
        "--conf", f"spark.pyspark.driver.python={venv}/bin/python",
        "--py-files", str(pipeline_file),
        f"{venv}/{SITE}/sparkpoint/__main__.py", "run", "my_pipeline:pipeline",
        "--coordinator", "c0:8081,c1:8081",
    ]  # fmt: skip
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert f"{SITE}/sparkpoint/__main__.py" in names
    assert not [n for n in names if n.startswith((f"{SITE}/pyspark", f"{SITE}/py4j"))]
    # Unpacked where a container's working directory would be, its Python has sparkpoint.
    unpacked = tmp_path / "container" / "environment"
    unpacked.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        tar.extractall(unpacked, filter="tar")
    found = subprocess.run(
        [str(unpacked / "bin" / "python"), "-c", "import sparkpoint; print(sparkpoint.__file__)"],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    ).stdout  # fmt: skip
    assert found.startswith(str(unpacked / SITE / "sparkpoint"))


def test_package_refuses_what_cannot_work(venv: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    cluster_on_standalone = runner.invoke(
        main, ["package", "jobs:pipeline", "--venv", str(venv), "--deploy-mode", "cluster",
               "--master", "spark://spark-master:7077"],
    )  # fmt: skip
    assert cluster_on_standalone.exit_code == 2
    assert "client mode only" in cluster_on_standalone.stderr
    # This checkout's own environment has sparkpoint as an editable install.
    editable = runner.invoke(
        main, ["package", "jobs:pipeline", "--venv", str(ROOT / ".venv"),
               "--output", str(tmp_path / "x.tar.gz")],
    )  # fmt: skip
    assert editable.exit_code == 1
    assert "editable" in editable.stderr
    assert not (tmp_path / "x.tar.gz").exists()
    no_file = runner.invoke(main, ["package", "missing.py:pipeline", "--venv", str(venv)])
    assert no_file.exit_code == 2
    assert "no file missing.py" in no_file.stderr
