"""``magnetar admin``: Pulsar's ``pulsar-admin``, as a client of the admin REST API.

Theory of operation: one argparse subtree mirroring ``pulsar-admin`` (groups
``clusters``, ``tenants``, ``namespaces``, ``topics``, ``topicPolicies`` /
``topic-policies``, ``brokers``, ``broker-stats``, ``bookies``, ``schemas``, ``transactions``)
with its subcommand and flag names; each group lives in its own module and
registers leaf commands whose ``admin_func`` does one or a few calls through
:class:`magnetar.admin_client.PulsarAdmin`.

Where to connect, in order of precedence: ``--admin-url``; the environment
variable ``MAGNETAR_ADMIN_URL``; ``webServiceUrl`` of the client.conf named by
``--config`` or by ``PULSAR_CLIENT_CONF``; ``http://localhost:8080``.  Auth
comes from ``--auth-plugin``/``--auth-params`` or the conf's
``authPlugin``/``authParams``; TLS from the flags or the conf's ``tls*`` keys.

Errors print as ``pulsar-admin`` prints them (HTTP status line, a blank line,
``Reason: <reason>``) with exit code 1; a connection failure prints the error
and ``Error connecting to: <url>``.

Test hook (not a global): the environment variable
``MAGNETAR_ADMIN_TRANSPORT=module:attribute`` names an ``httpx`` transport (or
a callable taking the admin URL and returning one) that the client uses instead
of the network.  It is read only when set and is not shown in ``--help``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path
from typing import Any

import httpx

from magnetar.admin_client import AdminConnectionError, AdminError, PulsarAdmin, TlsOptions, auth_from_plugin
from magnetar.admin_client.core import DEFAULT_ADMIN_URL
from magnetar.cli.admin import (
    brokers,
    clusters,
    functions,
    namespaces,
    resource_groups,
    schemas,
    tenants,
    topic_policies,
    topics,
    transactions,
)
from magnetar.cli.admin.common import OUTPUT_FORMATS, CliUsageError, Ctx, LazyGroups
from magnetar.common.errors import InvalidArgument

TRANSPORT_ENV = "MAGNETAR_ADMIN_TRANSPORT"
URL_ENV = "MAGNETAR_ADMIN_URL"
CLIENT_CONF_ENV = "PULSAR_CLIENT_CONF"
CONF_BYTES_MAX = 1024 * 1024

# group name, help, register(subparsers), aliases -- pulsar-admin's groups
GROUPS = (
    ("clusters", "operations on clusters (service URLs, peers, failure domains)", clusters.register, ()),
    ("tenants", "operations on tenants (admin roles, allowed clusters)", tenants.register, ()),
    ("namespaces", "operations on namespaces and their policies", namespaces.register, ()),
    (
        "topics",
        "operations on persistent and non-persistent topics",
        topics.register,
        ("persistent", "non-persistent"),
    ),
    (
        "topicPolicies",
        "topic-level policies (override the namespace's)",
        topic_policies.register,
        ("topic-policies",),
    ),
    (
        "brokers",
        "broker list, leader, owned namespaces, dynamic configuration, health",
        brokers.register_brokers,
        (),
    ),
    (
        "broker-stats",
        "broker statistics dumps (metrics, topics, load report)",
        brokers.register_broker_stats,
        (),
    ),
    ("bookies", "registered bookies and their rack placement", brokers.register_bookies, ()),
    ("resourcegroups", "resource groups: rates shared by namespaces", resource_groups.register, ()),
    ("schemas", "the schema registry: schemas of topics", schemas.register, ()),
    ("transactions", "transaction coordinators, buffers and pending acks", transactions.register, ()),
    (
        "functions",
        "Pulsar Functions: create, status, stats, state",
        functions.register_family("functions"),
        (),
    ),
    ("sources", "Pulsar IO sources", functions.register_family("sources"), ()),
    ("sinks", "Pulsar IO sinks", functions.register_family("sinks"), ()),
    (
        "ns-isolation-policy",
        "namespace isolation policies: which brokers serve which namespaces",
        clusters.register_ns_isolation,
        (),
    ),
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "admin",
        help="administer tenants, namespaces, topics, ... over the admin REST API (like pulsar-admin)",
        description="Administer a Pulsar or Magnetar cluster over its admin REST API, with pulsar-admin's "
        "command and flag names.  Global flags go before the command group: "
        "magnetar admin --admin-url http://host:8080 tenants list",
    )
    p.add_argument(
        "--admin-url",
        help=f"admin REST URL (default: ${URL_ENV}, webServiceUrl of --config, or {DEFAULT_ADMIN_URL})",
    )
    p.add_argument(
        "--config",
        dest="client_conf",
        help="client.conf file (keys webServiceUrl, authPlugin, authParams, tls*); "
        f"default ${CLIENT_CONF_ENV}",
    )
    p.add_argument(
        "--auth-plugin", help="auth plugin class, e.g. org.apache.pulsar.client.impl.auth.AuthenticationToken"
    )
    p.add_argument(
        "--auth-params", help="auth plugin params, e.g. token:<jwt>, file:///path/to/token, or JSON"
    )
    p.add_argument("--tls-allow-insecure", action="store_true", help="accept an untrusted server certificate")
    p.add_argument("--tls-trust-cert-path", help="CA certificate file to trust")
    p.add_argument(
        "--tls-enable-hostname-verification", action="store_true", help="verify the server hostname"
    )
    p.add_argument(
        "--request-timeout", type=float, default=None, help="request timeout in seconds (default 60)"
    )
    p.add_argument(
        "-o",
        "--output",
        choices=OUTPUT_FORMATS,
        default="text",
        help="output of getters: text (pulsar-admin style, default), json, or table",
    )
    gsub = p.add_subparsers(dest="admin_group", metavar="GROUP", required=True, action=LazyGroups)
    for name, help_text, register, aliases in GROUPS:
        gsub.add_group(name, help_text, register, aliases)
    p.set_defaults(func=run)


def _read_conf(path: str | None) -> dict[str, str]:
    path = path or os.environ.get(CLIENT_CONF_ENV)
    if not path:
        return {}
    from magnetar.app.config import parse_properties

    p = Path(path)
    try:
        if p.stat().st_size > CONF_BYTES_MAX:
            raise CliUsageError(f"{p} is larger than {CONF_BYTES_MAX} bytes; not a client.conf")
        return parse_properties(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise CliUsageError(f"cannot read config {p}: {e.strerror or e}") from None


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def _transport(url: str) -> Any:
    spec = os.environ.get(TRANSPORT_ENV)
    if not spec:
        return None
    module, _, attr = spec.partition(":")
    obj = getattr(importlib.import_module(module), attr)
    if isinstance(obj, httpx.BaseTransport):
        return obj
    return obj(url)


def make_admin(args: argparse.Namespace) -> PulsarAdmin:
    conf = _read_conf(args.client_conf)
    url = args.admin_url or os.environ.get(URL_ENV) or conf.get("webServiceUrl") or DEFAULT_ADMIN_URL
    url = url.rstrip("/")
    auth = auth_from_plugin(
        args.auth_plugin or conf.get("authPlugin"), args.auth_params or conf.get("authParams")
    )
    tls = TlsOptions(
        trust_certs_file_path=args.tls_trust_cert_path or conf.get("tlsTrustCertsFilePath") or None,
        allow_insecure_connection=args.tls_allow_insecure or _truthy(conf.get("tlsAllowInsecureConnection")),
        enable_hostname_verification=args.tls_enable_hostname_verification
        or _truthy(conf.get("tlsEnableHostnameVerification")),
    )
    timeout_s = args.request_timeout or 60.0
    return PulsarAdmin(url, auth=auth, timeout_s=timeout_s, tls=tls, transport=_transport(url))


def run(args: argparse.Namespace, out: Any = None, err: Any = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        admin = make_admin(args)
    except InvalidArgument as e:
        print(f"magnetar admin: {e.message}", file=err)
        return 1
    ctx = Ctx(admin, args.output, out, err)
    try:
        return int(args.admin_func(ctx, args) or 0)
    except AdminError as e:
        print(f"HTTP {e.status} {_phrase(e.status)}\n\nReason: {e.reason}", file=err)
        return 1
    except AdminConnectionError as e:
        print(f"{e.message}\n\nError connecting to: {admin.config.service_url}", file=err)
        return 1
    except InvalidArgument as e:
        print(f"magnetar admin: {e.message}", file=err)
        return 1
    finally:
        admin.close()


def _phrase(status: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""
