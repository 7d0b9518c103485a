"""What every side of bench/state_bench.py shares: the workload's constants, where a key
comes from, and how sizes and memory are measured."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

RECORDS_PER_EPOCH = 200_000  # a timed epoch (and one Flink checkpoint interval)
FILL_RECORDS = 2_000_000  # a fill epoch: the state is filled in few, large epochs
SPLITS = 4
PARALLELISM = 4
TIMED = 3
#: Timed checkpoints after the base one (sparkpoint's side): enough to include the
#: compactions that rewrite a store's files every few checkpoints.
INCREMENTAL_CHECKPOINTS = 8
PAYLOAD = 64


def hot_space(keys: int, hot: bool) -> int:
    """How many keys a timed epoch draws from: 1 % of them (hot) or all."""
    return max(1, keys // 100) if hot else keys


def tree_peak_rss() -> int:
    """Sum of VmHWM over this process and its descendants (bytes)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
    total, todo = 0, [int(Path("/proc/self").resolve().name)]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


def files(path: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """Every file under ``path`` with its status; files and directories that vanish while
    walking (a store compacting, a checkpoint discarded) are skipped."""
    for root, _dirs, names in os.walk(path):
        for name in names:
            path = Path(root, name)
            try:
                status = path.stat()
            except OSError:
                continue
            yield path, status


def du(path: Path) -> int:
    return sum(status.st_size for _path, status in files(path))


def report(result: dict[str, Any]) -> None:
    """The one line a role process hands back to the orchestrator."""
    result.setdefault("peak_rss_bytes", tree_peak_rss())
    print("RESULT " + json.dumps(result), flush=True)
