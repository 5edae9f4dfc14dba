"""Plugins in the standalone's life: load before the broker, start after it, stop before it.

Theory of operation: the composition root's half of ``broker.plugins``::

    load_extensions(config)          -> PluginError: start-up fails with that line
    BrokerService(..., extensions)   interceptor + authentication/authorization plugins
    initialize_on(service)           interceptors' and the authorization provider's initialize
    create_app -> mount servlets     before the HTTP server starts
    start_protocol_handlers          after the broker serves; a failure fails the start-up
    ...
    aclose: protocol handlers -> servlets -> interceptors, before the broker stops

Every failure names the plugin and the configuration key it came from.
"""

from __future__ import annotations

import logging
from typing import Any

from magnetar.broker.plugins import BrokerExtensions, PluginError, load_extensions
from magnetar.web.plugins import mount_servlets

log = logging.getLogger(__name__)

__all__ = ["PluginError", "Plugins"]


class Plugins:
    def __init__(self, properties: dict[str, Any]) -> None:
        self.ext: BrokerExtensions = load_extensions(properties)
        self._started: list[tuple[str, Any]] = []

    @property
    def broker_properties(self) -> dict[str, str]:
        return self.ext.properties

    def initialize_on(self, service: Any) -> None:
        ic = self.ext.interceptor
        if ic is not None:
            for name, one in ic.interceptors:
                try:
                    one.initialize(service)
                except Exception as exc:
                    raise PluginError(
                        f"brokerInterceptors: plugin {name!r} failed to initialize: {type(exc).__name__}: {exc}"
                    ) from exc
        provider = self.ext.authorization_provider
        if provider is not None:
            try:
                provider.initialize(self.ext.properties, service)
            except Exception as exc:
                raise PluginError(
                    f"authorizationProvider: failed to initialize: {type(exc).__name__}: {exc}"
                ) from exc

    def mount(self, app: Any, service: Any) -> None:
        try:
            mount_servlets(app, self.ext.servlets, service)
        except Exception as exc:
            raise PluginError(f"additionalServlets: {type(exc).__name__}: {exc}") from exc

    async def start_protocol_handlers(self, service: Any) -> None:
        for name, handler in self.ext.protocol_handlers:
            try:
                await handler.start(service)
            except Exception as exc:
                raise PluginError(
                    f"messagingProtocols: plugin {name!r} failed to start: {type(exc).__name__}: {exc}"
                ) from exc
            self._started.append((name, handler))
            log.info("protocol handler %s started", name)

    async def aclose(self) -> None:
        for name, handler in reversed(self._started):
            try:
                await handler.close()
            except Exception:
                log.exception("protocol handler %s failed to close", name)
        self._started.clear()
        for name, servlet in self.ext.servlets:
            try:
                servlet.close()
            except Exception:
                log.exception("additional servlet %s failed to close", name)
        if self.ext.interceptor is not None:
            self.ext.interceptor.close()
