"""Command builders: every v20 command has one, frames decode, required fields are always set."""

from __future__ import annotations

import struct

import pytest

from magnetar.protocol import commands as c
from magnetar.protocol.enums import (
    AckType,
    CommandType,
    InitialPosition,
    KeySharedMode,
    LookupType,
    ResourceType,
    SchemaType,
    ServerError,
    SubType,
    TopicDomainMode,
    TxnAction,
)
from magnetar.protocol.frames import FrameDecoder
from magnetar.protocol.message_id import MessageId
from magnetar.protocol.payload import build_headers_and_payload, new_message_metadata

T = CommandType
SCHEMA = c.WireSchema("STRING", b"null", SchemaType.STRING, {"a": "b"})
HP = build_headers_and_payload(
    new_message_metadata(producer_name="p", sequence_id=0, publish_time=1), b"data"
)

CASES = [
    (c.connect(client_version="Pulsar-CPP-v4.2.0"), T.CONNECT),
    (c.connected("Pulsar Server 4.0", 20, 5242880, supports_topic_watchers=True), T.CONNECTED),
    (c.auth_challenge("srv", "token", b"chal"), T.AUTH_CHALLENGE),
    (c.auth_response("cli", "token", b"resp"), T.AUTH_RESPONSE),
    (c.producer("t", 1, 2, schema=SCHEMA, metadata={"x": "y"}), T.PRODUCER),
    (c.producer_success(2, "standalone-0-1"), T.PRODUCER_SUCCESS),
    (c.send(1, 0, HP, num_messages=3), T.SEND),
    (c.send_receipt(1, 0, 7, 3, highest_sequence_id=2), T.SEND_RECEIPT),
    (c.send_error(1, 0, ServerError.ChecksumError, "bad crc"), T.SEND_ERROR),
    (c.message(5, 7, 3, 1, HP, redelivery_count=2, ack_set=[30]), T.MESSAGE),
    (
        c.subscribe(
            "t",
            "s",
            SubType.Key_Shared,
            1,
            2,
            "c",
            key_shared=c.KeySharedPolicy(KeySharedMode.STICKY, ((0, 100),)),
            start_message_id=MessageId(-1, -1),
            initial_position=InitialPosition.Earliest,
            schema=SCHEMA,
        ),
        T.SUBSCRIBE,
    ),
    (c.flow(1, 1000), T.FLOW),
    (c.ack(1, AckType.Individual, [MessageId(7, 0), MessageId(7, 1, ack_set=(30,))]), T.ACK),
    (c.ack_response(1, 9), T.ACK_RESPONSE),
    (c.unsubscribe(1, 2, force=True), T.UNSUBSCRIBE),
    (c.success(2, schema=SCHEMA), T.SUCCESS),
    (c.error(2, ServerError.ConsumerBusy, ""), T.ERROR),
    (c.close_producer(1), T.CLOSE_PRODUCER),
    (c.close_consumer(1, 4, "pulsar://b:6650"), T.CLOSE_CONSUMER),
    (c.ping(), T.PING),
    (c.pong(), T.PONG),
    (c.redeliver_unacknowledged(1, [MessageId(7, 1)]), T.REDELIVER_UNACKNOWLEDGED_MESSAGES),
    (c.partitioned_metadata("t", 1), T.PARTITIONED_METADATA),
    (c.partitioned_metadata_response(1, 0), T.PARTITIONED_METADATA_RESPONSE),
    (c.lookup("t", 2), T.LOOKUP),
    (c.lookup_response(2, LookupType.Connect, "pulsar://h:6650", authoritative=True), T.LOOKUP_RESPONSE),
    (c.consumer_stats(1, 2), T.CONSUMER_STATS),
    (c.consumer_stats_response(1, msgRateOut=1.5, consumerName="c"), T.CONSUMER_STATS_RESPONSE),
    (c.reached_end_of_topic(1), T.REACHED_END_OF_TOPIC),
    (c.seek(1, 2, message_id=MessageId(-1, -1)), T.SEEK),
    (c.get_last_message_id(1, 2), T.GET_LAST_MESSAGE_ID),
    (c.get_last_message_id_response(2, MessageId(7, 3, batch_index=4)), T.GET_LAST_MESSAGE_ID_RESPONSE),
    (c.active_consumer_change(1, True), T.ACTIVE_CONSUMER_CHANGE),
    (c.get_topics_of_namespace(1, "public/default", TopicDomainMode.ALL), T.GET_TOPICS_OF_NAMESPACE),
    (
        c.get_topics_of_namespace_response(1, ["persistent://public/default/a"]),
        T.GET_TOPICS_OF_NAMESPACE_RESPONSE,
    ),
    (c.get_schema(1, "t", b"\0" * 8), T.GET_SCHEMA),
    (c.get_schema_response(1, SCHEMA, b"\0" * 8), T.GET_SCHEMA_RESPONSE),
    (c.get_or_create_schema(1, "t", SCHEMA), T.GET_OR_CREATE_SCHEMA),
    (c.get_or_create_schema_response(1, b"\0" * 8), T.GET_OR_CREATE_SCHEMA_RESPONSE),
    (c.new_txn(1, 60000, 0), T.NEW_TXN),
    (c.new_txn_response(1, 5, 0), T.NEW_TXN_RESPONSE),
    (c.add_partition_to_txn(1, 5, 0, ["t"]), T.ADD_PARTITION_TO_TXN),
    (c.txn_op_response(T.ADD_PARTITION_TO_TXN_RESPONSE, 1, 5, 0), T.ADD_PARTITION_TO_TXN_RESPONSE),
    (c.add_subscription_to_txn(1, 5, 0, [("t", "s")]), T.ADD_SUBSCRIPTION_TO_TXN),
    (c.txn_op_response(T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE, 1), T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE),
    (c.end_txn(1, 5, 0, TxnAction.COMMIT), T.END_TXN),
    (c.txn_op_response(T.END_TXN_RESPONSE, 1, error=ServerError.InvalidTxnStatus), T.END_TXN_RESPONSE),
    (c.end_txn_on_partition(1, 5, 0, "t", TxnAction.ABORT), T.END_TXN_ON_PARTITION),
    (c.txn_op_response(T.END_TXN_ON_PARTITION_RESPONSE, 1), T.END_TXN_ON_PARTITION_RESPONSE),
    (c.end_txn_on_subscription(1, 5, 0, "t", "s", TxnAction.COMMIT), T.END_TXN_ON_SUBSCRIPTION),
    (c.txn_op_response(T.END_TXN_ON_SUBSCRIPTION_RESPONSE, 1), T.END_TXN_ON_SUBSCRIPTION_RESPONSE),
    (c.tc_client_connect_request(1, 0), T.TC_CLIENT_CONNECT_REQUEST),
    (c.tc_client_connect_response(1), T.TC_CLIENT_CONNECT_RESPONSE),
    (c.watch_topic_list(1, 2, "public/default", ".*"), T.WATCH_TOPIC_LIST),
    (c.watch_topic_list_success(1, 2, ["a"], "h"), T.WATCH_TOPIC_LIST_SUCCESS),
    (c.watch_topic_update(2, ["a"], ["b"], "h"), T.WATCH_TOPIC_UPDATE),
    (c.watch_topic_list_close(1, 2), T.WATCH_TOPIC_LIST_CLOSE),
    (c.topic_migrated(1, ResourceType.Producer, "pulsar://other:6650"), T.TOPIC_MIGRATED),
]


def _decode(frame: bytes):
    decoder = FrameDecoder(1 << 20)
    decoder.feed(frame)
    out = decoder.next_frame()
    assert decoder.next_frame() is None
    return out


@pytest.mark.parametrize("frame,ctype", CASES, ids=[t.name for _, t in CASES])
def test_builder_frame_decodes_with_required_fields(frame, ctype):
    decoded = _decode(frame)
    assert decoded.type is ctype
    assert decoded.base.IsInitialized()
    total, cmd_size = struct.unpack(">II", frame[:8])
    assert total == len(frame) - 4
    if ctype in (T.SEND, T.MESSAGE):
        assert decoded.headers_and_payload == HP
        assert cmd_size + 8 + len(HP) == len(frame)
    else:
        assert cmd_size + 8 == len(frame)


def test_every_v20_command_type_has_a_builder():
    covered = {t for _, t in CASES}
    v20 = {t for t in CommandType if t <= 68}
    assert v20 - covered == set()


def test_broker_replies_carry_trip_wire_fields():
    lookup = _decode(c.lookup_response(2, LookupType.Connect, "pulsar://h:6650")).command
    assert lookup.HasField("response") and lookup.request_id == 2
    pm = _decode(c.partitioned_metadata_response(3, 0)).command
    assert pm.HasField("response") and pm.response == 0 and pm.HasField("partitions")
    pm_fail = _decode(
        c.partitioned_metadata_response(3, error=ServerError.TopicNotFound, message="x")
    ).command
    assert pm_fail.response == 1 and pm_fail.error == ServerError.TopicNotFound
    err = _decode(c.error(4, ServerError.UnknownError, "")).command
    assert err.HasField("message") and err.message == ""
    rejected = _decode(c.error(-1, ServerError.AuthenticationError, "no")).command
    assert rejected.request_id == 2**64 - 1
    ps = _decode(c.producer_success(1, "n")).command
    assert ps.last_sequence_id == -1 and ps.producer_ready and not ps.HasField("schema_version")
    assert not _decode(c.producer_success(1, "n", producer_ready=False)).command.producer_ready
    msg = _decode(c.message(5, 7, 3, -1, HP)).command
    assert not msg.message_id.HasField("partition") and not msg.HasField("redelivery_count")
    msg_p = _decode(c.message(5, 7, 3, 2, HP, redelivery_count=1)).command
    assert msg_p.message_id.partition == 2 and msg_p.redelivery_count == 1


def test_client_builders_follow_cpp_defaults():
    connect = _decode(c.connect()).command
    assert connect.auth_method_name == "none" and connect.protocol_version == 20
    assert connect.feature_flags.supports_broker_entry_metadata
    lookup = _decode(c.lookup("t", 2)).command
    assert lookup.HasField("advertised_listener_name") and lookup.advertised_listener_name == ""
    prod = _decode(c.producer("t", 0, 1)).command
    assert prod.HasField("user_provided_producer_name") and not prod.user_provided_producer_name
    seek = _decode(c.seek(1, 2, message_id=MessageId(-1, -1))).command
    assert seek.message_id.ledgerId == 2**64 - 1 and seek.message_id.entryId == 2**64 - 1
    ack = _decode(c.ack(1, AckType.Individual, [MessageId(7, 4, 3, 2, ack_set=(30,))])).command
    assert list(ack.message_id[0].ack_set) == [30]
    assert not ack.message_id[0].HasField("batch_index") and not ack.message_id[0].HasField("partition")
    redeliver = _decode(c.redeliver_unacknowledged(3)).command
    assert len(redeliver.message_ids) == 0
    sub = _decode(c.subscribe("t", "s", SubType.Shared, 1, 2)).command
    assert sub.durable and not sub.HasField("force_topic_creation") and sub.HasField("consumer_name")


def test_message_frame_reuses_stored_bytes_verbatim():
    stored = HP
    frame = c.message(1, 2, 3, -1, stored)
    assert frame.endswith(stored)
    cmd = c.message_command_bytes(1, 2, 3)
    assert frame == struct.pack(">II", len(cmd) + 4 + len(stored), len(cmd)) + cmd + stored
