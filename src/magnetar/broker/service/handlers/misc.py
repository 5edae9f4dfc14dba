"""Small commands: CONSUMER_STATS and AUTH_RESPONSE.

Theory of operation: CONSUMER_STATS answers from the consumer's counters (the
cpp client asks only on request).  AUTH_RESPONSE carries a refreshed
credential after our AUTH_CHALLENGE (see ``service/security.py``); a refused
one drops the connection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from magnetar.broker import errors
from magnetar.broker.service.subscription import SUB_TYPE_NAMES
from magnetar.protocol import server_commands as cmds

if TYPE_CHECKING:
    from magnetar.broker.service.connection import Connection


async def handle_consumer_stats(cnx: Connection, frame: Any) -> None:
    cmd = frame.command
    consumer = cnx.consumers.get(cmd.consumer_id)
    if consumer is None:
        raise errors.ConsumerNotFoundError(f"Consumer {cmd.consumer_id} not found")
    sub = consumer.subscription
    cnx.write(
        cmds.consumer_stats_response(
            cmd.request_id,
            msgRateOut=0.0,
            msgThroughputOut=0.0,
            msgRateRedeliver=0.0,
            consumerName=consumer.consumer_name,
            availablePermits=consumer.permits,
            unackedMessages=consumer.unacked_messages,
            blockedConsumerOnUnackedMsgs=consumer.blocked,
            address=cnx.peer_address,
            connectedSince=str(consumer.connected_since_ms),
            type=SUB_TYPE_NAMES.get(consumer.sub_type, "Exclusive"),
            msgRateExpired=0.0,
            msgBacklog=sub.backlog(),
        )
    )


async def handle_auth_response(cnx: Connection, frame: Any) -> None:
    if not await cnx.security.on_auth_response(frame.command):
        cnx.writer.close()
