"""Dynamic configuration shared by every broker: overrides in the metadata store, watched.

Theory of operation (Pulsar's ``DynamicConfigurationResources`` and the broker's
config-change listener): ``admin brokers update-dynamic-config`` on any broker writes the
override into one JSON map at ``CONFIG_PATH`` (``/admin/configuration``) of the cluster's
metadata store.  Every broker runs :meth:`DynamicConfigWatcher.run`: it reads the map
at start (so overrides survive a restart and a broker that joins later gets them),
then again on each notification for that node (a read re-arms ZooKeeper's one-shot
watch) and every ``POLL_S`` in case a notification was lost with a session.  Applying
the map (:meth:`apply`) rebuilds the live ``BrokerConfig`` as ``svc.config`` with each
dynamic key taken from the map; a key that left the map goes back to the broker's own
(file) value.  A value that does not parse (written by a newer broker, or by hand) is
skipped with a warning, the other keys still apply.  Readers of ``svc.config`` (new
producers and consumers, the load manager's next round) see the change; ``listeners``
are awaited after each change (the admin service hands the loaded topics the new
config and re-resolves their policies, whose broker-level defaults come from it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from magnetar.broker.loadbalance.config import LoadBalancerConfig
from magnetar.broker.resources.base import JsonStore
from magnetar.metadata.api import MetadataError, Notification

log = logging.getLogger(__name__)

CONFIG_PATH = "/admin/configuration"
POLL_S = 30.0


class DynamicConfigWatcher:
    def __init__(self, svc: Any, names: Callable[[], list[str]], lb_keys: frozenset[str] | set[str]) -> None:
        self._svc = svc
        self._names = names
        self._lb_keys = set(lb_keys)
        self._js = JsonStore(svc.metadata_store)
        self.initial = svc.config  # what a key that left the map falls back to
        self._applied: dict[str, str] = {}
        self._changed = asyncio.Event()
        self.applied_versions = 0  # statistics: how many times a changed map was applied
        # awaited after a change was applied (the admin service re-applies topic policies,
        # whose broker-level defaults come from the config)
        self.listeners: list[Callable[[], Awaitable[None]]] = []

    def _on_notification(self, n: Notification) -> None:
        if n.path == CONFIG_PATH:
            self._changed.set()

    async def refresh(self) -> None:
        if not self.apply(dict(await self._js.get(CONFIG_PATH) or {})):
            return
        for listener in list(self.listeners):
            try:
                await listener()
            except MetadataError as exc:
                log.warning("after a dynamic configuration change: %s", exc)

    def apply(self, overrides: Mapping[str, Any]) -> bool:
        """Make ``svc.config`` the broker's own config with ``overrides`` (dynamic keys only) on
        top; True when that changed something."""
        wanted = {k: str(v) for k, v in overrides.items() if k in set(self._names())}
        if wanted == self._applied:
            return False
        cfg = self._svc.config
        for name in set(self._applied) - set(wanted):
            cfg = _reverted(cfg, self.initial, name)
        good: dict[str, str] = {}
        for name, value in wanted.items():
            try:
                candidate = cfg.with_overrides({name: value})
                if name in self._lb_keys:
                    LoadBalancerConfig.from_properties(candidate.as_properties())
            except (ValueError, TypeError) as exc:
                log.warning("dynamic config %s=%r not applied: %s", name, value, exc)
                continue
            cfg, good[name] = candidate, value
        self._svc.config = cfg
        changed = good != self._applied
        if changed:
            log.info("dynamic configuration applied: %s", good or "(none)")
            self.applied_versions += 1
        self._applied = good
        return changed

    async def run(self) -> None:
        store, clock = self._svc.metadata_store, self._svc.clock
        store.add_listener(self._on_notification)
        try:
            while True:
                self._changed.clear()
                try:
                    await self.refresh()
                except MetadataError as exc:
                    log.info("dynamic configuration not read (%s); retrying", exc)
                handle = clock.call_later(POLL_S, self._changed.set)
                try:
                    await self._changed.wait()
                finally:
                    handle.cancel()
        finally:
            store.remove_listener(self._on_notification)


def _reverted(cfg: Any, initial: Any, name: str) -> Any:
    original = initial.as_properties().get(name)
    if original is None and name in cfg.extra:  # a key of BrokerConfig.extra (loadBalancer*): unset
        return dataclasses.replace(cfg, extra={k: v for k, v in cfg.extra.items() if k != name})
    return cfg.with_overrides({name: original})
