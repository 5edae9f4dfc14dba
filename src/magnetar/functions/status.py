"""What the worker answers about instances: stats totals, WorkerInfo, and asking another worker.

Theory of operation: an instance's status comes from the runtime running it
(``InstanceRuntime.status``).  In a cluster the instance may run on another
worker; as Pulsar's worker does, this one then asks that worker's REST API
(:class:`RemoteStatus`, ``GET .../{instance}/status`` with
``FORWARDED_HEADER`` so the owner answers from its own runtimes and never
forwards again), with the worker's client credentials.  A worker that is gone
or does not answer yields a not-running status that says why -- status never
fails because one worker is down.  :func:`aggregate_stats` turns the
instances' statuses into Pulsar's ``FunctionStats`` totals;
:func:`worker_info` is Pulsar's ``WorkerInfo`` of ``/admin/v2/worker/cluster``.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

FORWARDED_HEADER = "X-Magnetar-Worker-Forwarded"
REMOTE_TIMEOUT_S = 10.0


def not_running(instance: int, error: str, worker_id: str = "") -> dict[str, Any]:
    return {
        "instanceId": instance,
        "status": {"running": False, "error": error, "numRestarts": 0, "workerId": worker_id},
    }


def aggregate_stats(status: dict[str, Any]) -> dict[str, Any]:
    """Pulsar's FunctionStats from a ``status`` document (missing counters count as 0)."""
    inst = [i["status"] for i in status["instances"]]
    done = sum(i.get("numSuccessfullyProcessed", 0) for i in inst)
    return {
        "receivedTotal": sum(i.get("numReceived", 0) for i in inst),
        "processedSuccessfullyTotal": done,
        "systemExceptionsTotal": sum(i.get("numSystemExceptions", 0) for i in inst),
        "userExceptionsTotal": sum(i.get("numUserExceptions", 0) for i in inst),
        "avgProcessLatency": (
            sum(i.get("averageLatency", 0.0) * i.get("numSuccessfullyProcessed", 0) for i in inst) / done
            if done
            else None
        ),
        "lastInvocation": max((i.get("lastInvocationTime", 0) for i in inst), default=0),
        "instances": [{"instanceId": i["instanceId"], "metrics": i["status"]} for i in status["instances"]],
    }


def worker_info(worker_id: str, url: str) -> dict[str, Any]:
    parsed = urllib.parse.urlsplit(url)
    return {"workerId": worker_id, "workerHostname": parsed.hostname or "", "port": parsed.port or 0}


class RemoteStatus:
    """Asks another worker for the status of an instance it runs."""

    def __init__(self, headers: dict[str, str]) -> None:
        self._headers = headers
        self._http: Any = None

    async def get(self, web_url: str | None, fqfn: str, instance: int, owner: str) -> dict[str, Any]:
        if not web_url:
            return not_running(instance, f"worker {owner} is gone; waiting to be rescheduled", owner)[
                "status"
            ]
        import httpx

        if self._http is None:
            self._http = httpx.AsyncClient(timeout=REMOTE_TIMEOUT_S, headers=self._headers)
        url = f"{web_url.rstrip('/')}/admin/v3/functions/{fqfn}/{instance}/status"
        try:
            r = await self._http.get(url, headers={FORWARDED_HEADER: "1"})
            r.raise_for_status()
            return r.json()
        except (httpx.HTTPError, ValueError) as exc:
            return not_running(instance, f"worker {owner} did not answer: {exc}", owner)["status"]

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
