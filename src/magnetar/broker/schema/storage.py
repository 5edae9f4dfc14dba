"""Durable, versioned schema storage on the metadata store.

Theory of operation: a topic's schemas live under its *schema id* -- ``tenant/ns/topic`` of
the base topic (no domain, no ``-partition-N``), so every partition, and the persistent and
non-persistent topic of that name, share one history -- at ``/schemas/{schema id}``:

* the **locator** is the value of ``/schemas/{id}``: JSON ``{"versions": [[version, node,
  hash, deleted, timestamp_ms], ...]}``, oldest first.  It is the commit point: a version
  exists when the locator lists it.  ``node`` names the data node ("" for a deletion marker).
* each version's **data node** is a child ``/schemas/{id}/v-NNNNNNNNNN`` created with a
  *sequential* put, so two brokers racing to add a version never write the same node:
  JSON ``{"name", "type", "properties", "data" (base64)}``.  Data nodes are immutable.

Appending is: write the data node, then compare-and-set the locator with the version of the
locator that was read.  If the CAS loses (:class:`BadVersion`), the data node is deleted and
the caller re-reads and re-decides (the registry's loop).  A crash between the two steps
leaves an unreferenced data node, which nothing reads and :meth:`delete_all` removes with the
topic.  Pulsar keeps the same split (locator in ZooKeeper, data in BookKeeper ledgers); we
keep data in the metadata store too because schemas are small -- definitions are capped at
``schema_bytes_max`` (256 KiB by default, far above real Avro/Protobuf definitions) and the
number of versions at ``schema_versions_max``, so every node stays well under ZooKeeper's
~1 MiB value limit.  A definition over the cap is refused with :class:`SchemaTooLargeError`
before anything is written.

Decoded locators are cached (bounded LRU) and reused while the stored bytes are unchanged --
the identical-schema lookup of every PRODUCER reads the locator.  Reads of data nodes go
through a bounded LRU cache; an entry is used only if the locator's
hash and timestamp for the version match it, so a history deleted and recreated elsewhere
(which may reuse sequential node names) is never served stale.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import OrderedDict
from dataclasses import dataclass

from magnetar.broker.schema.errors import InvalidSchemaError, SchemaTooLargeError
from magnetar.broker.schema.types import SchemaInfo, SchemaRecord, SchemaType
from magnetar.common.naming import TopicName
from magnetar.metadata import api as md

SCHEMAS_ROOT = "/schemas"
_DATA_PREFIX = "v-"


def schema_id(topic: str | TopicName) -> str:
    """``tenant/ns/encoded-topic`` of the base topic (Pulsar's ``TopicName.getSchemaName``)."""
    tn = topic if isinstance(topic, TopicName) else TopicName.get(topic)
    return tn.base().rest_path(include_domain=False)


@dataclass(frozen=True, slots=True)
class LocatorEntry:
    version: int
    node: str
    hash: str
    deleted: bool
    timestamp_ms: int

    def to_json(self) -> list:
        return [self.version, self.node, self.hash, self.deleted, self.timestamp_ms]

    @classmethod
    def from_json(cls, raw: list) -> LocatorEntry:
        v, node, h, deleted, ts = raw
        return cls(int(v), str(node), str(h), bool(deleted), int(ts))


@dataclass(frozen=True, slots=True)
class Locator:
    """The version index of one topic plus the metadata version to CAS against (-1: absent)."""

    entries: tuple[LocatorEntry, ...]
    stat_version: int

    @property
    def next_version(self) -> int:
        return self.entries[-1].version + 1 if self.entries else 0

    def live(self) -> tuple[LocatorEntry, ...]:
        """Entries after the last deletion marker (what compatibility and reuse look at)."""
        for i in range(len(self.entries) - 1, -1, -1):
            if self.entries[i].deleted:
                return self.entries[i + 1 :]
        return self.entries

    def find(self, version: int) -> LocatorEntry | None:
        for e in self.entries:
            if e.version == version:
                return e
        return None


class SchemaStorage:
    def __init__(
        self,
        store: md.MetadataStore,
        *,
        schema_bytes_max: int,
        schema_versions_max: int,
        cache_entries_max: int = 1024,
    ) -> None:
        self._store = store
        self._schema_bytes_max = schema_bytes_max
        self._schema_versions_max = schema_versions_max
        self._cache_entries_max = cache_entries_max
        self._cache: OrderedDict[tuple[str, str, int], SchemaInfo] = OrderedDict()
        # Decoded locators by schema id, reused while the stored bytes are unchanged.
        self._locators: OrderedDict[str, tuple[bytes, tuple[LocatorEntry, ...]]] = OrderedDict()

    @staticmethod
    def path(sid: str) -> str:
        return f"{SCHEMAS_ROOT}/{sid}"

    async def read_locator(self, sid: str) -> Locator:
        got = await self._store.get(self.path(sid))
        if got is None:
            return Locator((), -1)
        if not got.value:  # created implicitly as the parent of a data node
            return Locator((), got.stat.version)
        cached = self._locators.get(sid)
        if cached is not None and cached[0] == got.value:
            self._locators.move_to_end(sid)
            return Locator(cached[1], got.stat.version)
        try:
            raw = json.loads(got.value)
            entries = tuple(LocatorEntry.from_json(e) for e in raw["versions"])
        except (ValueError, KeyError, TypeError) as e:
            raise InvalidSchemaError(f"Corrupt schema locator at {self.path(sid)}: {e}") from None
        self._locators[sid] = (got.value, entries)
        if len(self._locators) > self._cache_entries_max:
            self._locators.popitem(last=False)
        return Locator(entries, got.stat.version)

    def check_size(self, info: SchemaInfo) -> None:
        size = info.size_bytes()
        if size > self._schema_bytes_max:
            raise SchemaTooLargeError(
                f"Schema definition is {size} bytes, over the limit of {self._schema_bytes_max} bytes"
            )

    async def append(self, sid: str, locator: Locator, info: SchemaInfo | None, timestamp_ms: int) -> int:
        """Add a version (``info``) or a deletion marker (``None``) after ``locator``.

        Returns the new version; raises :class:`md.BadVersion` if the locator changed since it
        was read (nothing is left behind then).
        """
        if info is not None:
            self.check_size(info)
        if len(locator.entries) >= self._schema_versions_max:
            raise InvalidSchemaError(
                f"Topic {sid} already has {len(locator.entries)} schema versions (limit {self._schema_versions_max});"
                " delete the schema before adding more"
            )
        version = locator.next_version
        expected = locator.stat_version
        if expected == -1:
            # Create the (empty) locator node first: a data node would create it implicitly and
            # make our create-if-absent CAS fail.  AlreadyExists is a BadVersion: re-read.
            expected = (await self._store.put(self.path(sid), b"", -1)).version
        node, digest = "", ""
        if info is not None:
            stat = await self._store.put(
                f"{self.path(sid)}/{_DATA_PREFIX}", _encode_data(info), sequential=True
            )
            node = stat.path.rsplit("/", 1)[1]
            digest = info.schema_hash()
        entry = LocatorEntry(version, node, digest, info is None, timestamp_ms)
        value = json.dumps({"versions": [e.to_json() for e in (*locator.entries, entry)]}).encode()
        try:
            await self._store.put(self.path(sid), value, expected)
        except (md.BadVersion, md.NotFound) as e:
            # Lost the race (or the history was deleted meanwhile): leave nothing behind.
            if node:
                await self._delete_quietly(f"{self.path(sid)}/{node}")
            if isinstance(e, md.NotFound):
                raise md.BadVersion(f"schema locator {self.path(sid)} was deleted") from e
            raise
        return version

    async def read(self, sid: str, entry: LocatorEntry) -> SchemaRecord:
        """The stored version ``entry`` (a deletion marker comes back as an empty NONE schema)."""
        if entry.deleted:
            return SchemaRecord(entry.version, SchemaInfo("", SchemaType.NONE), entry.timestamp_ms, True)
        key = (f"{sid}/{entry.node}", entry.hash, entry.timestamp_ms)
        info = self._cache.get(key)
        if info is None:
            got = await self._store.get(f"{self.path(sid)}/{entry.node}")
            if got is None:
                raise InvalidSchemaError(
                    f"Schema version {entry.version} of {sid} lost its data node {entry.node}"
                )
            info = _decode_data(got.value, sid, entry)
            self._cache[key] = info
            if len(self._cache) > self._cache_entries_max:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return SchemaRecord(entry.version, info, entry.timestamp_ms, False)

    async def delete_all(self, sid: str) -> None:
        """Remove the locator and every data node (with the topic, or a forced delete)."""
        await self._store.delete_recursive(self.path(sid))
        prefix = f"{sid}/"
        for key in [k for k in self._cache if k[0].startswith(prefix)]:
            del self._cache[key]

    async def _delete_quietly(self, path: str) -> None:
        try:
            await self._store.delete(path)
        except md.NotFound:
            pass


def _encode_data(info: SchemaInfo) -> bytes:
    return json.dumps(
        {
            "name": info.name,
            "type": info.type.name,
            "properties": dict(info.properties),
            "data": base64.b64encode(info.schema_data).decode("ascii"),
        }
    ).encode()


def _decode_data(value: bytes, sid: str, entry: LocatorEntry) -> SchemaInfo:
    try:
        raw = json.loads(value)
        info = SchemaInfo(
            str(raw["name"]),
            SchemaType[raw["type"]],
            base64.b64decode(raw["data"], validate=True),
            {str(k): str(v) for k, v in raw["properties"].items()},
        )
    except (ValueError, KeyError, TypeError, AttributeError, binascii.Error) as e:
        raise InvalidSchemaError(f"Corrupt schema version {entry.version} of {sid}: {e}") from None
    if info.schema_hash() != entry.hash:
        raise InvalidSchemaError(f"Corrupt schema version {entry.version} of {sid}: hash mismatch")
    return info
