"""Finding the leader among replica addresses and retrying what may be retried.

One place decides what happens to a request: a 307 names the leader (remembered, then
asked directly); a 503 or an unreachable replica sends the request to the next address;
idempotent calls are repeated until ``retry_for_s`` runs out. A non-idempotent call (an
acknowledgement) is repeated only when the server certainly did not act on it: the
connection was never made, or the answer was a redirect or a 503 (the coordinator changes
nothing before answering those).
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlsplit

import httpx

from sparkpoint.client.credentials import Credentials
from sparkpoint.client.errors import Unavailable, error_for

#: Redirects followed for one attempt (a leader that just moved may redirect once more).
_MAX_HOPS = 3
#: Retry pauses stay at or below the cap for the first seconds of an outage.
_FIRST_PAUSE_CAP_S = 0.2
_FIRST_PHASE_S = 5.0


def normalise(address: str, scheme: str = "http") -> str:
    """``host:port`` → ``http://host:port`` (or ``scheme``); trailing slashes dropped."""
    address = address.strip().rstrip("/")
    if "://" not in address:
        address = f"{scheme}://{address}"
    return address


class Transport:
    def __init__(
        self,
        addresses: list[str],
        *,
        timeout_s: float,
        retry_for_s: float,
        credentials: Credentials | None = None,
    ) -> None:
        if not addresses:
            raise ValueError("at least one coordinator address is needed")
        creds = credentials or Credentials()
        self.addresses = [normalise(a, creds.default_scheme) for a in addresses]
        self.retry_for_s = retry_for_s
        # Followers forward leader-only calls for us (one address is enough, e.g. a
        # Kubernetes Service whose pods' own names this machine cannot resolve).
        self._http = httpx.Client(
            timeout=timeout_s,
            follow_redirects=False,
            headers={"Sparkpoint-Proxy": "allow", **creds.headers()},
            verify=creds.verify(),
        )
        self._leader: str | None = None

    @property
    def leader(self) -> str | None:
        return self._leader

    def close(self) -> None:
        self._http.close()

    def _candidates(self) -> list[str]:
        rest = [a for a in self.addresses if a != self._leader]
        return [self._leader, *rest] if self._leader else rest

    def request(
        self, method: str, path: str, body: Any = None, *, idempotent: bool
    ) -> httpx.Response:
        """The final answer (2xx or an error status to surface), or Unavailable."""
        started = time.monotonic()
        deadline = started + self.retry_for_s
        last_problem = "no coordinator address answered"
        pause = 0.05
        while True:
            for base in self._candidates():
                outcome = self._attempt(method, base, path, body, idempotent=idempotent)
                if isinstance(outcome, httpx.Response):
                    return outcome
                last_problem = outcome
            if time.monotonic() >= deadline:
                raise Unavailable(503, "unavailable", f"{method} {path}: {last_problem}")
            time.sleep(min(pause, max(deadline - time.monotonic(), 0)))
            # A failover takes well under a second when the old leader's process is gone:
            # look again often at first, then back off (an outage must not become a storm).
            waited = time.monotonic() - started
            pause = min(pause * 2, _FIRST_PAUSE_CAP_S if waited < _FIRST_PHASE_S else 1.0)

    def _attempt(
        self, method: str, base: str, path: str, body: Any, *, idempotent: bool
    ) -> httpx.Response | str:
        """A response to return, or why this address did not do (try the next one)."""
        url = base + path
        for _ in range(_MAX_HOPS):
            try:
                response = self._http.request(method, url, json=body)
            except httpx.ConnectError as exc:  # never sent: safe to try elsewhere
                if self._leader == base:
                    self._leader = None
                return f"{base}: {exc}"
            except httpx.TransportError as exc:
                if not idempotent:  # it may have been received and acted on
                    raise Unavailable(
                        503, "in_doubt", f"{method} {path}: {exc}; outcome unknown"
                    ) from exc
                if self._leader == base:
                    self._leader = None
                return f"{base}: {exc}"
            if response.status_code == 307:
                location = response.headers.get("location", "")
                parts = urlsplit(location)
                if not parts.scheme or not parts.netloc:
                    return f"{base}: redirect without a usable location {location!r}"
                base = f"{parts.scheme}://{parts.netloc}"
                self._leader = base
                url = location
                continue
            if response.status_code == 503:
                if self._leader == base:
                    self._leader = None
                return f"{base}: {_message(response)}"
            if response.status_code < 300 and method != "GET":
                self._leader = base  # only the leader acts on leader-only calls
            return response
        return f"{base}: too many redirects"


def _message(response: httpx.Response) -> str:
    try:
        data = response.json()
        return f"{data.get('error')}: {data.get('message')}"
    except ValueError:
        return response.text[:200]


def raise_for_error(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        data = response.json()
        code, message = str(data.get("error", "error")), str(data.get("message", ""))
    except ValueError:
        code, message = "error", response.text[:500]
    raise error_for(response.status_code, code, message)
