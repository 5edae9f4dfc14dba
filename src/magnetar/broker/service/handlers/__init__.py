"""Command handlers, one module per family, and the table the connection dispatches on.

Theory of operation: ``HANDLERS`` maps a CommandType to ``handler(cnx, frame)``.
Most handlers are coroutines the connection awaits one at a time; the ones in
``SYNC`` (SEND, FLOW) are plain functions on the hot path that never wait.
When a coroutine handler raises, ``error_answer`` builds the reply the client
expects *for that request kind* (cpp routes errors per request map: a LOOKUP
failure must be a LOOKUP_RESPONSE with ``response=Failed``, a
PARTITIONED_METADATA failure a PARTITIONED_METADATA_RESPONSE, GET_SCHEMA its
own error form, the rest a CommandError) -- never silence, which the client
would only notice as a timeout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from magnetar.broker.errors import BrokerError
from magnetar.broker.service.handlers import consumer, lookup, misc, producer
from magnetar.broker.service.handlers.txn import TXN_HANDLERS
from magnetar.protocol import server_commands as cmds
from magnetar.protocol.enums import CommandType as T

HANDLERS: dict[int, Callable[..., Any]] = {
    T.LOOKUP: lookup.handle_lookup,
    T.PARTITIONED_METADATA: lookup.handle_partitioned_metadata,
    T.GET_TOPICS_OF_NAMESPACE: lookup.handle_get_topics_of_namespace,
    T.GET_SCHEMA: lookup.handle_get_schema,
    T.GET_OR_CREATE_SCHEMA: lookup.handle_get_or_create_schema,
    T.WATCH_TOPIC_LIST: lookup.handle_watch_topic_list,
    T.WATCH_TOPIC_LIST_CLOSE: lookup.handle_watch_topic_list_close,
    T.PRODUCER: producer.handle_producer,
    T.SEND: producer.handle_send,
    T.CLOSE_PRODUCER: producer.handle_close_producer,
    T.SUBSCRIBE: consumer.handle_subscribe,
    T.FLOW: consumer.handle_flow,
    T.ACK: consumer.handle_ack,
    T.REDELIVER_UNACKNOWLEDGED_MESSAGES: consumer.handle_redeliver,
    T.UNSUBSCRIBE: consumer.handle_unsubscribe,
    T.CLOSE_CONSUMER: consumer.handle_close_consumer,
    T.SEEK: consumer.handle_seek,
    T.GET_LAST_MESSAGE_ID: consumer.handle_get_last_message_id,
    T.CONSUMER_STATS: misc.handle_consumer_stats,
    T.AUTH_RESPONSE: misc.handle_auth_response,
    **TXN_HANDLERS,  # transactions (handlers/txn.py)
}

SYNC = frozenset({T.SEND, T.FLOW})


def is_sync(command_type: int) -> bool:
    return command_type in SYNC


def error_answer(frame: Any, err: BrokerError) -> bytes | None:
    """The reply that fails ``frame``'s request in the form the client routes, or None."""
    cmd = frame.command
    code = int(err.server_error)
    t = frame.type
    if t == T.LOOKUP:
        return cmds.lookup_failed(cmd.request_id, code, err.message)
    if t == T.PARTITIONED_METADATA:
        return cmds.partitioned_metadata_response(cmd.request_id, error=code, message=err.message)
    if t == T.GET_SCHEMA:
        return cmds.get_schema_response(cmd.request_id, error_code=code, error_message=err.message)
    if t == T.GET_OR_CREATE_SCHEMA:
        return cmds.get_or_create_schema_response(cmd.request_id, error_code=code, error_message=err.message)
    if t == T.ACK:
        if cmd.HasField("request_id"):
            return cmds.ack_response(cmd.consumer_id, cmd.request_id, error=code, message=err.message)
        return None
    if t in (T.REDELIVER_UNACKNOWLEDGED_MESSAGES, T.AUTH_RESPONSE):
        return None
    if hasattr(cmd, "request_id"):
        return cmds.error(cmd.request_id, code, err.message)
    return None
