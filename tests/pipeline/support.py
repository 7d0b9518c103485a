"""Shared pieces of the pipeline tests: the clicks job over a bounded generator, and
its offline expected output."""

from __future__ import annotations

from pathlib import Path

from sparkpoint.pipeline import ClickEventSource, Pipeline
from sparkpoint.pipeline.examples.clicks import clicks_pipeline, expected_output

SPLITS = 4
USERS = 120
RECORDS_PER_SPLIT = 600


def source(records_per_epoch: int = 400) -> ClickEventSource:
    return ClickEventSource(
        splits=SPLITS,
        users=USERS,
        records_per_epoch=records_per_epoch,
        records_per_split=RECORDS_PER_SPLIT,
    )


def expected() -> list[str]:
    return expected_output(source().all_records())


def pipeline(
    job_id: str, out: Path | str, parallelism: int, records_per_epoch: int = 400
) -> Pipeline:
    """The clicks job writing to ``out`` (a path or any URI storage knows)."""
    return clicks_pipeline(job_id, source(records_per_epoch), str(out), parallelism=parallelism)


def committed(p: Pipeline) -> list[str]:
    assert p.sink_op is not None
    return sorted(p.sink_op.committed_lines())
