"""Discovery commands: LOOKUP, PARTITIONED_METADATA, GET_TOPICS_OF_NAMESPACE, WATCH_TOPIC_LIST
(and its CLOSE), GET_SCHEMA, GET_OR_CREATE_SCHEMA -- the topic lists themselves are :mod:`..topic_list`'s.

Theory of operation: every producer/consumer starts with PARTITIONED_METADATA
for the name the application gave, then one LOOKUP per partition (or for the
topic).  The namespace service decides (:mod:`magnetar.broker.ownership`):
``Connect`` when this broker owns (or takes) the topic's bundle -- always in a
standalone -- else ``Redirect`` to the owner's URLs (or to the broker chosen
for an unowned bundle) with ``authoritative=true``, which the client copies
into its next lookup.  The answers always carry ``response`` (cpp treats its absence as
failure), and failures travel in the response's own error form, not as a
CommandError the client would not route (see ``handlers.error_answer``).

The client sends ``advertised_listener_name=""`` always; empty means "not
set".  An unknown non-empty listener is ServiceNotReady with Java's exact
wording, which cpp matches on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from magnetar.broker import errors
from magnetar.broker.service.names import parse_topic
from magnetar.broker.service.schemas import get_or_create_schema_version, get_schema_answer
from magnetar.broker.service.topic_list import topics_of_namespace
from magnetar.protocol import server_commands as cmds
from magnetar.protocol.enums import LookupType

if TYPE_CHECKING:
    from magnetar.broker.service.connection import Connection

_MODES = {0: "PERSISTENT", 1: "NON_PERSISTENT", 2: "ALL"}


async def handle_lookup(cnx: Connection, frame: Any) -> None:
    cmd = frame.command
    listener = cmd.advertised_listener_name if cmd.HasField("advertised_listener_name") else ""
    svc = cnx.service
    if listener and listener not in svc.listener_names():
        raise errors.ServiceNotReadyError(f"the broker do not have {listener} listener")
    authoritative = cmd.authoritative if cmd.HasField("authoritative") else False
    answer = await svc.lookup_topic(cmd.topic, authoritative)  # validates the name and the namespace
    cnx.write(
        cmds.lookup_response(
            cmd.request_id,
            LookupType.Redirect if answer.redirect else LookupType.Connect,
            broker_service_url=answer.owner.native_url,
            broker_service_url_tls=answer.owner.native_url_tls,
            authoritative=answer.authoritative,
        )
    )


async def handle_partitioned_metadata(cnx: Connection, frame: Any) -> None:
    cmd = frame.command
    auto_create = (
        cmd.metadata_auto_creation_enabled if cmd.HasField("metadata_auto_creation_enabled") else True
    )
    n = await cnx.service.get_partitioned_metadata(cmd.topic, check_allow_auto_creation=auto_create)
    cnx.write(cmds.partitioned_metadata_response(cmd.request_id, n))


async def handle_get_topics_of_namespace(cnx: Connection, frame: Any) -> None:
    cmd = frame.command
    mode = _MODES.get(cmd.mode if cmd.HasField("mode") else 0, "PERSISTENT")
    pattern = cmd.topics_pattern if cmd.HasField("topics_pattern") else None
    client_hash = cmd.topics_hash if cmd.HasField("topics_hash") else None
    topics, filtered, digest, changed = await topics_of_namespace(
        cnx.service, cmd.namespace, mode, pattern, client_hash
    )
    cnx.write(
        cmds.get_topics_of_namespace_response(
            cmd.request_id, topics, filtered=filtered, topics_hash=digest, changed=changed
        )
    )


async def handle_watch_topic_list(cnx: Connection, frame: Any) -> None:
    cmd = frame.command
    client_hash = cmd.topics_hash if cmd.HasField("topics_hash") else None
    topics, digest = await cnx.service.topic_list_watchers.watch(
        cnx, cmd.watcher_id, cmd.namespace, cmd.topics_pattern, client_hash
    )
    cnx.write(cmds.watch_topic_list_success(cmd.request_id, cmd.watcher_id, topics, digest))


async def handle_watch_topic_list_close(cnx: Connection, frame: Any) -> None:
    cmd = frame.command
    cnx.service.topic_list_watchers.close(cnx, cmd.watcher_id)
    cnx.write(cmds.success(cmd.request_id))


async def handle_get_or_create_schema(cnx: Connection, frame: Any) -> None:
    cmd = frame.command
    topic = cnx.service.topics.get_loaded(parse_topic(cmd.topic).full_name)
    if topic is None:
        raise errors.TopicNotFoundError(f"Topic {cmd.topic} is not loaded on this broker")
    version = await get_or_create_schema_version(cnx.service, topic, cmd)
    cnx.write(cmds.get_or_create_schema_response(cmd.request_id, version))


async def handle_get_schema(cnx: Connection, frame: Any) -> None:
    cmd = frame.command
    topic = parse_topic(cmd.topic).full_name
    version = cmd.schema_version if cmd.HasField("schema_version") else None
    cnx.write(await get_schema_answer(cnx.service.schemas, cmd.request_id, topic, version))
