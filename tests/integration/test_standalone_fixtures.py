"""The shipped fixtures of magnetar.testing.standalone, used as another project would use them."""

from __future__ import annotations

import asyncio
import signal

import httpx

from magnetar.testing.standalone import inprocess_standalone, standalone_process  # noqa: F401


async def test_inprocess_fixture_serves_lookup_and_partitions(inprocess_standalone):  # noqa: F811
    sa = inprocess_standalone
    async with httpx.AsyncClient(base_url=sa.web_url, timeout=10) as http:
        r = await http.put("/admin/v2/persistent/public/default/fx/partitions", content=b"2")
        assert r.status_code == 204
        r = await http.get("/admin/v2/persistent/public/default/fx/partitions")
        assert r.json() == {"partitions": 2}
        r = await http.put("/admin/v2/persistent/public/default/fx/partitions", content=b"2")
        assert r.status_code == 409
    # the binary port accepts connections too
    reader, writer = await asyncio.open_connection("127.0.0.1", sa.broker_port)
    writer.close()
    await writer.wait_closed()


def test_process_fixture_restarts_with_its_data(standalone_process):  # noqa: F811
    import json
    import urllib.request

    url = f"{standalone_process.web_url}/admin/v2/persistent/public/default/kept/partitions"
    req = urllib.request.Request(url, data=b"4", method="PUT", headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=10).close()
    standalone_process.proc.send_signal(signal.SIGINT)  # Ctrl-C is a clean stop too
    assert standalone_process.proc.wait(30) == 0
    standalone_process.restart()  # same ports
    with urllib.request.urlopen(url, timeout=10) as r:
        assert json.loads(r.read()) == {"partitions": 4}


async def test_health_check_round_trip_and_refusal(inprocess_standalone):  # noqa: F811
    import pytest

    from magnetar.app.healthcheck import HealthCheckError, check_broker_health
    from magnetar.runtime import RealClock, Rng

    sa = inprocess_standalone
    topic = "persistent://pulsar/system/healthcheck-test"
    await check_broker_health("127.0.0.1", sa.broker_port, topic, clock=RealClock(), rng=Rng(1))
    await check_broker_health("127.0.0.1", sa.broker_port, topic, clock=RealClock(), rng=Rng(2))  # again
    with pytest.raises(HealthCheckError, match="namespace|Namespace|failed"):
        await check_broker_health(
            "127.0.0.1", sa.broker_port, "persistent://nobody/nowhere/h", clock=RealClock(), rng=Rng(3)
        )
    # nothing listens on the web port's binary protocol: a clear error, not a hang
    with pytest.raises(HealthCheckError):
        await check_broker_health("127.0.0.1", sa.web_port, topic, clock=RealClock(), rng=Rng(4), timeout_s=3)
