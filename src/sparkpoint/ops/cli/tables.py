"""Tables of the status commands (rich), one small function per answer."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.table import Table

from sparkpoint.ops.cli.common import output_console


def _console() -> Console:
    return output_console()


def _ts(ms: int | None) -> str:
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def leader(data: dict[str, Any]) -> None:
    console = _console()
    lead = data.get("leader")
    if lead:
        lease = ""
        if "lease_age_ms" in lead:
            lease = (
                f", lease renewed {lead['lease_age_ms'] / 1000:.1f} s ago "
                f"({lead.get('renewals', 0)} renewals)"
            )
        console.print(
            f"leader [bold]{lead['instance_id']}[/bold] at {lead['address']}, term "
            f"{lead.get('term', lead.get('epoch'))}, since {_ts(lead['since_ms'])}{lease}"
        )
    else:
        console.print("[yellow]no leader[/yellow]")
    leader_id = lead["instance_id"] if lead else None
    table = Table("#", "instance", "role", "address", "node")
    for i, c in enumerate(data.get("contenders", [])):
        role = "leader" if c["instance_id"] == leader_id else "follower"
        table.add_row(str(i), c["instance_id"], role, c["address"], c["node"])
    console.print(table)


def jobs(data: list[dict[str, Any]]) -> None:
    table = Table("job", "status", "operators", "registered", "driver")
    for j in data:
        connected = j.get("connected")
        driver = "-" if connected is None else ("connected" if connected else "disconnected")
        table.add_row(
            j["job_id"], j["status"], str(j["operators"]), _ts(j["registered_ms"]), driver
        )
    _console().print(table)


def job(data: dict[str, Any]) -> None:
    console = _console()
    reason = f" ({data['status_reason']})" if data.get("status_reason") else ""
    console.print(f"job [bold]{data['job_id']}[/bold]: {data['status']}{reason}")
    table = Table("operator", "parallelism", "max parallelism", "keyed", "acknowledges")
    for op in data["graph"]["operators"]:
        table.add_row(
            op["uid"],
            str(op["parallelism"]),
            str(op["max_parallelism"]),
            str(op.get("keyed", False)),
            str(op.get("acknowledges", True)),
        )
    console.print(table)
    rescale = data.get("rescale")
    if rescale and rescale["state"] == "applied":
        console.print(
            f"last rescale: to {rescale['parallelism']}, applied after epoch {rescale['epoch']} "
            f"from checkpoint {rescale['checkpoint_id']} (request {rescale['request_id']})"
        )
    elif rescale:
        console.print(
            f"rescale to {rescale['parallelism']} {rescale['state']} (request "
            f"{rescale['request_id']})"
        )
    if data.get("options"):
        console.print("options: " + ", ".join(f"{k}={v}" for k, v in data["options"].items()))


def overview(data: dict[str, Any]) -> None:
    console = _console()
    counts = data["counts"]
    console.print(
        f"completed {counts['completed']}, failed {counts['failed']}, in progress "
        f"{counts['in_progress']}, restored {counts['restored']} (from {data.get('source')})"
    )
    table = Table(
        "id",
        "status",
        "savepoint",
        "triggered",
        "duration ms",
        "checkpointed",
        "full size",
        "path / reason",
    )
    rows = data.get("history") or []
    if not rows:
        rows = [
            {
                "id": p["checkpoint_id"],
                "status": "RETAINED",
                "is_savepoint": p["kind"] == "savepoint",
                "trigger_timestamp": p["trigger_timestamp_ms"],
                "end_to_end_duration": p["completion_timestamp_ms"] - p["trigger_timestamp_ms"],
                "state_size": p["state_size"],
                "checkpointed_size": p.get("checkpointed_size", p["state_size"]),
                "external_path": p["metadata_uri"],
            }
            for p in reversed(data.get("retained", []))
        ]
    for r in rows:
        table.add_row(
            str(r["id"]),
            r["status"],
            "yes" if r.get("is_savepoint") else "",
            _ts(r.get("trigger_timestamp")),
            str(r.get("end_to_end_duration") or "-"),
            str(_checkpointed(r)),
            str(r.get("state_size") or 0),
            r.get("external_path") or r.get("failure_message") or "",
        )
    console.print(table)


def _checkpointed(sizes: dict[str, Any]) -> int:
    """``checkpointed_size``; an answer from before it was reported wrote everything."""
    return int(sizes.get("checkpointed_size", sizes.get("state_size")) or 0)


def checkpoint(data: dict[str, Any]) -> None:
    console = _console()
    for key in ("id", "status", "is_savepoint", "retained"):
        console.print(f"{key}: {data.get(key)}")
    console.print(f"checkpointed size: {_checkpointed(data)} bytes (written by this checkpoint)")
    console.print(f"full size: {data.get('state_size') or 0} bytes (all the state it references)")
    console.print(f"external_path: {data.get('external_path')}")
    console.print(f"triggered: {_ts(data.get('trigger_timestamp'))}")
    console.print(f"completed: {_ts(data.get('completion_timestamp'))}")
    if data.get("failure_message"):
        console.print(f"failure: {data['failure_message']}")
    metadata = data.get("metadata") or {}
    if "error" in metadata:
        console.print(f"[red]_metadata unreadable:[/red] {metadata['error']}")
    subtasks = _subtask_sizes(data)
    if subtasks.row_count:
        console.print(subtasks)


def _subtask_sizes(data: dict[str, Any]) -> Table:
    """Per subtask: when it acknowledged (from the leader's recent history) and its sizes
    (from `_metadata` when retained, else from its acknowledgement)."""
    table = Table("operator", "subtask", "acknowledged", "checkpointed", "full size")
    acks = {(a["operator"], a["subtask"]): a for a in data.get("subtask_acks") or []}
    rows = [
        (op["uid"], sub["index"], sub)
        for op in (data.get("metadata") or {}).get("operators", [])
        for sub in op["subtasks"]
    ] or [(uid, index, ack) for (uid, index), ack in acks.items()]
    for uid, index, sizes in rows:
        ack = acks.get((uid, index))
        table.add_row(
            uid,
            str(index),
            _ts(ack["ack_timestamp"]) if ack else "-",
            str(_checkpointed(sizes)),
            str(sizes.get("state_size") or 0),
        )
    return table


def triggered(data: dict[str, Any]) -> None:
    _console().print(f"triggered {data['checkpoint_id']} of job {data['job_id']}")
