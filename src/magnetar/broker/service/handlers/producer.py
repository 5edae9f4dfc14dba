"""Producer commands: PRODUCER, SEND, CLOSE_PRODUCER.

Theory of operation: PRODUCER loads (or, per policy, creates) the topic,
registers the producer under a name -- the client's, or one the broker invents
as ``<cluster>-<broker id>-<n>`` (the client stamps it into every message) --
and answers PRODUCER_SUCCESS with ``last_sequence_id=-1`` (no deduplication
state yet).  A PRODUCER for a producer id already registered on this
connection (a client retry) is answered again with the same name.

SEND is the hot path and never awaits: it checks the CRC32-C (a mismatch is
the one soft SEND_ERROR, ChecksumError) -- the only CRC check between socket
and journal -- and, in the same walk of the headers, reads the entry's message
count and marker type, which go down with the add and stay beside the entry
(``EntryMetadata``) so dispatch does not parse it again; then the size, then
it starts the add; receipts leave in order from the producer's pipeline.  A SEND for an unknown
producer closes the connection, as Java does: the client reconnects and
re-sends whatever was not acknowledged -- except for a producer the broker
itself closed a moment ago, whose in-flight SENDs are simply dropped.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from magnetar.broker import errors
from magnetar.broker.service.admission import check_producer_encryption, check_send, throttle_publish
from magnetar.broker.service.dedup import refresh_deduplication
from magnetar.broker.service.names import parse_topic
from magnetar.broker.service.producer import Producer
from magnetar.broker.service.schemas import producer_schema_version
from magnetar.broker.service.topic import PersistentTopic
from magnetar.broker.transaction.errors import TransactionsDisabledError
from magnetar.broker.transaction.model import TxnID as txn_id
from magnetar.managed_ledger.api import EntryMetadata, ManagedLedgerError
from magnetar.protocol import server_commands as cmds
from magnetar.protocol.enums import ServerError
from magnetar.protocol.payload import send_facts

if TYPE_CHECKING:
    from magnetar.broker.service.connection import Connection

log = logging.getLogger(__name__)

ACCESS_SHARED = 0
HEADER_OVERHEAD_BYTES = 10  # magic + crc + metadata size: not part of Pulsar's message size
ONE_MESSAGE = EntryMetadata()  # the facts of most entries (frozen: one object shared by all)


async def handle_producer(cnx: Connection, frame: Any) -> None:
    cmd = frame.command
    svc = cnx.service
    existing = cnx.producers.get(cmd.producer_id)
    if existing is not None:
        if existing.topic.name == parse_topic(cmd.topic).full_name:
            dedup = existing.topic.dedup
            last = dedup.last_sequence_id(existing.producer_name) if dedup is not None else -1
            epoch = existing.topic_epoch if existing.access_mode != ACCESS_SHARED else None
            cnx.write(cmds.producer_success(cmd.request_id, existing.producer_name, last, topic_epoch=epoch))
            return
        raise errors.ProducerBusyError(f"Producer id {cmd.producer_id} is already in use on this connection")
    ref = parse_topic(cmd.topic)
    topic = await svc.topics.get_topic(ref, create=True)
    await refresh_deduplication(svc, topic)
    user_named = cmd.user_provided_producer_name if cmd.HasField("user_provided_producer_name") else True
    if cmd.HasField("producer_name") and cmd.producer_name:
        name = cmd.producer_name
    else:
        name, user_named = svc.new_producer_name(), False
    mode = cmd.producer_access_mode if cmd.HasField("producer_access_mode") else ACCESS_SHARED
    producer = Producer(
        topic,
        cnx,
        cmd.producer_id,
        name,
        user_named,
        mode,
        {kv.key: kv.value for kv in cmd.metadata},
        cmd.epoch if cmd.HasField("epoch") else 0,
        svc.clock.time_ms(),
    )
    producer.topic_epoch = cmd.topic_epoch if cmd.HasField("topic_epoch") else None
    schema_version = await producer_schema_version(svc, topic, cmd)
    if cmd.HasField("initial_subscription_name") and cmd.initial_subscription_name:
        await topic.get_or_create_subscription(cmd.initial_subscription_name, 0, True, None)
    if isinstance(topic, PersistentTopic):
        # A ledger that cannot be created (too few bookies for the persistence policy's
        # ensemble) fails the producer now, with the cause, instead of an endless
        # send-fail-reconnect-resend loop on the client.
        try:
            await topic.ml.check_writable()
        except ManagedLedgerError as exc:
            raise errors.translate(exc) from exc
    producer.encrypted = cmd.HasField("encrypted") and cmd.encrypted
    check_producer_encryption(topic, producer.encrypted)
    if cnx.closed:
        raise errors.ServiceNotReadyError("Connection closed")
    ready = topic.add_producer(producer, cmd.request_id)
    cnx.producers[cmd.producer_id] = producer
    # Not ready = queued for exclusive access: a second PRODUCER_SUCCESS follows (producer_ready).
    last_seq = topic.dedup.last_sequence_id(name) if topic.dedup is not None else -1
    epoch = producer.topic_epoch if ready and mode != ACCESS_SHARED else None
    cnx.write(
        cmds.producer_success(cmd.request_id, name, last_seq, schema_version, epoch, producer_ready=ready)
    )


def handle_send(cnx: Connection, frame: Any) -> None:
    cmd = frame.command
    producer = cnx.producers.get(cmd.producer_id)
    if producer is None:
        if cmd.producer_id in cnx.recently_closed_producers:
            return  # in flight when the broker closed it; the client re-sends after reconnecting
        log.warning(
            "SEND for unknown producer %s from %s: closing the connection", cmd.producer_id, cnx.peer_address
        )
        cnx.writer.close()
        return
    data = frame.headers_and_payload or b""
    checksum_ok, entry_messages, marker = send_facts(data)  # the one CRC check, the entry's facts
    if not checksum_ok:
        cnx.write(
            cmds.send_error(
                cmd.producer_id, cmd.sequence_id, ServerError.ChecksumError, "Checksum failed on the broker"
            )
        )
        return
    is_chunk = cmd.HasField("is_chunk") and cmd.is_chunk
    if not is_chunk and len(data) > cnx.service.config.max_message_size + HEADER_OVERHEAD_BYTES + 4096:
        # The client enforces the limit itself; only a misbehaving one gets here.
        log.warning("message of %d bytes over maxMessageSize from %s", len(data), cnx.peer_address)
        cnx.writer.close()
        return
    is_batch = cmd.HasField("num_messages")
    n = cmd.num_messages if is_batch else 1
    highest = cmd.highest_sequence_id if cmd.HasField("highest_sequence_id") else None
    cnx.publish_started()
    refused = check_send(producer.topic, producer.encrypted, len(data), is_chunk)
    if refused is not None:
        producer.reject(cmd.sequence_id, highest, refused)
        return
    txnid = None
    if cmd.HasField("txnid_most_bits") and cmd.HasField("txnid_least_bits"):
        txnid = txn_id(cmd.txnid_most_bits, cmd.txnid_least_bits)  # transaction.buffer holds it
        if producer.topic.txn_buffer is None:
            producer.reject(cmd.sequence_id, highest, TransactionsDisabledError())
            return
    ic = cnx.service.interceptor
    if ic is not None:
        ic.on_message_publish(producer, data)
    if entry_messages != max(1, n):
        facts = None  # the SEND and its metadata disagree: dispatch reads the entry, as ever
    elif marker is None and entry_messages == 1:
        facts = ONE_MESSAGE
    else:
        facts = EntryMetadata(num_messages=entry_messages, marker_type=marker)
    producer.publish(cmd.sequence_id, highest, max(1, n), is_batch, data, txnid, facts)
    throttle_publish(producer.topic, cnx, max(1, n), len(data))  # publish rate (.admission)


async def handle_close_producer(cnx: Connection, frame: Any) -> None:
    cmd = frame.command
    producer = cnx.producers.pop(cmd.producer_id, None)
    if producer is not None:
        producer.mark_closing()
        await producer.wait_drained(5.0)
        producer.topic.remove_producer(producer)
    cnx.write(cmds.success(cmd.request_id))
