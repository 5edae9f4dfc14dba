"""A blocking facade over magnetar.client, for code that is not asyncio: ``magnetar.client.sync``.

Theory of operation: :class:`Client` starts one daemon thread running its own
event loop and builds the asyncio :class:`magnetar.client.Client` on it. Every
method of the facade's objects runs the asyncio method on that loop
(``asyncio.run_coroutine_threadsafe``) and blocks the calling thread until it
finishes; what it returns is wrapped again (a ``Producer`` in a blocking
``Producer``...), so the names and keyword arguments are exactly the async
client's -- and so the official client's -- without ``await``::

    from magnetar.client.sync import Client

    client = Client("pulsar://localhost:6650")
    producer = client.create_producer("my-topic")
    producer.send(b"hello")
    consumer = client.subscribe("my-topic", "my-sub", initial_position="earliest")
    msg = consumer.receive()
    consumer.acknowledge(msg)
    client.close()

Plain (non-coroutine) methods such as ``topic()`` or ``msg.data()`` are called
directly. ``Producer.send_async(content, callback)`` returns once the message
is queued (blocking while the queue is full with ``block_if_queue_full``, as
the official client) and gives a ``concurrent.futures.Future`` of its
MessageId; callbacks run on the client's loop thread, as the official client
runs them on its I/O thread. Many threads may share one facade client.
``close()`` closes the asyncio client, then stops the loop and its thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
from collections.abc import Coroutine
from typing import Any

from magnetar.client.client import Client as AsyncClient
from magnetar.client.consumer import Consumer as AsyncConsumer
from magnetar.client.errors import AlreadyClosed
from magnetar.client.producer import Producer as AsyncProducer
from magnetar.client.reader import Reader as AsyncReader
from magnetar.client.tableview import TableView as AsyncTableView

__all__ = ["Client", "Consumer", "Producer", "Reader", "TableView"]


class _LoopThread:
    """An event loop running forever in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        started = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.call_soon(started.set)
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, name="magnetar-client-loop", daemon=True)
        self.thread.start()
        started.wait()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError(
                "a blocking magnetar.client.sync call from its own loop thread (e.g. a callback)"
            )
        if self.loop.is_closed():
            coro.close()
            raise AlreadyClosed("the client is closed")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.loop.is_running():
            self.loop.close()


class _Blocking:
    """Runs the wrapped object's coroutine methods on the loop thread and waits for them."""

    def __init__(self, obj: Any, runner: _LoopThread) -> None:
        self._obj = obj
        self._runner = runner

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._obj, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            return _wrap(self._runner.run(attr(*args, **kwargs)), self._runner)

        call.__name__ = name
        call.__doc__ = attr.__doc__
        return call

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<sync {self._obj!r}>"


class Producer(_Blocking):
    def send_async(self, content: Any, callback: Any = None, **kwargs: Any) -> concurrent.futures.Future[Any]:
        """Queue a message (blocking while the queue is full); a Future of its MessageId."""

        async def enqueue() -> concurrent.futures.Future[Any]:
            afut = await self._obj.send_async(content, callback, **kwargs)
            out: concurrent.futures.Future[Any] = concurrent.futures.Future()

            def done(f: asyncio.Future[Any]) -> None:
                if f.cancelled():
                    out.cancel()
                elif f.exception() is not None:
                    out.set_exception(f.exception())  # type: ignore[arg-type]
                else:
                    out.set_result(f.result())

            afut.add_done_callback(done)
            return out

        return self._runner.run(enqueue())  # type: ignore[no-any-return]


class Consumer(_Blocking):
    def __iter__(self) -> Consumer:
        return self

    def __next__(self) -> Any:
        try:
            return self._runner.run(self._obj.receive())
        except AlreadyClosed:
            raise StopIteration from None


class Reader(_Blocking):
    def __iter__(self) -> Reader:
        return self

    def __next__(self) -> Any:
        try:
            return self._runner.run(self._obj.read_next())
        except AlreadyClosed:
            raise StopIteration from None


class TableView(_Blocking):
    pass


_WRAPPERS: dict[type, type[_Blocking]] = {
    AsyncProducer: Producer,
    AsyncConsumer: Consumer,
    AsyncReader: Reader,
    AsyncTableView: TableView,
}


def _wrap(value: Any, runner: _LoopThread) -> Any:
    cls = _WRAPPERS.get(type(value))
    return cls(value, runner) if cls is not None else value


class Client(_Blocking):
    """``magnetar.client.Client``'s arguments; every method blocks instead of returning a coroutine."""

    def __init__(self, service_url: str, **kwargs: Any) -> None:
        runner = _LoopThread()

        async def build() -> AsyncClient:
            return AsyncClient(service_url, **kwargs)

        try:
            client = runner.run(build())
        except BaseException:
            runner.stop()
            raise
        super().__init__(client, runner)

    def close(self) -> None:
        if self._runner.loop.is_closed():
            return
        try:
            self._runner.run(self._obj.close())
        finally:
            self._runner.stop()
