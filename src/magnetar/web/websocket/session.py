"""What every WebSocket session shares: query parameters, upgrade or refusal, the frame loops.

Theory of operation: :func:`run_session` is the whole life of one socket::

    parse query (bad -> HTTP 400) -> session.open(link) (broker error -> its
    HTTP status: 404 unknown topic, 409 busy, 429, 503, else 500) -> accept
    -> read loop (one text frame at a time -> session.on_text) + writer task
    -> socket closed or session.close_with(...) -> link.close() (the broker
    forgets the producers/consumers; unacked messages are redelivered).

A refused upgrade is an HTTP response, not a WebSocket close, so clients see
Pulsar's status codes.  Outgoing frames go through a queue drained by one
writer task; while it holds more than ``OUT_HIGH_WATER`` frames the link is
marked not writable and the broker's dispatcher skips this consumer until the
socket catches up.  ``pause_reading`` (publish rate limiting) delays the next
read.  A text frame over ``webSocketMaxTextFrameSize`` closes the session
(1009); no frame either way for ``webSocketSessionIdleTimeoutMillis`` closes
it too (1001), as Pulsar's Jetty idle timeout does.  Authentication and authorization ran before this (``web.auth``); the
``token`` query parameter is accepted there as a bearer token.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Coroutine
from typing import Any

from starlette.responses import Response
from starlette.websockets import WebSocket, WebSocketDisconnect

from magnetar.broker import errors
from magnetar.broker.auth import AuthenticationError, AuthorizationError
from magnetar.broker.service.api import WebBrokerView
from magnetar.web.websocket.broker_link import BrokerLink

log = logging.getLogger(__name__)

OUT_HIGH_WATER = 1000
_STATUS_BY_ERROR: tuple[tuple[type[errors.BrokerError], int], ...] = (
    (errors.TopicNotFoundError, 404),
    (errors.SubscriptionNotFoundError, 404),
    (errors.ConsumerBusyError, 409),
    (errors.ProducerBusyError, 409),
    (errors.ProducerFencedError, 409),
    (errors.IncompatibleSchemaError, 409),
    (errors.ConsumerAssignError, 409),
    (errors.TooManyRequestsError, 429),
    (errors.TopicTerminatedError, 503),
    (errors.ServiceNotReadyError, 503),
    (errors.InvalidTopicNameError, 400),
    (AuthenticationError, 401),
    (AuthorizationError, 403),
)


def http_status_of(err: errors.BrokerError) -> int:
    for cls, status in _STATUS_BY_ERROR:
        if isinstance(err, cls):
            return status
    if "quota" in err.message.lower():
        return 503
    return 500


class BadParameter(ValueError):
    pass


class QueryParams:
    """Typed access to the upgrade request's query string; a bad value is a 400."""

    def __init__(self, raw: dict[str, str]) -> None:
        self.raw = raw

    def text(self, name: str, default: str | None = None) -> str | None:
        value = self.raw.get(name)
        return default if value is None or value == "" else value

    def integer(self, name: str, default: int) -> int:
        value = self.raw.get(name)
        if value is None or value == "":
            return default
        try:
            return int(value)
        except ValueError:
            raise BadParameter(f"Invalid {name}: {value!r} is not a number") from None

    def boolean(self, name: str, default: bool) -> bool:
        value = self.raw.get(name)
        if value is None or value == "":
            return default
        if value.lower() not in ("true", "false"):
            raise BadParameter(f"Invalid {name}: {value!r} is not true/false")
        return value.lower() == "true"

    def choice(self, name: str, allowed: tuple[str, ...], default: str | None) -> str | None:
        value = self.raw.get(name)
        if value is None or value == "":
            return default
        if value not in allowed:
            raise BadParameter(f"Invalid {name}: {value!r}, expected one of {', '.join(allowed)}")
        return value


class Session:
    """Base of the producer/consumer/reader sessions (also the link's listener)."""

    def __init__(self, ws: WebSocket, service: WebBrokerView, topic: str, params: QueryParams) -> None:
        self.ws = ws
        self.service = service
        self.clock = service.clock
        self.topic = topic
        self.params = params
        self.link: BrokerLink | None = None
        self._out: asyncio.Queue[str | None] = asyncio.Queue()
        self._tasks: list[asyncio.Task[Any]] = []
        self._close: tuple[int, str] | None = None
        self._closed_event = asyncio.Event()
        self._paused_until = 0.0
        config = getattr(service, "config", None)
        props = config.as_properties() if config is not None and hasattr(config, "as_properties") else {}
        self.idle_timeout_s = int(props.get("webSocketSessionIdleTimeoutMillis", 300_000)) / 1000
        self.max_text_frame = int(props.get("webSocketMaxTextFrameSize", 1_048_576))
        self._last_activity = self.clock.monotonic()

    # --- overridden by the sessions -----------------------------------------------------------
    async def open(self, link: BrokerLink) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    async def on_text(self, text: str) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def on_receipt(self, sequence_id: int, ledger_id: int, entry_id: int, partition: int) -> None:
        pass

    def on_send_failed(self, sequence_id: int, error: errors.BrokerError) -> None:
        pass

    def on_message(
        self, consumer_id: int, ledger_id: int, entry_id: int, partition: int, data: bytes, redelivery: int
    ) -> None:
        pass

    def on_closed_by_broker(self, what: str) -> None:
        # The topic was unloaded or deleted: Pulsar's client would reconnect; we end the session
        # and the WebSocket client reconnects (as Pulsar's docs tell it to after any close).
        self.close_with(1011, f"the broker closed the {what} (topic unloaded or deleted)")

    # --- helpers ------------------------------------------------------------------------------
    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        self._tasks.append(asyncio.get_running_loop().create_task(coro))

    def send_json(self, obj: dict[str, Any]) -> None:
        self._out.put_nowait(json.dumps(obj, separators=(",", ":")))
        if self.link is not None and self._out.qsize() >= OUT_HIGH_WATER:
            self.link.writable = False

    def close_with(self, code: int, reason: str) -> None:
        if self._close is None:
            self._close = (code, reason)
            self._out.put_nowait(None)
            self._closed_event.set()

    def pause_reading(self, delay_s: float) -> None:
        self._paused_until = max(self._paused_until, self.clock.monotonic() + delay_s)

    async def _writer(self) -> None:
        while True:
            item = await self._out.get()
            if item is None:
                return
            await self.ws.send_text(item)
            self._last_activity = self.clock.monotonic()
            if self.link is not None and not self.link.writable and self._out.qsize() < OUT_HIGH_WATER // 2:
                self.link.writable = True
                self.on_writable()

    def on_writable(self) -> None:
        pass

    async def _idle_watch(self) -> None:
        """Close a session with no frame either way for webSocketSessionIdleTimeoutMillis."""
        if self.idle_timeout_s <= 0:
            return
        while True:
            await self.clock.sleep(min(5.0, max(0.05, self.idle_timeout_s / 4)))
            if self.clock.monotonic() - self._last_activity >= self.idle_timeout_s:
                self.close_with(1001, "idle timeout")
                return

    async def _reader(self) -> None:
        while True:
            delay = self._paused_until - self.clock.monotonic()
            if delay > 0:
                await self.clock.sleep(delay)
            msg = await self.ws.receive()
            if msg["type"] == "websocket.disconnect":
                return
            self._last_activity = self.clock.monotonic()
            text = msg.get("text")
            if text is None and msg.get("bytes") is not None:
                text = msg["bytes"].decode("utf-8", errors="replace")
            if text is not None and len(text) > self.max_text_frame:
                self.close_with(1009, f"text frame of {len(text)} bytes exceeds webSocketMaxTextFrameSize")
                return
            if text is not None:
                try:
                    await self.on_text(text)
                except errors.BrokerError as exc:  # the broker refused (consumer gone, ...): say why
                    self.close_with(1011, f"{exc.message}")
                    return


async def run_session(ws: WebSocket, session: Session) -> None:
    svc = session.service
    peer = f"/{ws.client.host}:{ws.client.port}" if ws.client else "websocket"
    link = BrokerLink(svc, session, peer)
    session.link = link
    try:
        await session.open(link)
    except BadParameter as exc:
        await link.close()
        await deny(ws, 400, str(exc))
        return
    except Exception as exc:
        await link.close()
        err = errors.translate(exc)
        if not isinstance(exc, errors.BrokerError):
            log.exception("WebSocket session on %s failed to start", session.topic)
        await deny(ws, http_status_of(err), err.message)
        return
    await ws.accept()
    session._last_activity = session.clock.monotonic()
    session.spawn(session._idle_watch())
    writer = asyncio.get_running_loop().create_task(session._writer())
    reader = asyncio.get_running_loop().create_task(session._reader())
    closed = asyncio.get_running_loop().create_task(session._closed_event.wait())
    try:
        await asyncio.wait({writer, reader, closed}, return_when=asyncio.FIRST_COMPLETED)
        if (
            reader.done()
            and reader.exception() is not None
            and not isinstance(reader.exception(), WebSocketDisconnect)
        ):
            log.warning("WebSocket session on %s failed", session.topic, exc_info=reader.exception())
        if session._close is not None:
            try:
                await asyncio.wait_for(writer, 5.0)  # what was queued before the close goes out
            except Exception:
                pass
    finally:
        for task in (reader, closed, *session._tasks):
            task.cancel()
        if not writer.done():
            writer.cancel()
        await link.close()
        code, reason = session._close or (1000, "")
        try:
            await ws.close(code, reason[:120])
        except Exception:
            pass


async def deny(ws: WebSocket, status: int, message: str) -> None:
    body = json.dumps({"reason": message}).encode()
    try:
        await ws.send_denial_response(Response(body, status_code=status, media_type="application/json"))
    except RuntimeError:  # the server lacks the denial-response extension: a bare refusal (403)
        await ws.close(1008, message[:120])
