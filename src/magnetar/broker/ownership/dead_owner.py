"""Lookups of a bundle whose owner has died: held until its lock goes, not redirected to a corpse.

Theory of operation: after ``kill -9`` the dead broker's bundle locks live on
until ZooKeeper expires its session (one session timeout).  A lookup answered
meanwhile with ``Redirect`` to the dead owner sends the client to a closed
port; the official clients then back off exponentially (0.1, 0.2, 0.4, 0.8,
1.6 s ...), so a retry that just misses the expiry costs the next, doubled,
step -- a 1 s session timeout became ~3 s of failover.  So before redirecting
to another broker, the namespace service asks :class:`DeadOwnerWatch`
whether that broker still accepts connections on its advertised binary port
(a TCP connect, remembered for ``ALIVE_TTL_S`` when it succeeds).  Refused
(or no answer within ``PROBE_TIMEOUT_S``): the lookup waits -- one shared
wait per bundle, polling the lock node -- until the lock is gone, at most
``hold_s`` (one and a half session timeouts plus a margin, capped), and is
then answered as for an unowned bundle, placement avoiding the brokers seen
dead: the client is sent straight to the new owner on the retry it already made.  If the lock is still there after
``hold_s`` (the owner was only unreachable from here), the lookup redirects
to the owner as before; nothing here takes a lock another session holds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from magnetar.broker.ownership.bundles import NamespaceBundle
from magnetar.broker.ownership.ownership import OwnerData
from magnetar.metadata.api import MetadataError

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 0.3
ALIVE_TTL_S = 0.25
POLL_S = 0.05
HOLD_MAX_S = 10.0


class DeadOwnerWatch:
    def __init__(self, clock: Any, session_timeout_ms: int) -> None:
        self._clock = clock
        self.hold_s = min(session_timeout_ms / 1000 * 1.5 + 0.5, HOLD_MAX_S)
        self._alive_until: dict[str, float] = {}  # native URL -> monotonic time
        self._dead_until: dict[str, float] = {}  # native URL -> until when placement avoids it
        self._waits: dict[NamespaceBundle, asyncio.Task[bool]] = {}
        self.probe: Callable[[str], Awaitable[bool]] = accepts_connections  # replaceable in tests

    async def reachable(self, owner: OwnerData) -> bool:
        """Does the owner accept connections on its binary port (TLS-only owners: assumed)?"""
        url = owner.native_url
        if not url:
            return True
        now = self._clock.monotonic()
        if self._alive_until.get(url, 0.0) > now:
            return True
        if not await self.probe(url):
            self._dead_until[url] = now + self.hold_s
            return False
        self._dead_until.pop(url, None)
        self._alive_until[url] = now + ALIVE_TTL_S
        if len(self._alive_until) > 1024:
            self._alive_until = {u: t for u, t in self._alive_until.items() if t > now}
        return True

    def seen_dead(self, native_url: str | None) -> bool:
        """Refused connections lately: placement avoids it (our view of the broker list may
        still name it for a moment after its session expired)."""
        return native_url is not None and self._dead_until.get(native_url, 0.0) > self._clock.monotonic()

    async def wait_gone(
        self, bundle: NamespaceBundle, owner_of: Callable[[], Awaitable[OwnerData | None]], owner: OwnerData
    ) -> bool:
        """True once ``bundle`` has no owner, or a different one; False after ``hold_s``."""
        task = self._waits.get(bundle)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._poll(owner_of, owner))
            self._waits[bundle] = task
            task.add_done_callback(lambda _t: self._waits.pop(bundle, None))
            log.info(
                "bundle %s: owner %s refuses connections; holding lookups until its lock goes",
                bundle.name,
                owner.native_url,
            )
        return await asyncio.shield(task)

    async def _poll(self, owner_of: Callable[[], Awaitable[OwnerData | None]], owner: OwnerData) -> bool:
        deadline = self._clock.monotonic() + self.hold_s
        while self._clock.monotonic() < deadline:
            try:
                current = await owner_of()
            except MetadataError as e:  # the store is unreachable for now: keep trying until the deadline
                log.debug("reading the owner while holding lookups failed: %s", e)
            else:
                if current is None or current.http_url != owner.http_url:
                    return True
            await self._clock.sleep(POLL_S)
        return False


async def accepts_connections(url: str) -> bool:
    """A TCP connect to ``pulsar://host:port`` (closed at once; the broker sees a client
    that went away before CONNECT)."""
    parts = urlsplit(url.split(",", 1)[0])
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(parts.hostname, parts.port), PROBE_TIMEOUT_S
        )
    except (OSError, TimeoutError):
        return False
    writer.close()
    return True
