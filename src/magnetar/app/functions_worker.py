"""Hosting the functions worker in the standalone (Pulsar's ``functionsWorkerEnabled``).

Theory of operation: :func:`start_functions_worker` is called by the
standalone once its binary and HTTP ports serve.  When the property
``functionsWorkerEnabled`` is true (the standalone's default; ``magnetar
standalone --no-functions-worker`` turns it off, as Pulsar's switch does) it
builds a :class:`~magnetar.functions.worker.FunctionsWorker` on the
standalone's metadata store and data directory, pointed at the standalone's
own broker and web URLs, with the runtime named by ``functionRuntime``
(``process``, the default as in Pulsar's standalone, or ``thread``), puts it on
the web app's state (the ``/admin/v3/functions|sources|sinks`` routes find it
there), starts the functions it finds stored, and returns it; the standalone
closes it before the broker.

Credentials: the instances present the worker's client credentials to the
broker and to the web API -- Pulsar's worker keys ``clientAuthenticationPlugin``
/ ``clientAuthenticationParameters`` when set, else the broker's own
``brokerClientAuthenticationPlugin`` / ``brokerClientAuthenticationParameters``
(as Pulsar's standalone hands its worker).  With ``authenticationEnabled`` and
neither pair, instances cannot connect: that is logged once here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from magnetar.app.config import get_bool

log = logging.getLogger(__name__)


def worker_client_auth(props: Mapping[str, str]) -> Any:
    """The instances' :class:`~magnetar.functions.auth.ClientAuth` from the config keys."""
    from magnetar.functions.auth import ClientAuth

    for plugin_key, params_key in (
        ("clientAuthenticationPlugin", "clientAuthenticationParameters"),
        ("brokerClientAuthenticationPlugin", "brokerClientAuthenticationParameters"),
    ):
        plugin, params = (props.get(plugin_key) or "").strip(), (props.get(params_key) or "").strip()
        if plugin or params:
            return ClientAuth(plugin, params)
    if get_bool(props, "authenticationEnabled", False):
        log.warning(
            "authenticationEnabled but no clientAuthenticationPlugin/brokerClientAuthenticationPlugin: "
            "function instances connect without credentials and will be refused"
        )
    return ClientAuth()


async def start_functions_worker(standalone: Any, app: Any) -> Any:
    props = standalone.config.properties
    if not get_bool(props, "functionsWorkerEnabled", True):
        app.state.functions_worker = None
        return None
    from magnetar.connectors import builtin_code
    from magnetar.functions.worker import FunctionsWorker

    host = (
        "127.0.0.1" if standalone.config.bind_address in ("0.0.0.0", "") else standalone.config.bind_address
    )
    worker = FunctionsWorker(
        standalone._storage.metadata_store,
        standalone.config.data_dir,
        f"pulsar://{host}:{standalone.broker_port}",
        f"http://{host}:{standalone.web_port}",
        default_runtime=props.get("functionRuntime", "process"),
        builtin_code=builtin_code,
        client_auth=worker_client_auth(props),
    )
    app.state.functions_worker = worker
    await worker.start()
    return worker
