"""``FunctionInstance``: one instance of a function -- consume, process, publish, acknowledge.

Theory of operation: the instance owns a :class:`magnetar.client.Client`, one
consumer on the inputs (a topic list or a ``topicsPattern`` regex) under the
function's subscription, a producer on the output topic and, lazily, one
producer per topic the user's code ``context.publish``-es to.  The user's code
runs on one dedicated thread (``user_executor``), never on the event loop, so
a slow or blocking ``process`` does not stall I/O, and the context's blocking
helpers (state over HTTP) are allowed there.  Per message:

    receive -> [ATMOST_ONCE: ack now] -> process(value, context) on the user thread
      -> result None: ack (ATLEAST/EFFECTIVELY)            (a filter)
      -> result: send to output; ack when the broker has stored it
      -> exception / timeoutMs exceeded: negative-ack (redelivered; after
         maxMessageRetries the consumer's dead-letter policy moves it to
         deadLetterTopic)

Processing guarantees, as Pulsar has them:

* ``ATMOST_ONCE``: ack on receipt; a crash loses in-flight messages, never repeats them.
* ``ATLEAST_ONCE``: ack after the output is stored; a crash repeats in-flight ones.
* ``EFFECTIVELY_ONCE``: as at-least-once, plus the output producer has a fixed
  name (``{tenant}/{ns}/{name}-{instance}``), no batching, and every output's
  sequence id is derived from its input's position (:func:`sequence_id_of`), with
  deduplication turned on for the output topic; a repeat after a crash
  carries a sequence id the broker has already seen and is dropped (and one at or
  below the producer's ``last_sequence_id`` is not even sent again).  The worker
  turns on the output topic's own ``deduplicationEnabled`` policy for it.  The consumer is
  Failover so one instance reads a partition in order.

Sends are pipelined (up to the producer's pending limit): the ack happens in the
send future's callback, so throughput is not one round trip per message.
:class:`InstanceStats` counts what Pulsar's ``functions stats`` reports.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any

from magnetar.client import Client, ConsumerDeadLetterPolicy, ConsumerType, InitialPosition
from magnetar.functions.auth import NO_AUTH, ClientAuth
from magnetar.functions.config import FunctionConfig, ProcessingGuarantees
from magnetar.functions.context import Context
from magnetar.functions.loader import identity_deserialize, identity_serialize, load_callable

log = logging.getLogger(__name__)

RECEIVE_POLL_MS = 500
LATEST_EXCEPTIONS_MAX = 10
PUBLISH_TIMEOUT_S = 30.0


def sequence_id_of(message_id: Any) -> int:
    """A sequence id that grows with the input position: ledger (24 bits), entry (28), batch index (11)."""
    batch = message_id.batch_index if message_id.batch_index >= 0 else 0
    return (message_id.ledger_id << 39) | (message_id.entry_id << 11) | (batch & 0x7FF)


@dataclass
class InstanceStats:
    received_total: int = 0
    processed_successfully_total: int = 0
    user_exceptions_total: int = 0
    system_exceptions_total: int = 0
    latency_ms_sum: float = 0.0
    last_invocation_ms: int = 0
    latest_user_exceptions: list[dict[str, Any]] = field(default_factory=list)
    latest_system_exceptions: list[dict[str, Any]] = field(default_factory=list)
    user_metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    running: bool = False
    error: str = ""

    def user_exception(self, exc: BaseException, bucket: str = "user") -> None:
        entry = {"exceptionString": f"{type(exc).__name__}: {exc}", "timestampMs": int(time.time() * 1000)}
        target = self.latest_user_exceptions if bucket == "user" else self.latest_system_exceptions
        target.append(entry)
        del target[:-LATEST_EXCEPTIONS_MAX]
        if bucket == "user":
            self.user_exceptions_total += 1
        else:
            self.system_exceptions_total += 1

    def to_json(self) -> dict[str, Any]:
        done = self.processed_successfully_total
        return {
            "running": self.running,
            "error": self.error,
            "numReceived": self.received_total,
            "numSuccessfullyProcessed": done,
            "numUserExceptions": self.user_exceptions_total,
            "numSystemExceptions": self.system_exceptions_total,
            "latestUserExceptions": list(self.latest_user_exceptions),
            "latestSystemExceptions": list(self.latest_system_exceptions),
            "averageLatency": self.latency_ms_sum / done if done else 0.0,
            "lastInvocationTime": self.last_invocation_ms,
            "userMetrics": {k: v["sum"] / v["count"] for k, v in self.user_metrics.items() if v["count"]},
        }


class _LogTopicHandler(logging.Handler):
    """Sends the function's log records to its log topic (from any thread)."""

    def __init__(self, instance: FunctionInstance) -> None:
        super().__init__()
        self._instance = instance

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            self._instance.publish_threadsafe(
                self._instance.config.logTopic, self.format(record).encode(), {}, None
            )


class FunctionInstance:
    def __init__(
        self,
        config: FunctionConfig,
        instance_id: int,
        code_path: str,
        broker_url: str,
        state: Any,
        *,
        stats: InstanceStats | None = None,
        web_url: str | None = None,
        auth: ClientAuth = NO_AUTH,
    ) -> None:
        self.web_url = web_url
        self.auth = auth
        self.auth_headers = auth.http_headers()
        self.config = config
        self.instance_id = instance_id
        self.code_path = code_path
        self.broker_url = broker_url
        self.state = state
        self.stats = stats or InstanceStats()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Client | None = None
        self._producers: dict[str, Any] = {}
        self._producer_lock = asyncio.Lock()
        self._user = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"fn-{config.name}")
        self._stopping = asyncio.Event()
        self._acks: set[asyncio.Task[None]] = set()
        self._schemas: dict[tuple[str, bytes], tuple[str, bytes] | None] = {}

    @property
    def guarantee(self) -> ProcessingGuarantees:
        return self.config.processingGuarantees

    # --- output producers ------------------------------------------------------------------------

    async def _producer(self, topic: str) -> Any:
        async with self._producer_lock:
            p = self._producers.get(topic)
            if p is None:
                assert self._client is not None
                eo = self.guarantee is ProcessingGuarantees.EFFECTIVELY_ONCE and topic == self.config.output
                p = await self._client.create_producer(
                    topic,
                    producer_name=f"{self.config.fqfn}-{self.instance_id}" if eo else None,
                    batching_enabled=not eo,
                    batching_max_publish_delay_ms=1,
                    block_if_queue_full=True,
                    max_pending_messages=1000,
                )
                self._producers[topic] = p
            return p

    async def _publish(self, topic: str, payload: bytes, conf: dict[str, Any], callback: Any) -> Any:
        producer = await self._producer(topic)
        fut = await producer.send_async(payload, **conf)
        if callback is not None:
            fut.add_done_callback(lambda f: callback(f.exception(), None if f.exception() else f.result()))
        return fut

    def publish_threadsafe(self, topic: str, payload: bytes, conf: dict[str, Any], callback: Any) -> None:
        """``context.publish`` from the user thread: queue the send on the loop and wait until queued."""
        assert self._loop is not None
        future = asyncio.run_coroutine_threadsafe(self._publish(topic, payload, conf, callback), self._loop)
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not self._loop:  # never block the loop on itself (a log record from the loop thread)
            future.result(PUBLISH_TIMEOUT_S)

    def schema_threadsafe(self, topic: str, version: bytes) -> tuple[str, bytes] | None:
        """A topic's schema (at ``version``; latest when empty) from the broker, cached; user thread only."""
        key = (topic, version)
        if key not in self._schemas:
            assert self._loop is not None and self._client is not None
            from magnetar.common.naming import TopicName

            base = TopicName.get(topic).partitioned_topic_name
            got = asyncio.run_coroutine_threadsafe(
                self._client.get_schema_info(base, version or None), self._loop
            ).result(PUBLISH_TIMEOUT_S)
            self._schemas[key] = None if got is None else (got[0].type.name, got[0].schema_data)
        return self._schemas[key]

    # --- the loop --------------------------------------------------------------------------------

    def _logger(self) -> logging.Logger:
        logger = logging.getLogger(f"magnetar.functions.user.{self.config.fqfn}.{self.instance_id}")
        if self.config.logTopic and not any(isinstance(h, _LogTopicHandler) for h in logger.handlers):
            logger.addHandler(_LogTopicHandler(self))
            logger.setLevel(logging.INFO)
        return logger

    async def _subscribe(self) -> Any:
        assert self._client is not None
        c = self.config
        ordered = c.retainOrdering or self.guarantee is ProcessingGuarantees.EFFECTIVELY_ONCE
        dlq = None
        if c.maxMessageRetries is not None and c.maxMessageRetries > 0:
            dlq = ConsumerDeadLetterPolicy(c.maxMessageRetries, c.deadLetterTopic)
        topics: Any = re.compile(c.topicsPattern) if c.topicsPattern else list(c.inputs)
        return await self._client.subscribe(
            topics,
            c.subscription,
            consumer_type=ConsumerType.Failover
            if ordered
            else (ConsumerType.KeyShared if c.retainKeyOrdering else ConsumerType.Shared),
            initial_position=InitialPosition.Earliest
            if c.subscriptionPosition == "Earliest"
            else InitialPosition.Latest,
            dead_letter_policy=dlq,
            negative_ack_redelivery_delay_ms=1000,
            unacked_messages_timeout_ms=c.timeoutMs if c.timeoutMs and c.timeoutMs >= 1000 else None,
            pattern_auto_discovery_period=5,
        )

    async def run(self) -> None:
        """Run until :meth:`stop` (or cancellation); raises if the code or the broker fail."""
        self._loop = asyncio.get_running_loop()
        fn = await self._loop.run_in_executor(
            self._user, load_callable, self.code_path, self.config.className, self.config.componentType
        )
        if self.guarantee is ProcessingGuarantees.EFFECTIVELY_ONCE and self.config.output:
            await self._enable_dedup(self.config.output)
        self._client = Client(self.broker_url, authentication=self.auth.client_authentication())
        try:
            is_source = self.config.componentType == "source"
            consumer = None if is_source else await self._subscribe()
            if self.config.output:
                await self._producer(self.config.output)
            ctx = Context(
                self.config,
                self.instance_id,
                state=self.state,
                publish_fn=self.publish_threadsafe,
                logger=self._logger(),
                metrics=self.stats.user_metrics,
                schema_fn=self.schema_threadsafe,
            )
            self.stats.running = True
            self.stats.error = ""
            if consumer is None:
                await self._source_loop(fn, ctx)
            while consumer is not None and not self._stopping.is_set():
                try:
                    msg = await consumer.receive(RECEIVE_POLL_MS)
                except Exception as exc:
                    if type(exc).__name__ == "Timeout":
                        continue
                    raise
                await self._handle(consumer, fn, ctx, msg)
            for p in list(self._producers.values()):
                await p.flush()
            if self._acks:
                await asyncio.wait(list(self._acks), timeout=5)
        finally:
            self.stats.running = False
            await self._client.close()
            self._user.shutdown(wait=False, cancel_futures=True)

    async def _enable_dedup(self, topic: str) -> None:
        """Make sure the broker deduplicates the output topic, as effectively-once needs.

        Sets the output topic's own ``deduplicationEnabled`` policy (topic > namespace >
        ``brokerDeduplicationEnabled``, as Pulsar resolves it), so other topics of the
        namespace are untouched; Pulsar asks the user to enable it, the worker does it for
        them when it is not on, and logs that it did.
        """
        if not self.web_url:
            raise RuntimeError("EFFECTIVELY_ONCE needs the admin URL to enable deduplication")
        import httpx

        from magnetar.common.naming import TopicName

        name = TopicName.get(topic)
        url = f"{self.web_url.rstrip('/')}/admin/v2/{name.rest_path()}/deduplicationEnabled"
        async with httpx.AsyncClient(timeout=30, headers=self.auth_headers) as http:
            got = await http.get(url, params={"applied": "true"})
            if got.status_code == 200 and got.content and got.json() is True:
                return
            r = await http.post(url, json=True)
        if r.status_code >= 300:
            raise RuntimeError(f"enabling deduplication on {topic} failed: {r.status_code} {r.text[:200]}")
        log.warning(
            "EFFECTIVELY_ONCE function %s: enabled deduplication on topic %s", self.config.fqfn, topic
        )

    async def _source_loop(self, fn: Any, ctx: Context) -> None:
        """A source: ask its ``read`` (on the user thread) for values and publish them to the output."""
        assert self._loop is not None and self.config.output
        while not self._stopping.is_set():
            try:
                value = await self._loop.run_in_executor(self._user, fn, None, ctx)
            except Exception as exc:
                self.stats.user_exception(exc)
                value = None
            if value is None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), 0.05)
                continue
            self.stats.received_total += 1
            fut = await self._publish(self.config.output, identity_serialize(value), {}, None)
            fut.add_done_callback(self._source_sent)

    def _source_sent(self, fut: asyncio.Future[Any]) -> None:
        if fut.cancelled() or fut.exception() is not None:
            self.stats.user_exception(fut.exception() or RuntimeError("send cancelled"), "system")
        else:
            self.stats.processed_successfully_total += 1
            self.stats.last_invocation_ms = int(time.time() * 1000)

    def _call(self, fn: Any, ctx: Context, msg: Any) -> Any:
        ctx.set_message(msg)
        return fn(identity_deserialize(msg.data()), ctx)

    async def _handle(self, consumer: Any, fn: Any, ctx: Context, msg: Any) -> None:
        assert self._loop is not None
        self.stats.received_total += 1
        if self.guarantee is ProcessingGuarantees.ATMOST_ONCE:
            await consumer.acknowledge(msg)
        t0 = time.monotonic()
        call = self._loop.run_in_executor(self._user, self._call, fn, ctx, msg)
        timeout_s = self.config.timeoutMs / 1000 if self.config.timeoutMs else None
        try:
            result = await asyncio.wait_for(asyncio.shield(call), timeout_s)
        except TimeoutError:
            self.stats.user_exception(TimeoutError(f"process() took over {self.config.timeoutMs} ms"))
            await self._fail(consumer, msg)
            return
        except Exception as exc:
            self.stats.user_exception(exc)
            await self._fail(consumer, msg)
            return
        self.stats.last_invocation_ms = int(time.time() * 1000)
        self.stats.latency_ms_sum += (time.monotonic() - t0) * 1000
        if result is None or not self.config.output:
            self.stats.processed_successfully_total += 1
            if self.guarantee is not ProcessingGuarantees.ATMOST_ONCE:
                await consumer.acknowledge(msg)
            return
        try:
            payload = identity_serialize(result)
        except TypeError as exc:
            self.stats.user_exception(exc)
            await self._fail(consumer, msg)
            return
        conf: dict[str, Any] = {"properties": msg.properties() or None}
        if msg.partition_key():
            conf["partition_key"] = msg.partition_key()
        if self.guarantee is ProcessingGuarantees.EFFECTIVELY_ONCE:
            seq = conf["sequence_id"] = sequence_id_of(msg.message_id())
            producer = await self._producer(self.config.output)
            if seq <= producer.last_sequence_id():
                # Its output is already stored (the broker told the producer so): a redelivery
                # after a restart.  Acknowledge without publishing again.
                self.stats.processed_successfully_total += 1
                await consumer.acknowledge(msg)
                return
        fut = await self._publish(self.config.output, payload, conf, None)
        fut.add_done_callback(lambda f: self._sent(f, consumer, msg))

    def _sent(self, fut: asyncio.Future[Any], consumer: Any, msg: Any) -> None:
        if fut.cancelled() or fut.exception() is not None:
            self.stats.user_exception(fut.exception() or RuntimeError("send cancelled"), "system")
            if self.guarantee is not ProcessingGuarantees.ATMOST_ONCE:
                self._own(self._fail(consumer, msg))
            return
        self.stats.processed_successfully_total += 1
        if self.guarantee is not ProcessingGuarantees.ATMOST_ONCE:
            self._own(self._ack_quietly(consumer, msg))

    def _own(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._acks.add(task)
        task.add_done_callback(self._acks.discard)

    async def _ack_quietly(self, consumer: Any, msg: Any) -> None:
        with contextlib.suppress(Exception):
            await consumer.acknowledge(msg)

    async def _fail(self, consumer: Any, msg: Any) -> None:
        if self.guarantee is ProcessingGuarantees.ATMOST_ONCE:
            return
        with contextlib.suppress(Exception):
            await consumer.negative_acknowledge(msg)

    def stop(self) -> None:
        self._stopping.set()
