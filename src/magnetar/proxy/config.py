"""The proxy's configuration: one frozen model from Pulsar's ``proxy.conf`` keys.

Theory of operation: ``magnetar proxy --config proxy.conf`` reads the same
``key=value`` file Pulsar's proxy does; :meth:`ProxyConfig.from_properties`
types the keys the proxy uses (the list lives in
:data:`magnetar.app.config_keys.PROXY_KEYS`, so unknown keys are named once
at start-up) and refuses contradictions with a :class:`ProxyConfigError`
naming the key.  Where the proxy finds brokers:

* ``metadataStoreUrl`` (or the older ``zookeeperServers``) -- the brokers
  registered under ``/loadbalance/brokers`` (and, while none registered, the
  cluster record ``/admin/clusters/{clusterName}``);
* ``brokerServiceURL`` / ``brokerWebServiceURL`` -- fixed broker URLs
  (Pulsar's "static discovery"), used when no metadata store is given.

Security keys (``authenticationEnabled``, ``authenticationProviders``,
``tokenSecretKey`` ...) are the broker's and are typed by
:class:`~magnetar.broker.auth.AuthConfig`; ``brokerClientAuthenticationPlugin``
/ ``brokerClientAuthenticationParameters`` are the proxy's own credentials
towards the brokers, and ``forwardAuthorizationCredentials`` also passes the
client's credential as ``original_auth_data``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_SERVICE_PORT = 6650
DEFAULT_WEB_SERVICE_PORT = 8080


class ProxyConfigError(ValueError):
    pass


def _bool(props: Mapping[str, str], key: str, default: bool) -> bool:
    raw = (props.get(key) or "").strip().lower()
    if not raw:
        return default
    if raw in ("true", "yes", "on", "1"):
        return True
    if raw in ("false", "no", "off", "0"):
        return False
    raise ProxyConfigError(f"{key} must be true or false, got {raw!r}")


def _int(props: Mapping[str, str], key: str, default: int, low: int = 0, high: int = 2**31) -> int:
    raw = (props.get(key) or "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ProxyConfigError(f"{key} must be an integer, got {raw!r}") from None
    if not low <= value <= high:
        raise ProxyConfigError(f"{key} must be in {low}..{high}, got {value}")
    return value


def _urls(raw: str | None) -> tuple[str, ...]:
    """``pulsar://h1:6650,h2:6650`` -> each broker's URL (a multi-host service URL)."""
    raw = (raw or "").strip()
    if not raw:
        return ()
    scheme, sep, hosts = raw.partition("://")
    if not sep:
        raise ProxyConfigError(f"{raw!r} is not a URL (pulsar://host:port or http://host:port)")
    return tuple(f"{scheme}://{h.strip().rstrip('/')}" for h in hosts.split(",") if h.strip())


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    cluster_name: str = ""
    metadata_store_url: str = ""
    broker_service_urls: tuple[str, ...] = ()
    broker_web_service_urls: tuple[str, ...] = ()
    bind_address: str = "0.0.0.0"
    advertised_address: str = "127.0.0.1"
    service_port: int = DEFAULT_SERVICE_PORT
    web_service_port: int = DEFAULT_WEB_SERVICE_PORT
    authentication_enabled: bool = False
    forward_authorization_credentials: bool = False
    max_concurrent_inbound_connections: int = 10_000
    max_concurrent_lookup_requests: int = 50_000
    # brokerProxyAllowedTargetPorts: ports a client may ask to be tunnelled to besides known brokers
    allowed_target_ports: tuple[int, ...] = ()
    metadata_session_timeout_ms: int = 30_000
    connect_timeout_ms: int = 10_000
    max_message_size: int = 5 * 1024 * 1024 + 10 * 1024

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ProxyConfig:
        metadata = (props.get("metadataStoreUrl") or "").strip()
        if not metadata and (props.get("zookeeperServers") or "").strip():
            metadata = "zk:" + props["zookeeperServers"].strip()
        ports = tuple(
            int(p)
            for p in (props.get("brokerProxyAllowedTargetPorts") or "").replace(" ", "").split(",")
            if p.isdigit()
        )
        cfg = cls(
            cluster_name=(props.get("clusterName") or "").strip(),
            metadata_store_url=metadata,
            broker_service_urls=_urls(props.get("brokerServiceURL")),
            broker_web_service_urls=_urls(props.get("brokerWebServiceURL")),
            bind_address=(props.get("bindAddress") or "0.0.0.0").strip(),
            advertised_address=(props.get("advertisedAddress") or "127.0.0.1").strip(),
            service_port=_int(props, "servicePort", DEFAULT_SERVICE_PORT, 0, 65535),
            web_service_port=_int(props, "webServicePort", DEFAULT_WEB_SERVICE_PORT, 0, 65535),
            authentication_enabled=_bool(props, "authenticationEnabled", False),
            forward_authorization_credentials=_bool(props, "forwardAuthorizationCredentials", False),
            max_concurrent_inbound_connections=_int(props, "maxConcurrentInboundConnections", 10_000, 1),
            max_concurrent_lookup_requests=_int(props, "maxConcurrentLookupRequests", 50_000, 1),
            allowed_target_ports=ports,
            metadata_session_timeout_ms=_int(props, "metadataStoreSessionTimeoutMillis", 30_000, 100),
            connect_timeout_ms=_int(props, "brokerClientConnectTimeoutMs", 10_000, 100),
            max_message_size=_int(props, "maxMessageSize", 5 * 1024 * 1024, 1024) + 10 * 1024,
        )
        cfg.validate()
        return cfg

    def validate(self) -> None:
        if not self.metadata_store_url and not self.broker_service_urls:
            raise ProxyConfigError(
                "the proxy needs brokers: give metadataStoreUrl (discovery through the metadata store) "
                "or brokerServiceURL (and brokerWebServiceURL for admin HTTP)"
            )
        for url in self.broker_service_urls:
            if not url.startswith(("pulsar://", "pulsar+ssl://")):
                raise ProxyConfigError(f"brokerServiceURL {url!r} must start with pulsar://")
        for url in self.broker_web_service_urls:
            if not url.startswith(("http://", "https://")):
                raise ProxyConfigError(f"brokerWebServiceURL {url!r} must start with http://")
