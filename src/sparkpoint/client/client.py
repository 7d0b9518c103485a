"""CoordinatorClient: the pipeline's and the CLI's way to talk to the coordinators.

>>> client = CoordinatorClient(["coord-0:8081", "coord-1:8081"])  # doctest: +SKIP
>>> job = client.register_job(graph, {"interval_ms": 500})        # doctest: +SKIP
>>> job["run_id"]                  # this driver run; later calls carry it  # doctest: +SKIP
>>> beat = client.heartbeat(graph.job_id, after_seq=0)            # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from sparkpoint.checkpoint import JobGraph, OperatorSubtaskState, serde
from sparkpoint.client.credentials import Credentials
from sparkpoint.client.models import Heartbeat, RestoreResponse
from sparkpoint.client.transport import Transport, raise_for_error


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

    Driver calls (heartbeat, acknowledge, decline, restore plan) carry a driver run id:
    the one given, else the one this client's last registration of the job returned. A
    superseded run is refused with :class:`~sparkpoint.client.errors.Superseded`.
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
        self._runs: dict[str, str] = {}

    @property
    def leader_address(self) -> str | None:
        """Where leader-only calls go now: the leader's address as last learnt (from a
        redirect or a leader-only answer), or a follower that forwards them."""
        return self._transport.leader

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> CoordinatorClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run_id(self, job_id: str) -> str | None:
        """The driver run this client's last registration of ``job_id`` returned."""
        return self._runs.get(job_id)

    def _run(self, job_id: str, run_id: str | None) -> str:
        run = run_id or self._runs.get(job_id)
        if not run:
            raise ValueError(f"job {job_id!r}: no driver run; register the job first")
        return run

    def _call(self, method: str, path: str, body: Any = None, *, idempotent: bool) -> Any:
        response = self._transport.request(method, path, body, idempotent=idempotent)
        raise_for_error(response)
        return response.json()

    # --- driver-facing ----------------------------------------------------------------

    def register_job(
        self,
        graph: JobGraph,
        checkpoint_config: dict[str, Any],
        *,
        replace: bool = False,
        standby: bool = False,
        probe_address: str = "",
    ) -> dict[str, Any]:
        """Start a driver run (``standby``: a warm standby run; the reply's ``role`` says
        which it became). ``probe_address``: ``host:port`` where this process accepts
        liveness probes."""
        body = {"graph": graph.to_dict(), "checkpoint_config": dict(checkpoint_config)}
        if replace:
            body["replace"] = True
        if standby:
            body["standby"] = True
        if probe_address:
            body["probe_address"] = probe_address
        result: dict[str, Any] = self._call("POST", "/v1/jobs", body, idempotent=True)
        self._runs[graph.job_id] = str(result["run_id"])
        return result

    def heartbeat(
        self,
        job_id: str,
        after_seq: int,
        *,
        run_id: str | None = None,
        progress: dict[str, Any] | None = None,
    ) -> Heartbeat:
        """``progress``: what the driver reports of its pipeline (epoch, records,
        records_per_s, source_lag), shown on the UI's Jobs page."""
        body: dict[str, Any] = {"after_seq": after_seq, "run_id": self._run(job_id, run_id)}
        if progress is not None:
            body["progress"] = progress
        data = self._call("POST", f"/v1/jobs/{_job(job_id)}/heartbeat", body, idempotent=True)
        return Heartbeat.from_dict(data)

    def acknowledge(
        self,
        job_id: str,
        checkpoint_id: int,
        acks: list[tuple[str, int, OperatorSubtaskState]],
        *,
        run_id: str | None = None,
    ) -> dict[str, Any]:
        body = {
            "acks": [
                {"operator_uid": uid, "subtask": subtask, "state": state_to_dict(state)}
                for uid, subtask, state in acks
            ],
            "run_id": self._run(job_id, run_id),
        }
        path = f"/v1/jobs/{_job(job_id)}/checkpoints/{int(checkpoint_id)}/acks"
        result: dict[str, Any] = self._call("POST", path, body, idempotent=False)
        return result

    def decline(
        self,
        job_id: str,
        checkpoint_id: int,
        operator_uid: str,
        subtask: int,
        reason: str,
        *,
        run_id: str | None = None,
    ) -> None:
        body = {
            "operator_uid": operator_uid,
            "subtask": subtask,
            "reason": reason,
            "run_id": self._run(job_id, run_id),
        }
        path = f"/v1/jobs/{_job(job_id)}/checkpoints/{int(checkpoint_id)}/decline"
        self._call("POST", path, body, idempotent=False)

    def restore_plan(
        self,
        job_id: str,
        graph: JobGraph,
        *,
        pointer: str | None = None,
        allow_non_restored_state: bool = False,
        run_id: str | None = None,
        restore_mode: str | None = None,
    ) -> RestoreResponse:
        """``restore_mode``: ``"claim"`` or ``"no-claim"`` (docs/recovery.md, "Restore
        modes"); None leaves the service's default."""
        body: dict[str, Any] = {
            "graph": graph.to_dict(),
            "pointer": pointer,
            "allow_non_restored_state": allow_non_restored_state,
            "run_id": self._run(job_id, run_id),
        }
        if restore_mode is not None:
            body["restore_mode"] = restore_mode
        data = self._call("POST", f"/v1/jobs/{_job(job_id)}/restore-plan", body, idempotent=True)
        return RestoreResponse.from_dict(data)

    def release(self, job_id: str, *, run_id: str | None = None) -> None:
        """This driver run ends cleanly: the job's standby run, if any, takes over now."""
        body = {"run_id": self._run(job_id, run_id)}
        # Best effort on the way out: not retried (a silent run is ended by the timeout).
        self._call("POST", f"/v1/jobs/{_job(job_id)}/release", body, idempotent=False)

    def trigger_checkpoint(self, job_id: str) -> int:
        """Trigger now; from a client that registered the job, as its driver run."""
        body = {"run_id": self._runs[job_id]} if job_id in self._runs else {}
        data = self._call("POST", f"/v1/jobs/{_job(job_id)}/checkpoints", body, idempotent=False)
        return int(data["checkpoint_id"])

    def trigger_savepoint(
        self, job_id: str, target_dir: str | None = None, *, stop: bool = False
    ) -> int:
        body: dict[str, Any] = {"target_dir": target_dir, "stop": stop}
        if job_id in self._runs:
            body["run_id"] = self._runs[job_id]
        data = self._call("POST", f"/v1/jobs/{_job(job_id)}/savepoints", body, idempotent=False)
        return int(data["checkpoint_id"])

    def rescale_applied(
        self, job_id: str, request_id: str, epoch: int, checkpoint_id: int | None,
        *, run_id: str | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """This driver run applied rescale request ``request_id`` after ``epoch``, from
        ``checkpoint_id`` (idempotent)."""
        body = {"run_id": self._run(job_id, run_id), "epoch": epoch,
                "checkpoint_id": checkpoint_id}  # fmt: skip
        path = f"/v1/jobs/{_job(job_id)}/rescale/{_job(request_id)}/applied"
        return dict(self._call("POST", path, body, idempotent=True))

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

    def rescale(self, job_id: str, parallelism: int) -> dict[str, Any]:
        """Ask ``job_id``'s driver to run at ``parallelism`` from its next epoch boundary;
        the stored request (``state`` "pending", or "unchanged"). ``job(job_id)["rescale"]``
        says when it took effect."""
        body = {"parallelism": parallelism}
        return dict(self._call("POST", f"/v1/jobs/{_job(job_id)}/rescale", body, idempotent=True))

    def cancel_job(self, job_id: str) -> dict[str, Any]:
        """Cancel ``job_id`` for good (its checkpoints, counter and record are removed)."""
        return dict(self._call("POST", f"/v1/jobs/{_job(job_id)}/cancel", {}, idempotent=True))
