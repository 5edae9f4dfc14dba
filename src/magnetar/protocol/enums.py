"""Pulsar's protocol enums as Python IntEnums, so upper layers never touch magnetar.proto.

Theory of operation: every enum here mirrors one enum of PulsarApi.proto value
for value (a unit test compares them with the generated descriptors). Member
names are Pulsar's own, verbatim, except ``SchemaType`` which uses the Java
``SchemaType`` names (the proto's ``Schema.Type.None`` is not a usable Python
attribute). Values are plain ints on the wire, so a member can be passed
wherever the protobuf objects expect an enum.
"""

from __future__ import annotations

from enum import IntEnum

# The highest protocol version we speak. The C++ 4.2.0 client (pulsar-client
# 3.13.0) sends 20; a broker answers min(MAX_PROTOCOL_VERSION, client's).
MAX_PROTOCOL_VERSION = 20

# Pulsar's defaults for frame sizing (pulsar-protocol.md section 1.3).
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
MESSAGE_SIZE_FRAME_PADDING = 10 * 1024
# What a client assumes when CONNECTED carries no max_message_size.
CLIENT_DEFAULT_MAX_MESSAGE_SIZE = DEFAULT_MAX_MESSAGE_SIZE - MESSAGE_SIZE_FRAME_PADDING


class CommandType(IntEnum):
    """``BaseCommand.Type``: the sub-message sits at the field number equal to the value."""

    CONNECT = 2
    CONNECTED = 3
    SUBSCRIBE = 4
    PRODUCER = 5
    SEND = 6
    SEND_RECEIPT = 7
    SEND_ERROR = 8
    MESSAGE = 9
    ACK = 10
    FLOW = 11
    UNSUBSCRIBE = 12
    SUCCESS = 13
    ERROR = 14
    CLOSE_PRODUCER = 15
    CLOSE_CONSUMER = 16
    PRODUCER_SUCCESS = 17
    PING = 18
    PONG = 19
    REDELIVER_UNACKNOWLEDGED_MESSAGES = 20
    PARTITIONED_METADATA = 21
    PARTITIONED_METADATA_RESPONSE = 22
    LOOKUP = 23
    LOOKUP_RESPONSE = 24
    CONSUMER_STATS = 25
    CONSUMER_STATS_RESPONSE = 26
    REACHED_END_OF_TOPIC = 27
    SEEK = 28
    GET_LAST_MESSAGE_ID = 29
    GET_LAST_MESSAGE_ID_RESPONSE = 30
    ACTIVE_CONSUMER_CHANGE = 31
    GET_TOPICS_OF_NAMESPACE = 32
    GET_TOPICS_OF_NAMESPACE_RESPONSE = 33
    GET_SCHEMA = 34
    GET_SCHEMA_RESPONSE = 35
    AUTH_CHALLENGE = 36
    AUTH_RESPONSE = 37
    ACK_RESPONSE = 38
    GET_OR_CREATE_SCHEMA = 39
    GET_OR_CREATE_SCHEMA_RESPONSE = 40
    NEW_TXN = 50
    NEW_TXN_RESPONSE = 51
    ADD_PARTITION_TO_TXN = 52
    ADD_PARTITION_TO_TXN_RESPONSE = 53
    ADD_SUBSCRIPTION_TO_TXN = 54
    ADD_SUBSCRIPTION_TO_TXN_RESPONSE = 55
    END_TXN = 56
    END_TXN_RESPONSE = 57
    END_TXN_ON_PARTITION = 58
    END_TXN_ON_PARTITION_RESPONSE = 59
    END_TXN_ON_SUBSCRIPTION = 60
    END_TXN_ON_SUBSCRIPTION_RESPONSE = 61
    TC_CLIENT_CONNECT_REQUEST = 62
    TC_CLIENT_CONNECT_RESPONSE = 63
    WATCH_TOPIC_LIST = 64
    WATCH_TOPIC_LIST_SUCCESS = 65
    WATCH_TOPIC_UPDATE = 66
    WATCH_TOPIC_LIST_CLOSE = 67
    TOPIC_MIGRATED = 68
    SCALABLE_TOPIC_LOOKUP = 70
    SCALABLE_TOPIC_UPDATE = 71
    SCALABLE_TOPIC_CLOSE = 72
    SCALABLE_TOPIC_SUBSCRIBE = 73
    SCALABLE_TOPIC_SUBSCRIBE_RESPONSE = 74
    SCALABLE_TOPIC_ASSIGNMENT_UPDATE = 75
    WATCH_SCALABLE_TOPICS = 76
    WATCH_SCALABLE_TOPICS_UPDATE = 77
    WATCH_SCALABLE_TOPICS_CLOSE = 78
    WATCH_TC_ASSIGNMENTS = 79
    WATCH_TC_ASSIGNMENTS_UPDATE = 80
    WATCH_TC_ASSIGNMENTS_CLOSE = 81


class ServerError(IntEnum):
    """Error codes in ERROR, SEND_ERROR and the ``error`` fields of responses."""

    UnknownError = 0
    MetadataError = 1
    PersistenceError = 2
    AuthenticationError = 3
    AuthorizationError = 4
    ConsumerBusy = 5
    ServiceNotReady = 6
    ProducerBlockedQuotaExceededError = 7
    ProducerBlockedQuotaExceededException = 8
    ChecksumError = 9
    UnsupportedVersionError = 10
    TopicNotFound = 11
    SubscriptionNotFound = 12
    ConsumerNotFound = 13
    TooManyRequests = 14
    TopicTerminatedError = 15
    ProducerBusy = 16
    InvalidTopicName = 17
    IncompatibleSchema = 18
    ConsumerAssignError = 19
    TransactionCoordinatorNotFound = 20
    InvalidTxnStatus = 21
    NotAllowedError = 22
    TransactionConflict = 23
    TransactionNotFound = 24
    ProducerFenced = 25


class SubType(IntEnum):
    """``CommandSubscribe.SubType``."""

    Exclusive = 0
    Shared = 1
    Failover = 2
    Key_Shared = 3


class InitialPosition(IntEnum):
    """``CommandSubscribe.InitialPosition``: where a new subscription starts."""

    Latest = 0
    Earliest = 1


class AckType(IntEnum):
    """``CommandAck.AckType``."""

    Individual = 0
    Cumulative = 1


class ValidationError(IntEnum):
    """``CommandAck.ValidationError``: why a client discarded a message."""

    UncompressedSizeCorruption = 0
    DecompressionError = 1
    ChecksumMismatch = 2
    BatchDeSerializeError = 3
    DecryptionError = 4


class CompressionType(IntEnum):
    """Payload codec of a message (only the payload is compressed, never the metadata)."""

    NONE = 0
    LZ4 = 1
    ZLIB = 2
    ZSTD = 3
    SNAPPY = 4


class ProducerAccessMode(IntEnum):
    Shared = 0
    Exclusive = 1
    WaitForExclusive = 2
    ExclusiveWithFencing = 3


class KeySharedMode(IntEnum):
    AUTO_SPLIT = 0
    STICKY = 1


class SchemaType(IntEnum):
    """``Schema.Type`` with Java's names (NONE..PROTOBUF_NATIVE; 21/22 from later protos)."""

    NONE = 0
    STRING = 1
    JSON = 2
    PROTOBUF = 3
    AVRO = 4
    BOOLEAN = 5
    INT8 = 6
    INT16 = 7
    INT32 = 8
    INT64 = 9
    FLOAT = 10
    DOUBLE = 11
    DATE = 12
    TIME = 13
    TIMESTAMP = 14
    KEY_VALUE = 15
    INSTANT = 16
    LOCAL_DATE = 17
    LOCAL_TIME = 18
    LOCAL_DATE_TIME = 19
    PROTOBUF_NATIVE = 20
    AUTO_CONSUME = 21
    EXTERNAL = 22


class LookupType(IntEnum):
    """``CommandLookupTopicResponse.LookupType``."""

    Redirect = 0
    Connect = 1
    Failed = 2


class PartitionedMetadataResult(IntEnum):
    """``CommandPartitionedTopicMetadataResponse.LookupType``."""

    Success = 0
    Failed = 1


class TopicDomainMode(IntEnum):
    """``CommandGetTopicsOfNamespace.Mode``."""

    PERSISTENT = 0
    NON_PERSISTENT = 1
    ALL = 2


class TxnAction(IntEnum):
    COMMIT = 0
    ABORT = 1


class AuthMethod(IntEnum):
    """Deprecated enum of CommandConnect.auth_method (clients send auth_method_name)."""

    AuthMethodNone = 0
    AuthMethodYcaV1 = 1
    AuthMethodAthens = 2


class ResourceType(IntEnum):
    """``CommandTopicMigrated.ResourceType``."""

    Producer = 0
    Consumer = 1


# SEND and MESSAGE carry headers-and-payload after the command.
PAYLOAD_COMMANDS = frozenset({CommandType.SEND, CommandType.MESSAGE})
