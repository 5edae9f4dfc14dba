"""The policy documents topics resolve from, cached until the store says they changed.

Theory of operation: resolving a topic's effective policies needs two
documents, the topic's overrides (``/admin/topic-policies/...``) and its
namespace's Policies (``/admin/policies/{tenant}/{ns}``).  The enforcer used
to read both from the metadata store for every loaded topic every pass (5 s):
with 10,000 idle topics that was 4,000 reads a second and a busy core.

:class:`PolicyDocuments` keeps them in two read-through
:class:`~magnetar.metadata.cache.MetadataCache` instances: a read arms the
store's watch on the path, a change anywhere in the cluster (this broker's
admin API or another broker's) invalidates the entry, a session event drops
everything.  A hit returns the *same* object until the path changes, so the
enforcer can tell "nothing changed for this topic" by identity (``is``),
without comparing documents.  Absent documents are cached too (None).

One instance per broker, owned by the BrokerService (``policy_documents``):
the admin layer's policy enforcer and the replication service read the same
cached documents (this module is in the service layer so both may import it).

``on_change`` callbacks run (synchronously, from the store's notification)
with the changed path whenever a topic-policy or namespace document changes,
so the enforcer and the replication check act on a change at once instead of
polling every topic; :func:`namespace_of` names the namespace a changed path
belongs to.  Values are shared: treat them as immutable.  As a safety net
against a lost notification (delivery is best-effort), :meth:`resync_if_due`
drops the whole cache every ``RESYNC_INTERVAL_S``; the enforcer calls it on
each periodic pass.  A document read again equal to the one handed out before
comes back as the *same* object (so a resync does not look like a change), and
:attr:`generation` grows with every change or drop, so a reader can tell that
nothing changed anywhere without looking at any topic's documents.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from magnetar.broker.resources.namespaces import ROOT as NAMESPACE_ROOT
from magnetar.broker.service.names import TopicRef
from magnetar.broker.service.policies import TOPIC_POLICIES_ROOT, topic_policies_path
from magnetar.metadata.api import Notification, NotificationType
from magnetar.metadata.cache import MetadataCache

# One entry per loaded topic (most are negative: no overrides) and per namespace; a bound.
MAX_CACHED_DOCUMENTS = 200_000
RESYNC_INTERVAL_S = 60.0


def namespace_of(path: str) -> str | None:
    """``tenant/ns`` of a topic-policy or namespace document's path (None: neither)."""
    for root in (TOPIC_POLICIES_ROOT, NAMESPACE_ROOT):
        if path.startswith(root + "/"):
            parts = path[len(root) + 1 :].split("/")
            return f"{parts[0]}/{parts[1]}" if len(parts) >= 2 and parts[0] and parts[1] else None
    return None


class _JsonDocSerde:
    """A JSON object; an empty node is an empty document (as JsonStore reads it)."""

    def serialize(self, value: dict[str, Any]) -> bytes:
        return json.dumps(value, separators=(",", ":")).encode()

    def deserialize(self, path: str, data: bytes) -> dict[str, Any]:
        return json.loads(data) if data else {}


class PolicyDocuments:
    def __init__(self, store: Any, supervisor: Any = None) -> None:
        self._topic_docs: MetadataCache[dict[str, Any]] = MetadataCache(
            store, _JsonDocSerde(), max_entries=MAX_CACHED_DOCUMENTS, supervisor=supervisor
        )
        self._ns_docs: MetadataCache[dict[str, Any]] = MetadataCache(
            store, _JsonDocSerde(), max_entries=MAX_CACHED_DOCUMENTS, supervisor=supervisor
        )
        self.on_change: list[Callable[[str], None]] = []
        store.add_listener(self._on_notification)
        self._next_resync_s: float | None = None
        # Grows on every change notification, local invalidation and resync: a reader that
        # saw the same generation before knows no document changed meanwhile.
        self.generation = 0
        # path -> the object last returned for it: a re-read that decodes an equal document
        # (after a resync) hands the old object out again, so identity still means "unchanged"
        self._canonical: dict[str, dict[str, Any]] = {}

    def resync_if_due(self, now_s: float) -> None:
        """Every RESYNC_INTERVAL_S (monotonic ``now_s``): forget everything, read again."""
        if self._next_resync_s is None:
            self._next_resync_s = now_s + RESYNC_INTERVAL_S
        elif now_s >= self._next_resync_s:
            self._next_resync_s = now_s + RESYNC_INTERVAL_S
            self.generation += 1
            self._topic_docs.invalidate_all()
            self._ns_docs.invalidate_all()

    async def raw(self, ref: TopicRef) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """(topic document, namespace document) as cached; None where absent.  The same
        objects come back until a path changes."""
        topic_path = topic_policies_path(ref)
        ns_path = f"{NAMESPACE_ROOT}/{ref.namespace}"
        topic_doc = self._same(topic_path, await self._topic_docs.get(topic_path))
        ns_doc = self._same(ns_path, await self._ns_docs.get(ns_path))
        return topic_doc, ns_doc

    def _same(self, path: str, doc: dict[str, Any] | None) -> dict[str, Any] | None:
        if doc is None:
            self._canonical.pop(path, None)
            return None
        last = self._canonical.get(path)
        if last is not None and (last is doc or last == doc):
            return last
        if len(self._canonical) >= MAX_CACHED_DOCUMENTS:
            self._canonical.clear()
        self._canonical[path] = doc
        return doc

    def invalidate_namespace(self, namespace: str) -> None:
        """A local write: forget the namespace's documents now (the notification may lag)."""
        self.generation += 1
        self._ns_docs.invalidate(f"{NAMESPACE_ROOT}/{namespace}")
        self._topic_docs.invalidate_prefix(f"{TOPIC_POLICIES_ROOT}/{namespace}/")

    def _on_notification(self, note: Notification) -> None:
        if note.type is NotificationType.CHILDREN_CHANGED:
            return
        path = note.path
        if path.startswith((TOPIC_POLICIES_ROOT + "/", NAMESPACE_ROOT + "/")):
            self.generation += 1
            for callback in self.on_change:
                callback(path)

    def statistics(self) -> dict[str, dict[str, int]]:
        return {"topics": self._topic_docs.statistics(), "namespaces": self._ns_docs.statistics()}

    async def aclose(self) -> None:
        await self._topic_docs.aclose()
        await self._ns_docs.aclose()
