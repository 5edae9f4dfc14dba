"""The broker's extension points: plugin kinds, how they are found, and the loaded set.

Theory of operation: Pulsar loads NAR archives from directories; Magnetar
loads Python entry points.  Each configuration key names plugins by entry
point name, in the entry point group of its kind:

=========================  =================================  ==========================
config key                 entry point group                  the object must be
=========================  =================================  ==========================
brokerInterceptors         magnetar.broker_interceptors       a BrokerInterceptor
additionalServlets         magnetar.additional_servlets       an AdditionalServlet
messagingProtocols         magnetar.protocol_handlers         a ProtocolHandler
authenticationProviders    magnetar.authentication_providers  an authentication provider
authorizationProvider      magnetar.authorization_providers   an AuthorizationProvider
=========================  =================================  ==========================

A name may also be ``package.module:attribute`` (no packaging needed).  The
entry point's object is called with no arguments when it is a class or a
factory; the result is the plugin.  Pulsar's own class names in
``authenticationProviders`` (``...AuthenticationProviderToken`` etc.) and
the default ``authorizationProvider`` stay built-in and are not looked up.

:func:`load_extensions` resolves everything at start-up and raises
:class:`PluginError` -- naming the key, the plugin and the cause -- for a
name that matches nothing, an import that fails, a factory that raises or an
object of the wrong kind.  The composition root turns that into a start-up
failure (one clear line, exit code 1).  What it returns
(:class:`BrokerExtensions`) is handed to the BrokerService (interceptor,
authentication and authorization providers) and to the composition root
(servlets to mount, protocol handlers to start after the broker and stop
before it).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from magnetar.broker.interceptors import BrokerInterceptor, InterceptorChain

log = logging.getLogger(__name__)

GROUPS = {
    "brokerInterceptors": "magnetar.broker_interceptors",
    "additionalServlets": "magnetar.additional_servlets",
    "messagingProtocols": "magnetar.protocol_handlers",
    "authenticationProviders": "magnetar.authentication_providers",
    "authorizationProvider": "magnetar.authorization_providers",
}
DEFAULT_AUTHORIZATION_PROVIDERS = frozenset(
    {"", "org.apache.pulsar.broker.authorization.PulsarAuthorizationProvider", "default"}
)
BUILTIN_AUTHENTICATION = frozenset(
    {
        "org.apache.pulsar.broker.authentication.AuthenticationProviderToken",
        "org.apache.pulsar.broker.authentication.AuthenticationProviderTls",
        "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic",
        "token",
        "tls",
        "basic",
    }
)


class PluginError(Exception):
    """A configured plugin could not be loaded or initialized (the message says which and why)."""


class AdditionalServlet:
    """Extra HTTP routes on the broker's web port (Pulsar's AdditionalServlet).

    ``base_path`` is where the app is mounted; ``asgi_app`` returns an ASGI
    application (a FastAPI or Starlette app, say) given the broker service.
    """

    base_path: str = ""

    def initialize(self, properties: Mapping[str, str]) -> None: ...

    def asgi_app(self, service: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None: ...


class ProtocolHandler:
    """Another protocol on its own port over the broker's topics (Pulsar's ProtocolHandler)."""

    protocol_name: str = ""

    def initialize(self, properties: Mapping[str, str]) -> None:
        """Read settings (its own keys in the broker config); raise to fail the start-up."""

    async def start(self, service: Any) -> None:  # pragma: no cover - abstract
        """Bind and serve; return once listening.  ``service`` is the BrokerService."""
        raise NotImplementedError

    async def close(self) -> None: ...


class AuthorizationProvider:
    """Decides produce/consume/lookup for a role (Pulsar's AuthorizationProvider); super-users
    are still decided by ``superUserRoles`` before the provider is asked."""

    def initialize(self, properties: Mapping[str, str], service: Any) -> None: ...

    async def can_produce(self, role: str | None, topic: str) -> bool:  # pragma: no cover
        raise NotImplementedError

    async def can_consume(
        self, role: str | None, topic: str, subscription: str | None
    ) -> bool:  # pragma: no cover
        raise NotImplementedError

    async def can_lookup(self, role: str | None, topic: str) -> bool:
        return await self.can_produce(role, topic) or await self.can_consume(role, topic, None)


@dataclass
class BrokerExtensions:
    interceptor: InterceptorChain | None = None
    servlets: list[tuple[str, AdditionalServlet]] = field(default_factory=list)
    protocol_handlers: list[tuple[str, ProtocolHandler]] = field(default_factory=list)
    authentication_providers: dict[str, Any] = field(default_factory=dict)  # method name -> provider
    authorization_provider: AuthorizationProvider | None = None
    # The configuration with plugin names taken out of authenticationProviders (built-ins stay).
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (
            self.interceptor
            or self.servlets
            or self.protocol_handlers
            or self.authentication_providers
            or self.authorization_provider
        )


def _names(value: Any) -> list[str]:
    return [n.strip() for n in str(value or "").split(",") if n.strip()]


def load_plugin(key: str, name: str) -> Any:
    """The plugin object configured as ``name`` under ``key`` (see the table above)."""
    group = GROUPS[key]
    target: Any = None
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            target = getattr(importlib.import_module(module_name), attr)
        except Exception as exc:
            raise PluginError(f"{key}: cannot import {name!r}: {type(exc).__name__}: {exc}") from exc
    else:
        found = [ep for ep in importlib.metadata.entry_points(group=group) if ep.name == name]
        if not found:
            available = sorted({ep.name for ep in importlib.metadata.entry_points(group=group)})
            raise PluginError(
                f"{key}: no plugin named {name!r} (entry point group {group}; "
                f"installed: {', '.join(available) or 'none'})"
            )
        try:
            target = found[0].load()
        except Exception as exc:
            raise PluginError(
                f"{key}: plugin {name!r} failed to import: {type(exc).__name__}: {exc}"
            ) from exc
    if inspect.isclass(target) or (callable(target) and inspect.isfunction(target)):
        try:
            return target()
        except Exception as exc:
            raise PluginError(
                f"{key}: plugin {name!r} failed to construct: {type(exc).__name__}: {exc}"
            ) from exc
    return target


def _check(key: str, name: str, obj: Any, kind: type, required: tuple[str, ...]) -> None:
    missing = [m for m in required if not callable(getattr(obj, m, None))]
    if missing:
        raise PluginError(f"{key}: plugin {name!r} is not a {kind.__name__} (missing {', '.join(missing)})")


def _init(key: str, name: str, call: Any, *args: Any) -> None:
    try:
        call(*args)
    except Exception as exc:
        raise PluginError(
            f"{key}: plugin {name!r} failed to initialize: {type(exc).__name__}: {exc}"
        ) from exc


def load_extensions(properties: Mapping[str, Any]) -> BrokerExtensions:
    """Resolve every configured plugin; PluginError on the first that cannot be used."""
    props = {k: str(v) for k, v in properties.items()}
    ext = BrokerExtensions(properties=dict(props))
    interceptors: list[tuple[str, BrokerInterceptor]] = []
    for name in _names(props.get("brokerInterceptors")):
        obj = load_plugin("brokerInterceptors", name)
        _check(
            "brokerInterceptors", name, obj, BrokerInterceptor, ("on_pulsar_command", "on_message_publish")
        )
        interceptors.append((name, obj))
    if interceptors:
        ext.interceptor = InterceptorChain(interceptors)
    for name in _names(props.get("additionalServlets")):
        obj = load_plugin("additionalServlets", name)
        _check("additionalServlets", name, obj, AdditionalServlet, ("asgi_app",))
        _init("additionalServlets", name, getattr(obj, "initialize", lambda p: None), props)
        path = str(getattr(obj, "base_path", "") or "")
        if not path.startswith("/") or path.rstrip("/") in ("", "/admin", "/lookup", "/ws", "/metrics"):
            raise PluginError(f"additionalServlets: plugin {name!r} has an unusable base_path {path!r}")
        ext.servlets.append((name, obj))
    for name in _names(props.get("messagingProtocols")):
        obj = load_plugin("messagingProtocols", name)
        _check("messagingProtocols", name, obj, ProtocolHandler, ("start", "close"))
        _init("messagingProtocols", name, getattr(obj, "initialize", lambda p: None), props)
        ext.protocol_handlers.append((name, obj))
    builtin: list[str] = []
    for name in _names(props.get("authenticationProviders")):
        if name in BUILTIN_AUTHENTICATION:
            builtin.append(name)
            continue
        obj = load_plugin("authenticationProviders", name)
        _check("authenticationProviders", name, obj, object, ("authenticate",))
        _init("authenticationProviders", name, getattr(obj, "initialize", lambda p: None), props)
        method = getattr(obj, "method_name", None)
        if not isinstance(method, str) or not method:
            raise PluginError(f"authenticationProviders: plugin {name!r} has no method_name")
        ext.authentication_providers[method] = obj
    if "authenticationProviders" in props:
        ext.properties["authenticationProviders"] = ",".join(builtin)
    authz = props.get("authorizationProvider", "").strip()
    if authz not in DEFAULT_AUTHORIZATION_PROVIDERS:
        obj = load_plugin("authorizationProvider", authz)
        _check("authorizationProvider", authz, obj, AuthorizationProvider, ("can_produce", "can_consume"))
        ext.authorization_provider = obj
    return ext
