"""`sparkpoint package PIPELINE`: the job's virtualenv as one archive (venv-pack) for
``spark-submit --archives``, and the spark-submit line that runs the pipeline with it.

The archive holds the virtualenv this command runs in (or ``--venv``): sparkpoint, its
dependencies and the job's, but not PySpark and py4j — executors import the cluster's own
(Spark puts them on their path), which is the same version, since sparkpoint pins it.
Like any venv-pack archive it links to the Python interpreter the virtualenv was made
from, which must exist at the same path on every Spark host (docs/production.md).
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import click

#: Where spark-submit unpacks the archive, in each container's working directory.
ENVIRONMENT = "environment"
#: Left out of the archive: the cluster's Spark brings its own.
FROM_THE_CLUSTER = ("pyspark", "py4j")
DEPLOY_MODES = ("client", "cluster")


@dataclass(frozen=True)
class PipelineRef:
    """``my_pipeline.py:pipeline`` (a file, shipped with ``--py-files``) or
    ``mypackage.jobs:pipeline`` (a module installed in the virtualenv)."""

    module: str
    attribute: str
    file: Path | None

    @classmethod
    def parse(cls, spec: str) -> PipelineRef:
        where, sep, attribute = spec.rpartition(":")
        if not sep or not where or not attribute:
            raise click.BadParameter(
                f"{spec!r} is not FILE.py:ATTRIBUTE or MODULE:ATTRIBUTE", param_hint="PIPELINE"
            )
        if not where.endswith(".py"):
            return cls(where, attribute, None)
        file = Path(where)
        if not file.is_file():
            raise click.BadParameter(f"no file {where}", param_hint="PIPELINE")
        return cls(file.stem, attribute, file)  # as given: the line is run from here

    @property
    def spec(self) -> str:
        return f"{self.module}:{self.attribute}"


def site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python*/site-packages"))
    if len(found) != 1:
        raise click.ClickException(f"{venv} is not a virtualenv with one Python's packages")
    return found[0]


def main_file(venv: Path) -> Path:
    """sparkpoint's ``__main__.py`` in ``venv``: spark-submit's main file."""
    main = site_packages(venv) / "sparkpoint" / "__main__.py"
    if not main.is_file():
        raise click.ClickException(
            f"sparkpoint is not installed in {venv} (or only as an editable install, which "
            "cannot be packed): pip install 'sparkpoint[pipeline]' into it"
        )
    return main


def pack(venv: Path, output: Path) -> Path:
    import venv_pack

    lib = site_packages(venv).relative_to(venv)
    # fnmatch's * crosses "/": each pattern takes the package and its dist-info whole.
    filters = [("exclude", f"{lib}/{name}*") for name in FROM_THE_CLUSTER]
    try:
        venv_pack.pack(prefix=str(venv), output=str(output), force=True, filters=filters)
    except venv_pack.VenvPackException as exc:
        raise click.ClickException(f"venv-pack: {exc}") from None
    return output


def submit_command(
    ref: PipelineRef,
    archive: Path,
    venv: Path,
    *,
    master: str,
    deploy_mode: str,
    run_args: tuple[str, ...],
) -> list[str]:
    """The spark-submit line: executors (and, in cluster mode, the driver) run the
    archive's Python; in client mode the driver runs ``venv``'s own."""
    command = ["spark-submit", "--master", master, "--deploy-mode", deploy_mode]
    command += ["--archives", f"{archive}#{ENVIRONMENT}"]
    command += ["--conf", f"spark.pyspark.python=./{ENVIRONMENT}/bin/python"]
    if deploy_mode == "client":
        command += ["--conf", f"spark.pyspark.driver.python={venv}/bin/python"]
    if ref.file is not None:
        command += ["--py-files", str(ref.file)]
    return [*command, str(main_file(venv)), "run", ref.spec, *run_args]


@click.command("package", context_settings={"ignore_unknown_options": True})
@click.argument("pipeline")
@click.argument("run_args", nargs=-1, type=click.UNPROCESSED, metavar="[RUN OPTIONS]...")
@click.option(
    "--venv",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="The virtualenv to pack (default: the one this command runs in).",
)
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("pipeline-env.tar.gz"),
    show_default=True,
    help="The archive to write.",
)
@click.option("--master", default="spark://spark-master:7077", show_default=True)
@click.option("--deploy-mode", type=click.Choice(DEPLOY_MODES), default="client")
def package_command(
    pipeline: str,
    run_args: tuple[str, ...],
    venv: Path | None,
    output: Path,
    master: str,
    deploy_mode: str,
) -> None:
    """Pack the virtualenv for PIPELINE (my_pipeline.py:pipeline, or
    mypackage.jobs:pipeline installed in it) and print the spark-submit line that runs
    it; RUN OPTIONS after PIPELINE (e.g. --coordinator …) go to `sparkpoint run`."""
    if deploy_mode == "cluster" and master.startswith("spark://"):
        raise click.UsageError(
            "--deploy-mode cluster: a Spark standalone master runs Python applications in "
            "client mode only (Spark's rule); use client mode there, cluster mode on YARN "
            "or Kubernetes"
        )
    ref = PipelineRef.parse(pipeline)
    venv = (venv or Path(sys.prefix)).resolve()
    main_file(venv)  # before packing: fail fast when sparkpoint is not in it
    archive = pack(venv, output)
    click.echo(f"packed {venv} into {archive}", err=True)
    command = submit_command(
        ref, archive, venv, master=master, deploy_mode=deploy_mode, run_args=run_args
    )
    click.echo(shlex.join(command))
