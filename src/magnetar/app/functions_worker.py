"""Hosting the functions worker in the standalone (Pulsar's ``functionsWorkerEnabled``).

Theory of operation: :func:`start_functions_worker` is called by the
standalone once its binary and HTTP ports serve.  When the property
``functionsWorkerEnabled`` is true (the standalone's default; ``magnetar
standalone --no-functions-worker`` turns it off, as Pulsar's switch does) it
puts a :class:`FunctionsWorkerHandle` on the web app's state (the
``/admin/v3/functions|sources|sinks`` routes ``await handle.get()``) and
returns it; the standalone closes it before the broker.

The handle builds a :class:`~magnetar.functions.worker.FunctionsWorker` on
the standalone's metadata store and data directory, pointed at the
standalone's own broker and web URLs, with the runtime named by
``functionRuntime`` (``process``, the default as in Pulsar's standalone, or
``thread``), and starts the functions it finds stored.  When functions are
stored that happens at start-up, as before; when none are, it happens on the
first functions request -- the worker's modules (the Function API, runtimes,
the client) are then neither imported nor resident in a standalone that runs
no function (start-up time and idle memory, issue 15).

Credentials: the instances present the worker's client credentials to the
broker and to the web API -- Pulsar's worker keys ``clientAuthenticationPlugin``
/ ``clientAuthenticationParameters`` when set, else the broker's own
``brokerClientAuthenticationPlugin`` / ``brokerClientAuthenticationParameters``
(as Pulsar's standalone hands its worker).  With ``authenticationEnabled`` and
neither pair, instances cannot connect: that is logged once here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from magnetar.app.config import get_bool
from magnetar.metadata.api import NotFound

FUNCTIONS_ROOT = "/admin/functions"  # functions.worker.FUNCTIONS_ROOT: where functions are stored


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


class FunctionsWorkerHandle:
    """The worker, built and started once, by whoever needs it first."""

    def __init__(self, standalone: Any) -> None:
        self._standalone = standalone
        self._lock = asyncio.Lock()
        self.worker: Any = None

    async def get(self) -> Any:
        if self.worker is None:
            async with self._lock:
                if self.worker is None:
                    worker = self._build()
                    await worker.start()
                    self.worker = worker
        return self.worker

    def _build(self) -> Any:
        from magnetar.connectors import builtin_code
        from magnetar.functions.worker import FunctionsWorker

        sa = self._standalone
        host = "127.0.0.1" if sa.config.bind_address in ("0.0.0.0", "") else sa.config.bind_address
        return FunctionsWorker(
            sa._storage.metadata_store,
            sa.config.data_dir,
            f"pulsar://{host}:{sa.broker_port}",
            f"http://{host}:{sa.web_port}",
            default_runtime=sa.config.properties.get("functionRuntime", "process"),
            builtin_code=builtin_code,
            client_auth=worker_client_auth(sa.config.properties),
        )

    async def aclose(self) -> None:
        async with self._lock:  # a start in progress finishes first, then is closed
            if self.worker is not None:
                await self.worker.aclose()


async def start_functions_worker(standalone: Any, app: Any) -> FunctionsWorkerHandle | None:
    props = standalone.config.properties
    if not get_bool(props, "functionsWorkerEnabled", True):
        app.state.functions_worker = None
        return None
    handle = FunctionsWorkerHandle(standalone)
    app.state.functions_worker = handle
    try:
        stored = await standalone._storage.metadata_store.children(FUNCTIONS_ROOT)
    except NotFound:
        stored = []
    if stored:  # functions to run again: start the worker now, as before
        await handle.get()
    return handle
