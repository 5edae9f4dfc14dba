"""The schema registry: register, look up and delete a topic's schema versions.

Theory of operation: :class:`SchemaRegistry` puts the compatibility checker in front of the
storage.  Registering a schema (:meth:`put_schema_if_compatible`) is a compare-and-set loop:

1. read the locator; if a live version (after the last deletion marker) has the identical
   definition (type + bytes, Pulsar's ``SchemaHash``), answer its version -- nothing is written;
2. if auto update is off, refuse ("Schema not found and schema auto updating is disabled.");
3. check the new schema against the latest live version (or all of them for a ``_TRANSITIVE``
   strategy) and refuse with :class:`IncompatibleSchemaError` and the reason;
4. append the version; if another writer changed the locator meanwhile, go back to 1.

A malformed or oversized definition is refused before anything is read or written.

The producer and consumer rules of Pulsar's topics are here too, so the PRODUCER/SUBSCRIBE
handlers stay thin: :meth:`add_producer_schema` (a producer without a schema on a topic with one
is allowed unless validation is enforced) and :meth:`add_consumer_schema` (a consumer's schema
is registered only on an idle topic without a schema; otherwise it must be able to read what the
topic holds; AUTO_CONSUME reads anything).  Which strategy and flags apply is decided by
``policies.resolve_policies``.
"""

from __future__ import annotations

from magnetar.broker.schema.compatibility import SchemaCompatibilityChecker, Verdict
from magnetar.broker.schema.errors import (
    IncompatibleSchemaError,
    SchemaConcurrentUpdateError,
    SchemaNotFoundError,
    SchemaVersionNotFoundError,
)
from magnetar.broker.schema.policies import (
    EffectiveSchemaPolicies,
    SchemaCompatibilityStrategy,
    SchemaRegistryConfig,
    parse_strategy,
)
from magnetar.broker.schema.storage import LocatorEntry, SchemaStorage, schema_id
from magnetar.broker.schema.types import SchemaInfo, SchemaRecord, SchemaType, SchemaVersion
from magnetar.common.naming import TopicName
from magnetar.metadata import api as md
from magnetar.runtime import Clock

Topic = str | TopicName
StrategyLike = SchemaCompatibilityStrategy | str

VALIDATION_ENFORCED_MESSAGE = (
    "Producers cannot connect or send message without a schema to topics with a schema "
    "if SchemaValidationEnforced is enabled"
)
AUTO_UPDATE_DISABLED_MESSAGE = "Schema not found and schema auto updating is disabled."


def is_schemaless(info: SchemaInfo | None) -> bool:
    """No schema at all: absent, or BYTES (which clients never send)."""
    return info is None or info.type is SchemaType.BYTES


class SchemaRegistry:
    def __init__(
        self, metadata_store: md.MetadataStore, clock: Clock, config: SchemaRegistryConfig | None = None
    ) -> None:
        self.config = config or SchemaRegistryConfig()
        self._clock = clock
        self._storage = SchemaStorage(
            metadata_store,
            schema_bytes_max=self.config.schema_bytes_max,
            schema_versions_max=self.config.schema_versions_max,
        )
        self._checker = SchemaCompatibilityChecker()

    # ------------------------------------------------------------------ register

    async def put_schema_if_compatible(
        self, topic: Topic, info: SchemaInfo, strategy: StrategyLike, allow_auto_update: bool = True
    ) -> bytes:
        """The 8-byte version of ``info`` on ``topic`` (existing if identical, else new)."""
        sid = schema_id(topic)
        strategy = parse_strategy(strategy)
        self._checker.validate(info)
        self._storage.check_size(info)
        digest = info.schema_hash()
        for _ in range(self.config.cas_retries_max):
            locator = await self._storage.read_locator(sid)
            live = locator.live()
            same = next((e for e in live if e.hash == digest), None)
            if same is not None:
                return SchemaVersion(same.version).to_bytes()
            if not allow_auto_update:
                raise IncompatibleSchemaError(AUTO_UPDATE_DISABLED_MESSAGE)
            ok, reason = self._checker.check(await self._infos(sid, live, strategy), info, strategy)
            if not ok:
                raise IncompatibleSchemaError(reason)
            try:
                version = await self._storage.append(sid, locator, info, self._clock.time_ms())
            except md.BadVersion:
                continue
            return SchemaVersion(version).to_bytes()
        raise SchemaConcurrentUpdateError(
            f"Schema of {sid} changed concurrently {self.config.cas_retries_max} times"
        )

    async def check_compatibility(self, topic: Topic, info: SchemaInfo, strategy: StrategyLike) -> Verdict:
        """``(compatible, reason)`` against the live versions; writes nothing."""
        sid = schema_id(topic)
        strategy = parse_strategy(strategy)
        self._checker.validate(info)
        live = (await self._storage.read_locator(sid)).live()
        if any(e.hash == info.schema_hash() for e in live):
            return True, ""
        return self._checker.check(await self._infos(sid, live, strategy), info, strategy)

    async def is_compatible_for_consumer(
        self, topic: Topic, info: SchemaInfo, strategy: StrategyLike
    ) -> Verdict:
        """May a consumer with ``info`` read this topic (see ``check_for_consumer``)?"""
        if info.type is SchemaType.AUTO_CONSUME:
            return True, ""
        sid = schema_id(topic)
        strategy = parse_strategy(strategy)
        live = (await self._storage.read_locator(sid)).live()
        if any(e.hash == info.schema_hash() for e in live):
            return True, ""
        # Only the versions the rule looks at: the latest, or all for transitive strategies.
        infos = await self._infos(sid, live, strategy)
        return self._checker.check_for_consumer(infos, info, strategy)

    # ------------------------------------------------------------------ producer / consumer rules

    async def add_producer_schema(
        self, topic: Topic, info: SchemaInfo | None, policies: EffectiveSchemaPolicies
    ) -> bytes:
        """PRODUCER: the version for PRODUCER_SUCCESS (``b""`` for a schemaless producer)."""
        if is_schemaless(info):
            if policies.validation_enforced and await self.has_schema(topic):
                raise IncompatibleSchemaError(VALIDATION_ENFORCED_MESSAGE)
            return SchemaVersion.EMPTY
        assert info is not None
        return await self.put_schema_if_compatible(topic, info, policies.strategy, policies.allow_auto_update)

    async def add_consumer_schema(
        self, topic: Topic, info: SchemaInfo | None, policies: EffectiveSchemaPolicies, *, topic_idle: bool
    ) -> None:
        """SUBSCRIBE: register on an idle schemaless topic, else check the consumer can read it.

        ``topic_idle``: no producers, no consumers other than AUTO_CONSUME ones, no stored data
        (Pulsar's condition for letting a consumer define the topic's schema).
        """
        if is_schemaless(info):
            return
        assert info is not None
        if info.type is SchemaType.AUTO_CONSUME:
            return
        if topic_idle and not await self.has_schema(topic):
            await self.put_schema_if_compatible(topic, info, policies.strategy, policies.allow_auto_update)
            return
        ok, reason = await self.is_compatible_for_consumer(topic, info, policies.strategy)
        if not ok:
            raise IncompatibleSchemaError(reason)

    # ------------------------------------------------------------------ read

    async def get_schema(self, topic: Topic, version: int | bytes | None = None) -> SchemaRecord:
        """The latest live version (``version`` None/-1/empty) or that version."""
        sid = schema_id(topic)
        if isinstance(version, bytes | bytearray):
            sv = SchemaVersion.from_bytes(bytes(version))
            version = None if sv is None else sv.value
        elif version is not None and version < 0:
            version = None
        locator = await self._storage.read_locator(sid)
        if version is None:
            if not locator.entries:
                raise SchemaNotFoundError(f"Schema not found for topic {sid}")
            entry = locator.entries[-1]
        else:
            found = locator.find(version)
            if found is None:
                raise SchemaVersionNotFoundError(f"Schema version {version} not found for topic {sid}")
            entry = found
        if entry.deleted:
            raise SchemaNotFoundError(f"Schema of topic {sid} is deleted (version {entry.version})")
        return await self._storage.read(sid, entry)

    async def get_all(self, topic: Topic) -> list[SchemaRecord]:
        """Live versions, oldest first ([] if none: the REST answers 404 then)."""
        sid = schema_id(topic)
        return [await self._storage.read(sid, e) for e in (await self._storage.read_locator(sid)).live()]

    async def find_version(self, topic: Topic, info: SchemaInfo) -> int | None:
        """The live version with ``info``'s definition, or None (REST ``POST .../version``)."""
        live = (await self._storage.read_locator(schema_id(topic))).live()
        digest = info.schema_hash()
        return next((e.version for e in live if e.hash == digest), None)

    async def has_schema(self, topic: Topic) -> bool:
        return bool((await self._storage.read_locator(schema_id(topic))).live())

    # ------------------------------------------------------------------ delete

    async def delete(self, topic: Topic) -> None:
        """Remove every version and the locator (deleting the topic); idempotent."""
        await self._storage.delete_all(schema_id(topic))

    async def delete_schema(self, topic: Topic, force: bool = False) -> int | None:
        """REST ``DELETE .../schema``: append a deletion marker and return its version.

        Later versions start a fresh history (no compatibility with what came before the
        marker).  ``force`` removes everything instead and returns the last version, if any.
        """
        sid = schema_id(topic)
        for _ in range(self.config.cas_retries_max):
            locator = await self._storage.read_locator(sid)
            if force:
                await self._storage.delete_all(sid)
                return locator.entries[-1].version if locator.entries else None
            if not locator.live():
                raise SchemaNotFoundError(f"Schema not found for topic {sid}")
            try:
                return await self._storage.append(sid, locator, None, self._clock.time_ms())
            except md.BadVersion:
                continue
        raise SchemaConcurrentUpdateError(
            f"Schema of {sid} changed concurrently {self.config.cas_retries_max} times"
        )

    # ------------------------------------------------------------------ helpers

    async def _infos(
        self, sid: str, live: tuple[LocatorEntry, ...], strategy: SchemaCompatibilityStrategy
    ) -> list[SchemaInfo]:
        """The live versions a check needs: all for transitive strategies, else the latest."""
        if not live or strategy is SchemaCompatibilityStrategy.ALWAYS_COMPATIBLE:
            return [] if not live else [(await self._storage.read(sid, live[-1])).info]
        wanted = live if strategy.is_transitive else live[-1:]
        return [(await self._storage.read(sid, e)).info for e in wanted]
