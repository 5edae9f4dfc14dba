"""Broker interceptors: plugins that see connections, commands, publishes, dispatches and acks.

Theory of operation: Pulsar's ``BrokerInterceptor`` in Python.  A plugin
subclasses :class:`BrokerInterceptor` and overrides the hooks it needs; the
base class makes every hook a no-op.  The broker holds *one* object in
``BrokerService.interceptor``: ``None`` when ``brokerInterceptors`` is empty
(the default), otherwise an :class:`InterceptorChain` over the configured
plugins in configuration order.  Every hook site in the broker is::

    ic = service.interceptor
    if ic is not None:
        ic.on_...(...)

so an unconfigured broker pays one attribute load and one ``is None`` test
per site -- nothing is called, nothing allocated.

Hooks run on the event loop, synchronously, in the middle of the broker's
hot paths: they must be quick and must not block.  ``on_pulsar_command`` may
refuse a command by raising a ``BrokerError`` (the client gets that error in
the form its request expects, as for any failed command); an exception of
any other kind from any hook is logged and swallowed -- a faulty plugin does
not break the broker's paths.  ``on_web_request`` is called for every HTTP
request by a middleware that exists only when an interceptor is configured;
it may return a status code to refuse the request (answered with
``{"reason": ...}``).

Hook arguments are the broker's own objects (connection, producer, consumer);
plugins should read their documented attributes (``producer.topic.name``,
``producer.producer_name``, ``consumer.subscription.name``,
``consumer.consumer_name``, ``cnx.peer_address``) and not change them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from magnetar.broker.errors import BrokerError

log = logging.getLogger(__name__)


class BrokerInterceptor:
    """Override what you need; every hook defaults to doing nothing."""

    def initialize(self, service: Any) -> None:
        """Called once before the broker accepts connections; raise to fail the start-up."""

    def on_connection_created(self, cnx: Any) -> None: ...

    def on_connection_closed(self, cnx: Any) -> None: ...

    def on_pulsar_command(self, command_type: str, command: Any, cnx: Any) -> None:
        """Every command from a client (CONNECT excluded); raise a BrokerError to refuse it."""

    def on_message_publish(self, producer: Any, headers_and_payload: bytes) -> None:
        """A message (or batch entry) accepted for storage, before it is written."""

    def on_message_dispatch(self, consumer: Any, ledger_id: int, entry_id: int, data: bytes) -> None:
        """An entry about to be sent to a consumer."""

    def on_message_ack(self, consumer: Any, positions: Sequence[tuple[int, int]], cumulative: bool) -> None:
        """A consumer acknowledged these (ledger, entry) positions."""

    def on_web_request(self, method: str, path: str, headers: dict[str, str]) -> int | None:
        """An HTTP request before it is handled; return an HTTP status to refuse it."""
        return None

    def close(self) -> None:
        """The broker stops."""


_HOOKS = (
    "on_connection_created",
    "on_connection_closed",
    "on_pulsar_command",
    "on_message_publish",
    "on_message_dispatch",
    "on_message_ack",
    "on_web_request",
    "close",
)


class InterceptorChain(BrokerInterceptor):
    """Calls each interceptor in order; a non-BrokerError failure is logged, not raised.

    Per hook it keeps only the interceptors that override it (bound methods, found once):
    a hook nobody overrides is a loop over an empty tuple.
    """

    def __init__(self, interceptors: Sequence[tuple[str, BrokerInterceptor]]) -> None:
        self.interceptors = list(interceptors)
        self._by_hook: dict[str, tuple[tuple[str, Any], ...]] = {
            hook: tuple(
                (name, getattr(ic, hook))
                for name, ic in self.interceptors
                if getattr(type(ic), hook, None) is not getattr(BrokerInterceptor, hook)
            )
            for hook in _HOOKS
        }
        self._dispatch = self._by_hook["on_message_dispatch"]
        self._publish = self._by_hook["on_message_publish"]
        self._command = self._by_hook["on_pulsar_command"]

    def _each(self, hook: str, *args: Any, may_refuse: bool = False) -> None:
        for name, fn in self._by_hook[hook]:
            try:
                fn(*args)
            except BrokerError:
                if may_refuse:
                    raise
                log.exception("broker interceptor %s raised in %s (only commands can be refused)", name, hook)
            except Exception:
                log.exception("broker interceptor %s failed in %s", name, hook)

    def initialize(self, service: Any) -> None:
        for _, ic in self.interceptors:
            ic.initialize(service)  # a failure here fails the start-up (reported by the loader)

    def on_connection_created(self, cnx: Any) -> None:
        self._each("on_connection_created", cnx)

    def on_connection_closed(self, cnx: Any) -> None:
        self._each("on_connection_closed", cnx)

    def on_pulsar_command(self, command_type: str, command: Any, cnx: Any) -> None:
        if self._command:
            self._each("on_pulsar_command", command_type, command, cnx, may_refuse=True)

    def on_message_publish(self, producer: Any, headers_and_payload: bytes) -> None:
        if self._publish:
            self._each("on_message_publish", producer, headers_and_payload)

    def on_message_dispatch(self, consumer: Any, ledger_id: int, entry_id: int, data: bytes) -> None:
        if self._dispatch:
            self._each("on_message_dispatch", consumer, ledger_id, entry_id, data)

    def on_message_ack(self, consumer: Any, positions: Sequence[tuple[int, int]], cumulative: bool) -> None:
        self._each("on_message_ack", consumer, positions, cumulative)

    def on_web_request(self, method: str, path: str, headers: dict[str, str]) -> int | None:
        for name, fn in self._by_hook["on_web_request"]:
            try:
                status = fn(method, path, headers)
            except Exception:
                log.exception("broker interceptor %s failed in on_web_request", name)
                continue
            if status is not None:
                return status
        return None

    def close(self) -> None:
        self._each("close")
