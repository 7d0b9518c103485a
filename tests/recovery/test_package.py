"""The package's public face, and what the executor-side writer drags in."""

from __future__ import annotations

import doctest
import subprocess
import sys

from sparkpoint import recovery
from sparkpoint.checkpoint import InlineStateHandle, KeyGroupRange, KeyGroupsStateHandle
from sparkpoint.recovery.reader import read_keyed_state


def test_all_is_curated_and_importable() -> None:
    assert sorted(recovery.__all__) == recovery.__all__
    for name in recovery.__all__:
        assert not name.startswith("_")
        assert getattr(recovery, name) is not None
    assert "plan_restore" in recovery.__all__ and "RestorePlan" in recovery.__all__


def test_the_state_writer_imports_nothing_heavy() -> None:
    # Spark executors import the writer for every snapshot: no Spark, HTTP, CLI or
    # ZooKeeper libraries may come with it.
    heavy = ["pyspark", "hdfs", "requests", "click", "rich", "kazoo", "prometheus_client"]
    code = (
        "import sys, sparkpoint.statefiles.writers; "
        f"print([m for m in {heavy!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_docstring_examples() -> None:
    from sparkpoint.recovery import plan, validation
    from sparkpoint.statefiles import writers

    for module in (writers, validation, plan):
        assert doctest.testmod(module).failed == 0


def test_an_empty_keyed_handle_reads_as_nothing() -> None:
    empty = KeyGroupsStateHandle(KeyGroupRange.empty(), (), InlineStateHandle("e", b""))
    assert list(read_keyed_state([empty])) == []


def test_writing_a_snapshot_imports_no_restore_logic() -> None:
    code = (
        "import sys, sparkpoint.statefiles.writers; "
        "print(sorted(m for m in sys.modules if m.startswith('sparkpoint.recovery')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
