"""Tiered storage, the broker's side: effective offload policies and the topic offload admin.

Theory of operation: a topic's managed ledger offloads by its config's
:class:`~magnetar.managed_ledger.offload.OffloadPolicies`.  Those are the
broker's keys (``managedLedgerOffloadDriver``, ``s3ManagedLedgerOffload*``,
``fileSystemURI``...), overlaid by the namespace's (or the topic's)
``offload_policies`` document, then by the namespace's ``offload_threshold``,
``offload_threshold_in_seconds`` (``-1``: not set here) and
``offload_deletion_lag_ms`` (``null``: not set) -- :func:`effective_offload_policies`,
called by the policy enforcer with the rest of the storage settings, so a
change reaches live topics within one enforcement pass.

:class:`TopicOffloadAdmin` is ``PUT/GET .../offload``: the PUT body is a
MessageId; the ledgers before the one holding it are offloaded in the
background (the managed ledger owns the run and its status); a second PUT
while one runs is 409.  The GET answers Pulsar's OffloadProcessStatus.
"""

from __future__ import annotations

from typing import Any

from magnetar.broker import errors
from magnetar.broker.service.api import BrokerServiceView
from magnetar.broker.service.names import TopicRef, parse_topic
from magnetar.managed_ledger.api import ManagedLedgerError, Position
from magnetar.managed_ledger.offload import OffloadError, OffloadPolicies, policies_from
from magnetar.managed_ledger.offload_process import OffloadInProgressError


class OffloadAlreadyRunningError(errors.BrokerError):
    """Pulsar's ``409 Offload already running``."""

    server_error = errors.AlreadyExistsError.server_error
    http_status = 409


class BadMessageIdError(errors.BrokerError):
    server_error = errors.NotAllowedError.server_error
    http_status = 400


def effective_offload_policies(base: OffloadPolicies, topic_doc: dict, ns_doc: dict) -> OffloadPolicies:
    doc = topic_doc.get("offloadPolicies") or ns_doc.get("offload_policies")
    p = policies_from(doc, base) if isinstance(doc, dict) else base
    changes: dict[str, int] = {}
    for key, name in (
        ("offload_threshold", "threshold_bytes"),
        ("offload_threshold_in_seconds", "threshold_s"),
    ):
        v = ns_doc.get(key)
        if isinstance(v, int) and v >= 0:
            changes[name] = v
    lag = ns_doc.get("offload_deletion_lag_ms")
    if isinstance(lag, int):
        changes["deletion_lag_ms"] = lag
    return policies_from(
        {
            "managedLedgerOffloadThresholdInBytes": changes.get("threshold_bytes"),
            "managedLedgerOffloadThresholdInSeconds": changes.get("threshold_s"),
            "managedLedgerOffloadDeletionLagMs": changes.get("deletion_lag_ms"),
        },
        p,
    )


def parse_message_id(body: Any) -> Position:
    if not isinstance(body, dict) or body.get("ledgerId") is None or body.get("entryId") is None:
        raise BadMessageIdError("messageId is null")
    try:
        return Position(int(body["ledgerId"]), int(body["entryId"]))
    except (TypeError, ValueError):
        raise BadMessageIdError("messageId must have integer ledgerId and entryId") from None


class TopicOffloadAdmin:
    def __init__(self, svc: BrokerServiceView) -> None:
        self._svc = svc

    async def _topic(self, topic: str) -> Any:
        ref: TopicRef = parse_topic(topic)
        await self._svc.require_namespace(ref.namespace)
        if not ref.persistent:
            raise errors.NotAllowedError("Offload is not allowed on non-persistent topics")
        if not ref.is_partition and await self._svc.partitions_of(ref):
            raise errors.NotAllowedError(
                "Offload is per partition: offload each partition of a partitioned topic"
            )
        try:
            return await self._svc.topics.get_topic(ref, create=False)
        except errors.TopicNotFoundError:
            raise errors.TopicNotFoundError("Topic not found") from None

    async def trigger(self, topic: str, before: Position) -> None:
        t = await self._topic(topic)
        try:
            t.ml.trigger_offload(before)
        except OffloadInProgressError as e:
            raise OffloadAlreadyRunningError(f"Offload already running: {e}") from None
        except (ManagedLedgerError, OffloadError) as e:
            raise errors.PreconditionFailedError(str(e)) from None

    async def status(self, topic: str) -> dict:
        t = await self._topic(topic)
        return t.ml.offload_state.to_json()
