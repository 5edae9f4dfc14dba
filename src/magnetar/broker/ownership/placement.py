"""Placement of an unowned bundle: the live broker with the fewest owned bundles.

Theory of operation: each broker publishes how many bundles it owns in its
registration (``numBundles``); the looked-up broker picks the minimum.  Ties
(a cold cluster: everyone at 0) break by a hash of bundle and broker id, so
the bundles of a fresh namespace spread over the brokers instead of all
landing on whichever sorts first, and every broker computes the same choice
from the same view.  ``avoid`` (a broker that just unloaded the bundle) is
skipped when anyone else is alive.

The unload hint: a broker unloading a bundle writes an ephemeral node
``/loadbalance/unloaded/{tenant}/{ns}/{range}`` = ``{"avoid": id,
"destination": id|null}`` before releasing it and deletes it after a grace
period (or its session's end does), so whichever broker places the bundle next
moves it away (or to the ``destinationBroker`` the operator named).  The full load manager (CPU, bandwidth,
message rates, shedding) is a later issue; this is its seam.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from magnetar.broker.ownership.bundles import NamespaceBundle
from magnetar.broker.ownership.registry import BrokerInfo
from magnetar.metadata.api import MetadataError, MetadataStore, NotFound

UNLOAD_HINT_ROOT = "/loadbalance/unloaded"


def choose_broker(
    bundle_name: str, brokers: Sequence[BrokerInfo], avoid: str | None = None
) -> BrokerInfo | None:
    pool = [b for b in brokers if b.broker_id != avoid] or list(brokers)
    if not pool:
        return None
    return min(pool, key=lambda b: (b.num_bundles, zlib.crc32(f"{bundle_name}|{b.broker_id}".encode())))


@dataclass(frozen=True, slots=True)
class UnloadHint:
    avoid: str | None = None
    destination: str | None = None


def _hint_path(bundle: NamespaceBundle) -> str:
    return f"{UNLOAD_HINT_ROOT}/{bundle.namespace}/{bundle.range.name}"


async def write_unload_hint(
    store: MetadataStore, bundle: NamespaceBundle, avoid: str, destination: str | None
) -> None:
    value = json.dumps({"avoid": avoid, "destination": destination}).encode()
    try:
        await store.put(_hint_path(bundle), value, ephemeral=True)
    except MetadataError:  # only a hint: placement works without it
        pass


async def read_unload_hint(store: MetadataStore, bundle: NamespaceBundle) -> UnloadHint:
    try:
        got = await store.get(_hint_path(bundle))
        doc = json.loads(got.value) if got is not None else {}
    except (MetadataError, ValueError):
        return UnloadHint()
    if not isinstance(doc, dict):
        return UnloadHint()
    return UnloadHint(avoid=doc.get("avoid"), destination=doc.get("destination"))


async def drop_unload_hint(store: MetadataStore, bundle: NamespaceBundle) -> None:
    try:
        await store.delete(_hint_path(bundle))
    except (NotFound, MetadataError):
        pass
