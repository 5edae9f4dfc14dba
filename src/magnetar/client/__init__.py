"""magnetar.client: a pure-Python asyncio Pulsar client on Magnetar's sans-IO protocol codec.

Module map (each module's docstring gives its theory of operation):

- ``client``, ``subscribing``: ``Client`` (pool, lookup, create_producer, close); subscribe /
  create_reader / create_table_view.
- ``pattern``: regex consumers' topic discovery (WATCH_TOPIC_LIST watcher, or polling).
- ``sync``: a blocking facade (the asyncio client on a loop in a thread).
- ``connection``, ``pool``, ``lookup``: one broker connection; the pool; binary and HTTP lookup.
- ``producer``, ``producer_impl``, ``batching``: routing over partitions; one partition's
  sending pipeline with receipts and reconnects; SEND frames, batches, chunks.
- ``consumer``, ``consumer_impl``, ``decode``, ``acks``, ``reader``, ``tableview``: the
  multi-topic queue; one partition's subscription and permits; MESSAGE decoding; ack grouping
  and redelivery; readers; table views.
- ``memory``, ``hashing``: the client-wide memory limit; the partition-routing key hashes.
- ``schema_types``, ``schema_auto``: primitive and KeyValue schemas; AUTO_CONSUME, AUTO_PRODUCE and
  decoding by the writer's schema version.
- ``message``, ``schema``, ``auth``, ``types``, ``errors``: values, schemas, authentication,
  enums (names accepted as strings) and typed exceptions.
"""

from magnetar.client.acks import MultiplierRedeliveryBackoff
from magnetar.client.auth import (
    Authentication,
    AuthenticationBasic,
    AuthenticationTLS,
    AuthenticationToken,
)
from magnetar.client.client import Client
from magnetar.client.consumer import Consumer
from magnetar.client.errors import *  # noqa: F403
from magnetar.client.errors import PulsarException, Timeout
from magnetar.client.message import EARLIEST, LATEST, Message, MessageId
from magnetar.client.producer import Producer
from magnetar.client.reader import Reader
from magnetar.client.schema import (
    AvroSchema,
    BytesSchema,
    JsonSchema,
    ProtobufNativeSchema,
    Schema,
    StringSchema,
)
from magnetar.client.schema_auto import AutoConsumeSchema, AutoProduceBytesSchema
from magnetar.client.schema_types import (
    BooleanSchema,
    DoubleSchema,
    FloatSchema,
    Int8Schema,
    Int16Schema,
    Int32Schema,
    Int64Schema,
    KeyValueSchema,
)
from magnetar.client.tableview import TableView
from magnetar.client.transaction import Transaction, TransactionOutcomeUnknown
from magnetar.client.types import (
    BatchingType,
    CompressionType,
    ConsumerDeadLetterPolicy,
    ConsumerKeySharedPolicy,
    ConsumerType,
    HashingScheme,
    InitialPosition,
    PartitionsRoutingMode,
    ProducerAccessMode,
    RegexSubscriptionMode,
)

__all__ = [
    "AutoConsumeSchema", "AutoProduceBytesSchema", "BooleanSchema", "DoubleSchema", "FloatSchema",
    "Int8Schema", "Int16Schema", "Int32Schema", "Int64Schema", "KeyValueSchema", "ProtobufNativeSchema",
    "EARLIEST", "LATEST", "Authentication", "AuthenticationBasic", "AuthenticationTLS",
    "AuthenticationToken", "AvroSchema", "BatchingType", "BytesSchema", "Client", "CompressionType",
    "Consumer", "ConsumerDeadLetterPolicy", "ConsumerKeySharedPolicy", "ConsumerType", "HashingScheme",
    "InitialPosition", "JsonSchema", "Message", "MessageId", "MultiplierRedeliveryBackoff", "PartitionsRoutingMode", "Producer",
    "ProducerAccessMode", "PulsarException", "Reader", "RegexSubscriptionMode", "Schema",
    "StringSchema", "TableView", "Timeout",
    "Transaction", "TransactionOutcomeUnknown",  # client.transaction()
]  # fmt: skip
