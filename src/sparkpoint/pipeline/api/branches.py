"""Fan-out: one stream — a source's records, or a keyed stage's outputs — used by
several branches, each with its own stages, keyed stages (their own uids and state) and
sink (docs/pipeline.md, "Fan-out").

Each branch is built as a pipeline of its own from the same stream — the same
``Pipeline`` object up to the source or the keyed stage they share — and
``with_branches`` puts them in one job: the main pipeline's keyed stages, then each
branch's own ones, which take the shared stage's outputs or the source's records
(``KeyedStage.input``; the source is read once an epoch). A branch's sink is written with the
main sink's transactions, as a side output's is (its uid names it: the sink operator's
``<sink uid>.<branch sink uid>``), so every branch commits exactly once with the job.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from sparkpoint.pipeline.api.stages import DataFrameStage

if TYPE_CHECKING:
    from sparkpoint.pipeline.api.builder import KeyedStage, Pipeline


#: ``KeyedStage.input`` of a branch's first stage that takes the source's records.
FROM_SOURCE = -1


def shared_stages(main: tuple[KeyedStage, ...], branch: tuple[KeyedStage, ...]) -> int:
    """How many keyed stages the two share (the same stage objects, from the same
    builder calls)."""
    n = 0
    while n < min(len(main), len(branch)) and _same(main[n], branch[n]):
        n += 1
    return n


def _same(a: KeyedStage, b: KeyedStage) -> bool:
    return a.uid == b.uid and a.function is b.function and a.key_selector is b.key_selector


def with_branches(main: Pipeline, branches: tuple[Pipeline, ...]) -> Pipeline:
    """``main`` with ``branches``' own keyed stages and sinks (checked as it goes)."""
    from sparkpoint.pipeline.api.builder import Pipeline

    job = main.job_id
    main.validate()
    stages = list(main.keyed_stages)
    side_sinks = list(main.side_sinks)
    for n, branch in enumerate(branches, start=1):
        which = f"branch {n}"
        if not isinstance(branch, Pipeline):
            raise TypeError(f"pipeline {job}: with_branches takes pipelines, got {branch!r}")
        branch.validate()
        if _sources(branch) != _sources(main):
            raise ValueError(
                f"pipeline {job}: {which} reads other sources than the main pipeline; "
                "build every branch from one stream of the same Pipeline"
            )
        if branch.job_id != job or branch.parallelism != main.parallelism:
            raise ValueError(f"pipeline {job}: {which} is of another pipeline or parallelism")
        own = branch.keyed_stages
        shared = shared_stages(tuple(stages[: len(main.keyed_stages)]), own)
        if shared == 0:
            check_source_branch(main, branch, which)
        if shared == len(own):
            raise ValueError(
                f"pipeline {job}: {which} has no keyed stage of its own after the shared "
                f"{own[shared - 1].uid!r}: key_by and process on it before its sink"
            )
        if branch.sink_uid == main.sink_uid or branch.sink_uid in (t for t, _ in side_sinks):
            raise ValueError(
                f"pipeline {job}: {which}'s sink uid {branch.sink_uid!r} is taken: give "
                "each branch's sink its own uid (.sink(s, uid=…)), its transactions are "
                "kept under it"
            )
        dataframe = [s.name for s in branch.post_process_stages if isinstance(s, DataFrameStage)]
        if dataframe:
            raise ValueError(
                f"pipeline {job}: {which} has the dataframe stage {dataframe[0]!r} before "
                "its sink; a branch takes per-record stages there"
            )
        for tag, sink in branch.side_sinks:
            if tag in (t for t, _ in side_sinks):
                raise ValueError(
                    f"pipeline {job}: {which}'s side output {tag!r} is the main "
                    "pipeline's (or another branch's) too: give it a tag of its own"
                )
            side_sinks.append((tag, sink))
        first = len(stages)
        for k, stage in enumerate(own[shared:]):
            start = FROM_SOURCE if shared == 0 else shared - 1
            stages.append(replace(stage, input=start if k == 0 else first + k - 1))
        last = stages[-1]
        stages[-1] = replace(last, branch=branch.sink_uid, stages_after=branch.post_process_stages)
        assert branch.sink_op is not None
        side_sinks.append((branch.sink_uid, branch.sink_op))
    more = tuple(stages[1:])
    combined = replace(main, more_keyed=more, side_sinks=tuple(side_sinks))
    combined.validate()
    return combined


def _sources(p: Pipeline) -> list[tuple[object, str, object, int]]:
    return [(i.source, i.uid, i.stages, i.side) for i in p.inputs]


def check_source_branch(main: Pipeline, branch: Pipeline, which: str) -> None:
    """A branch of the source's records (none of its keyed stages is the main
    pipeline's): one source, whose records carry time as the main pipeline's do."""
    job = main.job_id
    if main.merged:
        raise ValueError(
            f"pipeline {job}: {which} shares no keyed stage with the main pipeline, and "
            "the pipeline has several sources: such branches fan out from a keyed stage "
            "they share (build them from the same .process(…))"
        )
    if branch.watermark_strategy is not main.watermark_strategy:
        raise ValueError(
            f"pipeline {job}: {which} gives the source's records another event time than "
            "the main pipeline: call assign_timestamps once, on the stream both are built from"
        )
