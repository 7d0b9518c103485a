"""`sparkpoint restore plan`, run as the command line runs it."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from sparkpoint.checkpoint import JobGraph, OperatorSpec
from sparkpoint.ops.cli.main import main
from sparkpoint.recovery import RestorePlan, plan_restore
from sparkpoint.recovery.loading import load_checkpoint
from sparkpoint.storage import CheckpointStorage
from tests.recovery.support import write_keyed_checkpoint

STATE = {f"k{i}": b"x" * 50 for i in range(500)}


def _checkpoint(tmp_path: Path) -> tuple[CheckpointStorage, str]:
    storage = CheckpointStorage(str(tmp_path / "ckpt"), inline_threshold=0)
    _, committed = write_keyed_checkpoint(storage.init_checkpoint("clicks", 3), STATE)
    return storage, str(Path(committed.uri).parent)


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["restore", "plan", *args], terminal_width=120)
    return result.exit_code, result.output


def test_json_plan_is_the_library_plan(tmp_path: Path) -> None:
    storage, chk = _checkpoint(tmp_path)
    code, out = _run(chk, "--parallelism", "count=5", "--json")
    assert code == 0, out
    expected = plan_restore(
        load_checkpoint(storage, chk).checkpoint,
        JobGraph("clicks", (OperatorSpec("count", 5, 128, keyed=True),)),
    )
    assert RestorePlan.from_dict(json.loads(out)) == expected


def test_table_names_operators_and_rescaling(tmp_path: Path) -> None:
    _, chk = _checkpoint(tmp_path)
    code, out = _run(str(Path(chk).parent), "-p", "4", "--subtasks")
    assert code == 0, out
    assert "from checkpoint 3 of job clicks" in out
    assert "3 → 4" in out
    assert "[32, 42] ← count-0-0" in out and "[43, 63] ← count-1-0" in out


def test_validation_errors_name_operator_and_rule(tmp_path: Path) -> None:
    _, chk = _checkpoint(tmp_path)
    code, out = _run(chk, "-p", "count=2", "--max-parallelism", "count=256")
    assert code == 1
    assert "operator 'count' [max-parallelism-changed]" in out


def test_a_graph_file_and_non_restored_state(tmp_path: Path) -> None:
    _, chk = _checkpoint(tmp_path)
    graph = tmp_path / "graph.json"
    graph.write_text(json.dumps(JobGraph("clicks", (OperatorSpec("other", 2, 128),)).to_dict()))
    code, out = _run(chk, "--graph", str(graph))
    assert code == 1 and "operator 'count' [operator-missing]" in out
    code, out = _run(chk, "--graph", str(graph), "--allow-non-restored-state", "--json")
    assert code == 0, out
    assert json.loads(out)["non_restored"] == ["count"]


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    _, chk = _checkpoint(tmp_path)
    code, out = _run(chk, "-p", "nope=2")
    assert code == 2 and "operator 'nope' is not in the job graph" in out
    code, out = _run(chk, "-p", "count=zero")
    assert code == 2 and "'count=zero' is not UID=N or N" in out
    code, out = _run(str(tmp_path / "missing"))
    assert code == 1 and "no checkpoint or savepoint at" in out
