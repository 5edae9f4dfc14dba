"""``Client``: the entry point, holding the connection pool, the lookup service and what was created.

Theory of operation: a Client is cheap to build (no I/O happens until the
first ``create_producer`` / ``subscribe`` / ``create_reader``) and must be
closed with ``await client.close()``, which closes every producer, consumer
and reader it made and then the connections. The service URL picks the lookup:
``pulsar://`` and ``pulsar+ssl://`` use the binary protocol, ``http://`` and
``https://`` the broker's REST lookup. TLS (``pulsar+ssl://`` or ``use_tls``)
builds one ``ssl.SSLContext`` from the trust store, the insecure and
hostname-validation switches and, with ``AuthenticationTLS`` or the
certificate/key paths, the client certificate.

Method and keyword names are the official Python client's, made async; enum
arguments also take their names as strings (``initial_position="earliest"``).
Options this client does not implement (listeners, encryption) raise
``NotSupported`` instead of being silently ignored. Producer and consumer ids
are client-wide counters, as in Pulsar's clients. ``subscribe``, ``create_reader`` and
``create_table_view`` come from the ``subscribing.Subscribing`` mixin.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from magnetar.client.auth import Authentication, AuthenticationTLS
from magnetar.client.cnx_setup import ConnectionConfig, make_ssl_context
from magnetar.client.errors import AlreadyClosed, InvalidConfiguration
from magnetar.client.lookup import BinaryLookup, HttpLookup, LookupService
from magnetar.client.memory import MemoryLimitController
from magnetar.client.pool import ConnectionPool
from magnetar.client.producer import Producer
from magnetar.client.producer_impl import PartitionProducer, ProducerConf
from magnetar.client.schema import BytesSchema, Schema
from magnetar.client.schema_auto import (
    AutoProduceBytesSchema,
    schema_for_wire,
)
from magnetar.client.subscribing import Subscribing, reject
from magnetar.client.transaction import TransactionContext, TransactionCoordinatorClient
from magnetar.client.types import (
    BatchingType,
    CompressionType,
    HashingScheme,
    PartitionsRoutingMode,
    ProducerAccessMode,
    coerce,
)
from magnetar.common.naming import TopicName
from magnetar.runtime.rng import Rng


class Client(Subscribing):
    def __init__(
        self,
        service_url: str,
        authentication: Authentication | None = None,
        operation_timeout_seconds: float = 30,
        connection_timeout_ms: int = 10_000,
        use_tls: bool = False,
        tls_trust_certs_file_path: str | None = None,
        tls_allow_insecure_connection: bool = False,
        tls_validate_hostname: bool = False,
        tls_certificate_file_path: str | None = None,
        tls_private_key_file_path: str | None = None,
        listener_name: str | None = None,
        keep_alive_interval_seconds: float = 30,
        memory_limit_bytes: int = 64 * 1024 * 1024,
        partitions_update_interval_seconds: float = 60,
        rng: Rng | None = None,
    ) -> None:
        scheme = service_url.split("://", 1)[0].lower()
        if scheme not in ("pulsar", "pulsar+ssl", "http", "https"):
            raise InvalidConfiguration(
                f"service URL {service_url!r}: scheme must be pulsar, pulsar+ssl, http(s)"
            )
        self.service_url = service_url
        self.authentication = authentication or Authentication()
        self.use_tls = use_tls or scheme in ("pulsar+ssl", "https")
        if isinstance(self.authentication, AuthenticationTLS):
            tls_certificate_file_path = self.authentication.tls_cert_file
            tls_private_key_file_path = self.authentication.tls_key_file
        ssl_ctx = None
        if self.use_tls:
            ssl_ctx = make_ssl_context(
                tls_trust_certs_file_path,
                tls_allow_insecure_connection,
                tls_validate_hostname,
                tls_certificate_file_path,
                tls_private_key_file_path,
            )
        self.pool = ConnectionPool(
            ConnectionConfig(
                self.authentication,
                ssl_ctx,
                tls_validate_hostname,
                float(operation_timeout_seconds),
                connection_timeout_ms / 1000.0,
                float(keep_alive_interval_seconds),
            )
        )
        self.lookup: LookupService
        if scheme.startswith("http"):
            verify: Any = ssl_ctx if ssl_ctx is not None else True
            self.lookup = HttpLookup(service_url, self.authentication, verify)
        else:
            self.lookup = BinaryLookup(self.pool, service_url, self.use_tls, listener_name or "")
        self.rng = rng or Rng()
        self.memory = MemoryLimitController(memory_limit_bytes)
        self.partitions_update_s = float(partitions_update_interval_seconds)
        self._producer_ids = itertools.count()
        self._consumer_ids = itertools.count()
        self._handles: list[Any] = []
        self._closed = False
        self._tc_client: TransactionCoordinatorClient | None = None  # client.transaction, made on first use

    # ------------------------------------------------------------------ helpers
    def next_producer_id(self) -> int:
        return next(self._producer_ids)

    def next_consumer_id(self) -> int:
        return next(self._consumer_ids)

    @staticmethod
    def clock_ms() -> int:
        return int(time.time() * 1000)

    def _check(self) -> None:
        if self._closed:
            raise AlreadyClosed("the client is closed")

    def _forget(self, handle: Any) -> None:
        if handle in self._handles:
            self._handles.remove(handle)

    async def get_topic_partitions(self, topic: str) -> list[str]:
        self._check()
        n = await self.lookup.partitions(topic)
        return [f"{topic}-partition-{i}" for i in range(n)] if n > 0 else [topic]

    # ------------------------------------------------------------------ producers
    async def create_producer(
        self,
        topic: str,
        producer_name: str | None = None,
        schema: Schema | None = None,
        initial_sequence_id: int | None = None,
        send_timeout_millis: int = 30_000,
        compression_type: Any = CompressionType.NONE,
        max_pending_messages: int = 1000,
        block_if_queue_full: bool = False,
        batching_enabled: bool = True,
        batching_max_messages: int = 1000,
        batching_max_allowed_size_in_bytes: int = 128 * 1024,
        batching_max_publish_delay_ms: float = 10,
        chunking_enabled: bool = False,
        message_routing_mode: Any = PartitionsRoutingMode.RoundRobinDistribution,
        hashing_scheme: Any = HashingScheme.BoostHash,
        message_router: Any = None,
        properties: dict[str, str] | None = None,
        access_mode: Any = ProducerAccessMode.Shared,
        initial_subscription_name: str | None = None,
        lazy_start_partitioned_producers: bool = False,
        batching_type: Any = BatchingType.Default,
        encryption_key: Any = None,
        crypto_key_reader: Any = None,
    ) -> Producer:
        self._check()
        reject(
            encryption_key=encryption_key,
            crypto_key_reader=crypto_key_reader,
            lazy_start_partitioned_producers=lazy_start_partitioned_producers,
        )
        if chunking_enabled and batching_enabled:
            batching_enabled = (
                False  # the official clients refuse both; chunking wins, as in pulsar-client CLI
            )
        if max_pending_messages <= 0:
            raise InvalidConfiguration("max_pending_messages must be positive")
        topic = str(TopicName.get(topic))
        schema = schema or BytesSchema()
        if isinstance(schema, AutoProduceBytesSchema):
            info = await self.lookup.get_schema(topic)
            schema.wire = info[0] if info is not None else None
            schema.topic_schema = schema_for_wire(schema.wire) if schema.wire is not None else None
        conf = ProducerConf(
            producer_name=producer_name,
            initial_sequence_id=initial_sequence_id,
            send_timeout_ms=send_timeout_millis,
            compression=int(coerce(CompressionType, compression_type)),
            max_pending_messages=max_pending_messages,
            block_if_queue_full=block_if_queue_full,
            batching_enabled=batching_enabled,
            batching_max_messages=batching_max_messages,
            batching_max_allowed_size_in_bytes=batching_max_allowed_size_in_bytes,
            batching_max_publish_delay_ms=batching_max_publish_delay_ms,
            chunking_enabled=chunking_enabled,
            access_mode=coerce(ProducerAccessMode, access_mode),
            properties=properties,
            schema=schema.wire_schema(),
            key_based_batching=coerce(BatchingType, batching_type) == BatchingType.KeyBased,
            initial_subscription_name=initial_subscription_name,
        )
        n = await self.lookup.partitions(topic)
        names = [(f"{topic}-partition-{i}", i) for i in range(n)] if n > 0 else [(topic, -1)]
        parts = [PartitionProducer(self, name, idx, conf) for name, idx in names]
        if producer_name and n > 0:
            for p in parts:
                p.producer_name = f"{producer_name}-{p.partition}"
        try:
            for p in parts:
                await p.start()
        except BaseException:
            for p in parts:
                await p.close()
            raise
        producer = Producer(
            self,
            topic,
            parts,
            schema,
            coerce(PartitionsRoutingMode, message_routing_mode),
            coerce(HashingScheme, hashing_scheme),
            message_router,
            batching_max_publish_delay_ms,
            batching_enabled,
        )
        self._handles.append(producer)
        return producer

    # ------------------------------------------------------------------ schema, close
    async def get_schema_info(self, topic: str, version: bytes | None = None) -> Any:
        self._check()
        return await self.lookup.get_schema(str(TopicName.get(topic)), version)

    # ------------------------------------------------------------------ transactions
    def transaction(self, timeout: float = 60.0) -> TransactionContext:
        """``async with client.transaction(timeout=s) as txn`` (commit on exit, abort on error),
        or ``txn = await client.transaction(...)`` to commit/abort by hand (client.transaction)."""
        self._check()
        return TransactionContext(self, timeout)

    def transaction_coordinator(self) -> TransactionCoordinatorClient:
        if self._tc_client is None:
            self._tc_client = TransactionCoordinatorClient(self)
        return self._tc_client

    async def close(self) -> None:
        if self._closed:
            return
        for handle in list(self._handles):
            try:
                await handle.close()
            except Exception:  # closing must go on for the others
                pass
        self._closed = True
        await self.pool.close()
        await self.lookup.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
