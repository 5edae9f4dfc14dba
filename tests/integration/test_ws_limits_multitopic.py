"""WebSocket API against an in-process standalone: the multi-topic consumer (/ws/v3),
the idle timeout and the text frame size limit."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from magnetar.testing.standalone import running_standalone

PROPS = {"webSocketSessionIdleTimeoutMillis": "800", "webSocketMaxTextFrameSize": "2000"}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def _publish(base: str, topic: str, texts: list[str]) -> None:
    async with connect(f"{base}/ws/v2/producer/persistent/public/default/{topic}") as p:
        for t in texts:
            await p.send(json.dumps({"payload": b64(t.encode())}))
            assert json.loads(await p.recv())["result"] == "ok"


async def test_v3_consumer_over_a_topic_list_and_a_pattern(tmp_path) -> None:
    async with running_standalone(tmp_path, PROPS) as sa:
        base = sa.web_url.replace("http://", "ws://")
        await _publish(base, "multi-a", ["a0"])  # create the topics first
        await _publish(base, "multi-b", ["b0"])
        await _publish(base, "other-c", ["c0"])
        async with (
            connect(
                f"{base}/ws/v3/consumer/list-sub?topics=multi-a,persistent://public/default/multi-b"
            ) as by_list,
            connect(
                f"{base}/ws/v3/consumer/pat-sub?topicsPattern=persistent://public/default/multi-.*"
            ) as by_pat,
        ):
            await _publish(base, "multi-a", ["a1"])
            await _publish(base, "multi-b", ["b1"])
            await _publish(base, "other-c", ["c1"])
            for ws in (by_list, by_pat):
                got = set()
                for _ in range(2):
                    m = json.loads(await asyncio.wait_for(ws.recv(), 10))
                    got.add(base64.b64decode(m["payload"]).decode())
                    await ws.send(json.dumps({"messageId": m["messageId"]}))
                assert got == {"a1", "b1"}
                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(ws.recv(), 0.7)  # nothing from other-c
        with pytest.raises(InvalidStatus) as info:
            await connect(f"{base}/ws/v3/consumer/s")  # neither topics nor topicsPattern
        assert info.value.response.status_code == 400


async def test_idle_session_is_closed_and_large_frames_are_refused(tmp_path) -> None:
    async with running_standalone(tmp_path, PROPS) as sa:
        base = sa.web_url.replace("http://", "ws://") + "/ws/v2/producer/persistent/public/default/limits"
        async with connect(base) as ws:
            await asyncio.sleep(1.6)
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 5)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
        async with connect(base) as ws:
            await ws.send(json.dumps({"payload": b64(b"x" * 3000)}))
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 5)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
