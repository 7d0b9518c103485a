"""Request and reply bodies of the HTTP API (docs/api.md), as pydantic models.

They give the OpenAPI document its schemas and refuse malformed bodies with a 422 before
any handler runs. Domain checks (a valid graph, state handles) happen in the handlers, so
there is one source of truth for each rule.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class ErrorReply(BaseModel):
    error: str = Field(description="Machine-readable code, e.g. duplicate_ack.")
    message: str = Field(description="What is wrong, for a person.")


class OperatorModel(BaseModel):
    uid: str
    name: str = ""
    parallelism: int
    max_parallelism: int
    keyed: bool = False
    acknowledges: bool = True


class GraphModel(BaseModel):
    """``JobGraph.to_dict()``."""

    job_id: str
    operators: list[OperatorModel]


class RegisterRequest(BaseModel):
    graph: GraphModel
    checkpoint_config: dict[str, Any] = Field(
        default_factory=dict,
        description='CheckpointingOptions by field name or Flink key, e.g. {"interval_ms": 500}.',
    )
    replace: bool = False
    standby: bool = Field(
        False,
        description="Register as the job's warm standby driver run (the job must be running "
        "with the same graph and options; otherwise this run becomes the active one).",
    )
    probe_address: str = Field(
        "",
        max_length=300,
        pattern=r"^$|^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}$",
        description="host:port where the driver process accepts liveness probes: when the "
        "run is silent, a refused connection there grants its standby at once.",
    )


class RegisterReply(BaseModel):
    job_id: str
    leader_term: int = Field(description="The leader's term (fencing number).")
    leader_epoch: int = Field(
        description="Deprecated alias of leader_term, removed in the next release.",
        deprecated=True,
    )
    status: str
    notification_seq: int = Field(
        0, description="The job's last notification seq: a new driver run heartbeats after it."
    )
    run_id: str = Field(
        description="This driver run's id: every later heartbeat, ack, decline and restore-plan "
        "request carries it; a newer registration supersedes it."
    )
    role: Literal["active", "standby"] = Field(
        "active", description="standby: wait, heartbeating, until a heartbeat says active."
    )


class DriverProgress(BaseModel):
    """How the pipeline keeps up, as its driver sees it (the UI's Jobs page)."""

    epoch: int = Field(ge=0, description="The pipeline's last finished epoch (micro-batch).")
    records: int = Field(ge=0, description="Records this driver run processed so far.")
    records_per_s: float = Field(ge=0, description="Recent rate (records per second).")
    source_lag: int | None = Field(
        None, ge=0, description="Records or messages waiting in the source, when it says."
    )


class HeartbeatRequest(BaseModel):
    after_seq: int = Field(0, ge=0, description="The last notification seq seen (0 at start).")
    run_id: str = Field(
        min_length=1,
        max_length=128,
        description="The driver run (from registration); a superseded run is refused with 409.",
    )
    progress: DriverProgress | None = Field(
        None, description="Optional: the pipeline's progress, shown on the UI's Jobs page."
    )


class NotificationModel(BaseModel):
    seq: int
    type: Literal["trigger", "complete", "abort"]
    checkpoint_id: int
    kind: Literal["checkpoint", "savepoint"]
    timestamp_ms: int
    reason: str | None = None
    stop: bool = False
    directory: str | None = Field(None, description="Triggers: where state files go.")
    metadata_uri: str | None = Field(None, description="Completions: the committed _metadata.")


class RescaleInstruction(BaseModel):
    parallelism: int
    request_id: str = ""


class HeartbeatReply(BaseModel):
    leader_term: int = Field(description="The leader's term (fencing number).")
    leader_epoch: int = Field(
        description="Deprecated alias of leader_term, removed in the next release.",
        deprecated=True,
    )
    job_status: str
    notifications: list[NotificationModel]
    role: Literal["active", "standby"] = Field(
        "active",
        description="The caller's role; a standby run that reads active was granted the job: "
        "it restores and heartbeats after notification_seq.",
    )
    notification_seq: int = Field(0, description="The job's last notification seq.")
    rescale: RescaleInstruction | None = Field(
        None,
        description="An active run's: the parallelism to run at, and the pending rescale "
        "request to report applied (request_id empty when none is pending).",
    )


class ReleaseRequest(BaseModel):
    run_id: str = Field(min_length=1, max_length=128, description="The driver run that ends.")


class SubtaskStateModel(BaseModel):
    """Handle dicts exactly as ``checkpoint.serde.keyed_to_dict`` / ``operator_to_dict``."""

    keyed: list[dict[str, Any]] = Field(default_factory=list)
    operator: list[dict[str, Any]] = Field(default_factory=list)


class AckModel(BaseModel):
    operator_uid: str
    subtask: int
    state: SubtaskStateModel = Field(default_factory=SubtaskStateModel)


class AcksRequest(BaseModel):
    acks: list[AckModel]
    run_id: str = Field(
        min_length=1,
        max_length=128,
        description="The driver run (from registration); a superseded run is refused with 409.",
    )


class AckReply(BaseModel):
    checkpoint_id: int
    status: Literal["pending", "completed", "failed"]
    remaining: int
    reason: str | None = Field(None, description="Why finalisation failed (status failed).")


class DeclineRequest(BaseModel):
    operator_uid: str
    subtask: int
    reason: str = ""
    run_id: str = Field(
        min_length=1,
        max_length=128,
        description="The driver run (from registration); a superseded run is refused with 409.",
    )


class RestorePlanRequest(BaseModel):
    graph: GraphModel
    pointer: str | None = None
    allow_non_restored_state: bool = False
    restore_mode: Literal["claim", "no-claim"] | None = Field(
        None,
        description="Who owns the restored checkpoint's files: 'claim' (only a checkpoint "
        "of the job itself, in its own checkpoint directory) or 'no-claim' (the first "
        "checkpoint after the restore references none of them). Default: 'claim' for the "
        "job's latest checkpoint (no pointer), 'no-claim' for a pointer.",
    )
    run_id: str = Field(
        min_length=1,
        max_length=128,
        description="The driver run (from registration); a superseded run is refused with 409.",
    )


class RestorePlanReply(BaseModel):
    restored: dict[str, Any] | None
    plan: dict[str, Any] | None


class SavepointRequest(BaseModel):
    target_dir: str | None = None
    stop: bool = False
    run_id: str | None = Field(
        None,
        max_length=128,
        description="From a driver: its run id (a superseded run is refused with 409); "
        "omitted by operators.",
    )


class TriggerRequest(BaseModel):
    run_id: str | None = Field(
        None,
        max_length=128,
        description="From a driver: its run id (a superseded run is refused with 409); "
        "omitted by operators.",
    )


class TriggerReply(BaseModel):
    checkpoint_id: int


class ProbeLeader(BaseModel):
    instance_id: str | None = None
    address: str | None = None


class ProbeReply(BaseModel):
    status: str
    detail: str = ""
    #: On /readyz: who leads, as this replica knows it. Open like the probe itself, so
    #: `sparkpoint coordinator check` (helm test) needs no token.
    leader: ProbeLeader | None = None
