"""The pipeline keeps to its side of the package boundaries (docs/architecture.md §2): it
talks to the service only through ``sparkpoint.client``, and leaves kazoo, click and
hdfs to their packages."""

from __future__ import annotations

from tests.service.test_boundaries import imported_roots


def test_pipeline_imports_no_kazoo_click_hdfs_or_service() -> None:
    for module, names in imported_roots("pipeline").items():
        roots = {n.split(".")[0] for n in names}
        assert not roots & {"kazoo", "click", "hdfs"}, (module, roots)
        inside = [n for n in names if n.startswith(("sparkpoint.service", "sparkpoint.ha"))]
        assert not inside, (module, inside)


def test_only_the_pipeline_imports_pyspark() -> None:
    """...and the examples, which are pipelines as users write them (a DataFrame stage is
    PySpark code)."""
    from tests.service.test_boundaries import SRC

    runtime_and_users = {"pipeline", "examples"}
    for package in sorted(p.name for p in SRC.iterdir() if p.is_dir()):
        if package in runtime_and_users:
            continue
        if package.startswith("__"):
            continue
        for module, names in imported_roots(package).items():
            assert not [n for n in names if n.split(".")[0] == "pyspark"], module
