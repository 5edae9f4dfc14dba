"""Security core: authentication, authorization and TLS for the broker and web service.

Theory of operation: this package decides *who* a peer is and *what* it may
do; it never touches a socket.  The broker's CONNECT handler, the TLS
listeners and the HTTP middleware (owned by broker/service and web) call the
narrow API below and translate the typed errors once, through
``broker.errors`` (AuthenticationError -> ServerError 3 / HTTP 401,
AuthorizationError -> ServerError 4 / HTTP 403).

Wiring (at startup, off the hot path -- key files are read here)::

    cfg = AuthConfig.from_properties(broker_config.as_properties())
    authn = AuthenticationService.from_config(cfg, clock)       # aclose() at shutdown
    authz = AuthorizationService(cfg, metadata_store)
    perms = PermissionStore(metadata_store)                     # for the admin REST layer
    if cfg.broker_service_port_tls is not None:
        ssl_ctx = server_ssl_context_from_config(cfg)           # asyncio.start_server(..., ssl=ssl_ctx)

Binary protocol (per connection)::

    session = AuthSession(authn, clock,
                          supports_auth_refresh=connect.feature_flags.supports_auth_refresh,
                          tls_peer_cert=transport.get_extra_info("ssl_object") and
                                        peer_certificate(transport.get_extra_info("ssl_object")))
    result = await session.connect(connect.auth_method_name, connect.auth_data)  # AuthenticationError
    # -> CONNECTED; result.role is the principal (None when authentication is disabled)
    # On AuthenticationError: Java answers ERROR, but the official C++ client then retries until
    # its operation timeout.  To make it fail at once, answer CONNECTED anyway and reply to every
    # request with session.rejection (PARTITIONED_METADATA/LOOKUP Failed, ERROR otherwise), then
    # close; never serve a session whose is_authenticated is False.  (See session.py.)

    # every cfg.authentication_refresh_check_seconds:
    action = session.check_refresh()
    if action is RefreshAction.SEND_CHALLENGE:
        ch = session.challenge()        # send AUTH_CHALLENGE(ch.auth_method_name, ch.auth_data)
    elif action is RefreshAction.DISCONNECT:
        ...close the connection
    # on AUTH_RESPONSE:
    await session.on_auth_response(resp.auth_method_name, resp.auth_data)  # error -> close

    # before answering LOOKUP / PARTITIONED_METADATA, PRODUCER, SUBSCRIBE:
    await authz.check_lookup(session.role, topic)
    await authz.check_produce(session.role, topic)
    await authz.check_consume(session.role, topic, subscription)
    # A proxy (role in cfg.proxy_roles) forwards CONNECT.original_principal: pass it as
    # original_role=... and both must be allowed.  With cfg.authenticate_original_auth_data, first
    # verify CONNECT.original_auth_method/original_auth_data with authn.authenticate(...) and use
    # that role as original_role instead of trusting original_principal.

HTTP::

    result = await authn.authenticate_http(request.headers, tls_peer_cert)   # 401 on error
    authz.check_superuser(result.role)                        # clusters, brokers...
    await authz.check_tenant_admin(result.role, tenant)       # tenant / namespace admin ops
    await perms.grant_permission("t/ns", "role", ["produce"]) # POST .../permissions/{role}
    ops = OperationAuthorizer(authz)                          # one rule per Pulsar operation:
    await ops.check_topic_operation(role, topic, TopicOperation.TERMINATE)      # -> tenant admin
    await ops.check_namespace_operation(role, ns, NamespaceOperation.GET_TOPICS)
    await ops.check_tenant_operation(role, tenant, TenantOperation.CREATE_NAMESPACE)
    await ops.check_policy_operation(role, tenant, PolicyOperation.WRITE)

Modules: ``config`` (AuthConfig, key sources), ``providers`` (interface, TLS),
``token`` (JWT), ``basic`` (htpasswd, bcrypt, $apr1$), ``service``
(AuthenticationService), ``session`` (AUTH_CHALLENGE state machine),
``authorization`` (AuthorizationService), ``operations`` (Pulsar's Topic/Namespace/
Tenant operations -> rules, for a table-driven admin API), ``permissions`` (grant/revoke),
``tls`` (SSLContext builders, peer CN).
"""

from magnetar.broker.auth.authorization import AUTH_ACTIONS, AuthorizationService
from magnetar.broker.auth.config import AuthConfig, read_key_source
from magnetar.broker.auth.errors import AuthConfigError, AuthenticationError, AuthorizationError
from magnetar.broker.auth.operations import (
    NamespaceOperation,
    OperationAuthorizer,
    PolicyOperation,
    TenantOperation,
    TopicOperation,
)
from magnetar.broker.auth.permissions import InvalidPermissionError, PermissionStore
from magnetar.broker.auth.providers import AuthenticationProvider, AuthResult, Credentials
from magnetar.broker.auth.service import AuthenticationService
from magnetar.broker.auth.session import AuthChallenge, AuthSession, AuthSessionState, RefreshAction
from magnetar.broker.auth.tls import (
    client_ssl_context,
    peer_certificate,
    peer_common_name,
    server_ssl_context,
    server_ssl_context_from_config,
)

__all__ = [
    "AUTH_ACTIONS",
    "AuthChallenge",
    "AuthConfig",
    "AuthConfigError",
    "AuthResult",
    "AuthSession",
    "AuthSessionState",
    "AuthenticationError",
    "AuthenticationProvider",
    "AuthenticationService",
    "AuthorizationError",
    "AuthorizationService",
    "Credentials",
    "InvalidPermissionError",
    "NamespaceOperation",
    "OperationAuthorizer",
    "PermissionStore",
    "PolicyOperation",
    "RefreshAction",
    "TenantOperation",
    "TopicOperation",
    "client_ssl_context",
    "peer_certificate",
    "peer_common_name",
    "read_key_source",
    "server_ssl_context",
    "server_ssl_context_from_config",
]
