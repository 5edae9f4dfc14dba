"""Authentication and authorization on a binary-protocol connection (``broker.auth`` wired in).

Theory of operation: ``broker.auth`` decides who a peer is and what it may do;
this module asks it at the right moments of a connection's life:

* CONNECT -- an :class:`AuthSession` authenticates ``auth_method_name`` /
  ``auth_data`` (plus the TLS client certificate).  A refusal is *kept*, not
  answered with ERROR: the C++ client retries a refused CONNECT until its
  timeout, so we answer CONNECTED and then fail every request with the
  AuthenticationError (in the form that request expects) and close -- the
  client fails fast.
* LOOKUP / PARTITIONED_METADATA, PRODUCER, SUBSCRIBE -- the topic's namespace
  must exist (TopicNotFound otherwise, whatever the role), then the role must be
  allowed to look up, produce or consume (AuthorizationError, ServerError 4).
* refresh -- every ``authenticationRefreshCheckSeconds`` the session says
  whether to send AUTH_CHALLENGE (credentials about to expire, client supports
  refresh) or to drop the connection; AUTH_RESPONSE carries the new credential.

With authentication and authorization disabled (the default) every check
passes at once and nothing is sent.

Proxies: a CONNECT from ``magnetar proxy`` (or Pulsar's) carries the client's
role in ``original_principal``.  It is honoured only when the connection's own
authenticated role is one of ``proxyRoles``; then every authorization check
is made for both roles (``AuthorizationService`` semantics: the original role
must be allowed, and the proxy's too unless it is a super-user).  With
``authenticateOriginalAuthData`` the original credential
(``original_auth_method``/``original_auth_data``) is authenticated and its role
used instead of trusting the name.  A non-proxy role that sends an
``original_principal`` is refused like a failed authentication.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from magnetar.broker.auth import AuthenticationError, AuthorizationService, AuthSession
from magnetar.broker.auth.session import RefreshAction
from magnetar.broker.auth.tls import peer_certificate
from magnetar.broker.errors import BrokerError
from magnetar.broker.service.names import parse_topic
from magnetar.protocol import server_commands as cmds
from magnetar.protocol.enums import CommandType as T

if TYPE_CHECKING:
    from magnetar.broker.service.connection import Connection
    from magnetar.protocol.connection import ConnectRequested

log = logging.getLogger(__name__)

_TOPIC_COMMANDS = (T.LOOKUP, T.PARTITIONED_METADATA, T.PRODUCER, T.SUBSCRIBE, T.GET_OR_CREATE_SCHEMA)


class ConnectionSecurity:
    def __init__(self, cnx: Connection) -> None:
        self.cnx = cnx
        self.session: AuthSession | None = None
        self.original_principal: str | None = None
        self._original_rejection: BrokerError | None = None

    @property
    def _authz(self) -> AuthorizationService:
        return self.cnx.service.authorization

    @property
    def role(self) -> str | None:
        return self.session.role if self.session else None

    async def on_connect(self, event: ConnectRequested) -> None:
        svc = self.cnx.service
        ssl_object = self.cnx.writer.get_extra_info("ssl_object")
        self.session = AuthSession(
            svc.authentication,
            svc.clock,
            supports_auth_refresh="supports_auth_refresh" in event.feature_flags,
            tls_peer_cert=peer_certificate(ssl_object) if ssl_object is not None else None,
        )
        try:
            await self.session.connect(event.auth_method_name, event.auth_data or b"")
        except AuthenticationError as exc:
            log.info("authentication failed for %s: %s", self.cnx.peer_address, exc.message)
            return
        if event.original_principal is not None and svc.authentication.enabled:
            await self._on_original_principal(event)

    async def _on_original_principal(self, event: ConnectRequested) -> None:
        """A proxy speaks for a client: accept its role only from a proxy role."""
        if not self._authz.is_proxy_role(self.role):
            self._original_rejection = AuthenticationError(
                f"role {self.role!r} sent an original principal but is not one of proxyRoles"
            )
            log.info("refusing %s: %s", self.cnx.peer_address, self._original_rejection.message)
            return
        original = event.original_principal
        if self.cnx.service.auth_config.authenticate_original_auth_data:
            try:
                result = await self.cnx.service.authentication.authenticate(
                    event.original_auth_method, (event.original_auth_data or "").encode()
                )
            except AuthenticationError as exc:
                self._original_rejection = exc
                return
            original = result.role
        self.original_principal = original

    @property
    def rejected(self) -> BrokerError | None:
        """The CONNECT refusal every request is answered with (None when authenticated)."""
        if self._original_rejection is not None:
            return self._original_rejection
        if self.session is None or self.session.is_authenticated:
            return None
        return self.session.rejection or AuthenticationError("Authentication failed")

    async def authorize(self, frame: Any) -> None:
        """Raise AuthorizationError unless the role may issue this command."""
        if not self._authz.enabled:
            return
        cmd = frame.command
        t = frame.type
        if t in _TOPIC_COMMANDS:
            # A namespace that does not exist is TopicNotFound for everyone, as in Pulsar: never
            # an AuthorizationError for a role that could not have been granted anything there.
            await self.cnx.service.require_namespace(parse_topic(cmd.topic).namespace)
        original = self.original_principal
        if t in (T.LOOKUP, T.PARTITIONED_METADATA):
            await self._authz.check_lookup(self.role, cmd.topic, original)
        elif t in (T.PRODUCER, T.GET_OR_CREATE_SCHEMA):  # registering a schema is producing
            await self._authz.check_produce(self.role, cmd.topic, original)
        elif t == T.SUBSCRIBE:
            await self._authz.check_consume(self.role, cmd.topic, cmd.subscription, original)

    def refresh_tick(self) -> bool:
        """Periodic check; False means: drop the connection (credentials expired)."""
        if self.session is None:
            return True
        action = self.session.check_refresh()
        if action is RefreshAction.SEND_CHALLENGE:
            ch = self.session.challenge()
            frame = cmds.auth_challenge(self.cnx.proto.server_version, ch.auth_method_name, ch.auth_data)
            self.cnx.write(self.cnx.proto.send_auth_challenge(frame))
        return action is not RefreshAction.DISCONNECT

    async def on_auth_response(self, cmd: Any) -> bool:
        """AUTH_RESPONSE; False means the refreshed credential was refused (drop the connection)."""
        if self.session is None:
            return False
        response = cmd.response if cmd.HasField("response") else None
        method = (
            response.auth_method_name
            if response is not None and response.HasField("auth_method_name")
            else None
        )
        data = response.auth_data if response is not None and response.HasField("auth_data") else b""
        try:
            await self.session.on_auth_response(method, data)
        except BrokerError as exc:
            log.info("credential refresh refused for %s: %s", self.cnx.peer_address, exc.message)
            return False
        return True
