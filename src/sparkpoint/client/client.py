"""CoordinatorClient: the pipeline's and the CLI's way to talk to the coordinators.

>>> client = CoordinatorClient(["coord-0:8081", "coord-1:8081"])  # doctest: +SKIP
>>> job = client.register_job(graph, {"interval_ms": 500})        # doctest: +SKIP
>>> beat = client.heartbeat(graph.job_id, after_seq=0)            # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from sparkpoint.checkpoint import JobGraph, OperatorSubtaskState
from sparkpoint.client.credentials import Credentials
from sparkpoint.client.models import Heartbeat, RestoreResponse
from sparkpoint.client.transport import Transport, raise_for_error
from sparkpoint.recovery import serde


def _job(job_id: str) -> str:
    return quote(job_id, safe="")


def state_to_dict(state: OperatorSubtaskState) -> dict[str, Any]:
    return {
        "keyed": [serde.keyed_to_dict(h) for h in state.keyed],
        "operator": [serde.operator_to_dict(h) for h in state.operator],
    }


class CoordinatorClient:
    """Talks to whichever replica leads; see docs/api.md for every call's contract.

    ``addresses``: ``host:port`` or ``http://host:port`` of any replicas. Idempotent calls
    (register, heartbeat, restore plan, triggers are not) are retried across replicas for
    up to ``retry_for_s``; acknowledgements only when the server certainly did not act.
    ``credentials``: token and TLS settings (default: from ``SPARKPOINT_TOKEN_FILE`` etc.,
    see :mod:`sparkpoint.client.credentials`).
    """

    def __init__(
        self,
        addresses: list[str] | str,
        *,
        timeout_s: float = 10.0,
        retry_for_s: float = 30.0,
        credentials: Credentials | None = None,
    ) -> None:
        if isinstance(addresses, str):
            addresses = [a for a in addresses.split(",") if a.strip()]
        self._transport = Transport(
            addresses,
            timeout_s=timeout_s,
            retry_for_s=retry_for_s,
            credentials=credentials if credentials is not None else Credentials.from_env(),
        )

    @property
    def leader_address(self) -> str | None:
        """The leader's address as last learnt (from a redirect or a leader-only answer)."""
        return self._transport.leader

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> CoordinatorClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, body: Any = None, *, idempotent: bool) -> Any:
        response = self._transport.request(method, path, body, idempotent=idempotent)
        raise_for_error(response)
        return response.json()

    # --- driver-facing ----------------------------------------------------------------

    def register_job(
        self, graph: JobGraph, checkpoint_config: dict[str, Any], *, replace: bool = False
    ) -> dict[str, Any]:
        body = {"graph": graph.to_dict(), "checkpoint_config": dict(checkpoint_config)}
        if replace:
            body["replace"] = True
        result: dict[str, Any] = self._call("POST", "/v1/jobs", body, idempotent=True)
        return result

    def heartbeat(self, job_id: str, after_seq: int) -> Heartbeat:
        data = self._call(
            "POST", f"/v1/jobs/{_job(job_id)}/heartbeat", {"after_seq": after_seq}, idempotent=True
        )
        return Heartbeat.from_dict(data)

    def acknowledge(
        self,
        job_id: str,
        checkpoint_id: int,
        acks: list[tuple[str, int, OperatorSubtaskState]],
    ) -> dict[str, Any]:
        body = {
            "acks": [
                {"operator_uid": uid, "subtask": subtask, "state": state_to_dict(state)}
                for uid, subtask, state in acks
            ]
        }
        path = f"/v1/jobs/{_job(job_id)}/checkpoints/{int(checkpoint_id)}/acks"
        result: dict[str, Any] = self._call("POST", path, body, idempotent=False)
        return result

    def decline(
        self, job_id: str, checkpoint_id: int, operator_uid: str, subtask: int, reason: str
    ) -> None:
        body = {"operator_uid": operator_uid, "subtask": subtask, "reason": reason}
        path = f"/v1/jobs/{_job(job_id)}/checkpoints/{int(checkpoint_id)}/decline"
        self._call("POST", path, body, idempotent=False)

    def restore_plan(
        self,
        job_id: str,
        graph: JobGraph,
        *,
        pointer: str | None = None,
        allow_non_restored_state: bool = False,
    ) -> RestoreResponse:
        body = {
            "graph": graph.to_dict(),
            "pointer": pointer,
            "allow_non_restored_state": allow_non_restored_state,
        }
        data = self._call("POST", f"/v1/jobs/{_job(job_id)}/restore-plan", body, idempotent=True)
        return RestoreResponse.from_dict(data)

    def trigger_checkpoint(self, job_id: str) -> int:
        data = self._call("POST", f"/v1/jobs/{_job(job_id)}/checkpoints", {}, idempotent=False)
        return int(data["checkpoint_id"])

    def trigger_savepoint(
        self, job_id: str, target_dir: str | None = None, *, stop: bool = False
    ) -> int:
        body = {"target_dir": target_dir, "stop": stop}
        data = self._call("POST", f"/v1/jobs/{_job(job_id)}/savepoints", body, idempotent=False)
        return int(data["checkpoint_id"])

    # --- status -----------------------------------------------------------------------

    def leader(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/v1/leader", idempotent=True)
        return result

    def jobs(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/v1/jobs", idempotent=True)["jobs"])

    def job(self, job_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/v1/jobs/{_job(job_id)}", idempotent=True)
        return result

    def checkpoints(self, job_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "GET", f"/v1/jobs/{_job(job_id)}/checkpoints", idempotent=True
        )
        return result

    def checkpoint(self, job_id: str, checkpoint_id: int) -> dict[str, Any]:
        path = f"/v1/jobs/{_job(job_id)}/checkpoints/{int(checkpoint_id)}"
        result: dict[str, Any] = self._call("GET", path, idempotent=True)
        return result

    # --- operations -------------------------------------------------------------------

    def collect_orphans(self, *, dry_run: bool, job_id: str | None = None) -> dict[str, Any]:
        """Run the leader's orphan collector now; its report (see docs/api.md). Repeating
        it is harmless: what was deleted is no longer found."""
        body = {"dry_run": dry_run, "job_id": job_id}
        return dict(self._call("POST", "/v1/checkpoints/orphans", body, idempotent=True))

    def cancel_job(self, job_id: str) -> dict[str, Any]:
        """Cancel ``job_id`` for good (its checkpoints, counter and record are removed)."""
        return dict(self._call("POST", f"/v1/jobs/{_job(job_id)}/cancel", {}, idempotent=True))
