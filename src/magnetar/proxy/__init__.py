"""Pulsar's proxy: one stateless gateway in front of a cluster's brokers.

Theory of operation (the shape of Pulsar's ``pulsar-proxy``): a client gives
the proxy's URL as its service URL.  On a connection without
``proxy_to_broker_url`` the proxy is the client's lookup service: it answers
CONNECT itself (authenticating the client with the broker's providers,
``broker.auth``), and answers LOOKUP, PARTITIONED_METADATA,
GET_TOPICS_OF_NAMESPACE and GET_SCHEMA by asking a broker over a link of its
own -- following ``Redirect`` answers until a broker says ``Connect`` -- and
returns that owner's URL with ``proxy_through_service_url=true``.  The
official client then opens a new connection *to the proxy* whose CONNECT
carries ``proxy_to_broker_url`` = the owner; the proxy connects to that broker
(CONNECT with its own credentials plus the client's role as
``original_principal``, which the broker honours for roles in its
``proxyRoles``), relays the broker's CONNECTED, and from then on copies bytes
both ways without parsing them.  Admin HTTP (``/admin/*``, ``/lookup/*``) is
forwarded to a broker's web service.

Modules: ``config`` (ProxyConfig from proxy.conf keys), ``discovery`` (which
brokers exist: ``/loadbalance/brokers`` or the configured URLs), ``links``
(frame I/O and a proxy->broker connection), ``connection`` (one client
connection: handshake, lookups, tunnel), ``web`` (HTTP forwarding), ``server``
(the process: listeners, lifecycle, ready line).
"""
