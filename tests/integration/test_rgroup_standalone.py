"""Resource groups on a real standalone with the official client (issue 17: limits that protect neighbours).

* REST: list/get/put/delete ``/admin/v2/resourcegroups``; 400 for bad JSON and rates below
  -1; 404 unknown; 412 attaching a namespace to an unknown group; 409 deleting a group a
  namespace still names; an update changes only the rates it carries; the CLI's
  ``magnetar admin resourcegroups`` with pulsar-admin's flags.
* Publish: two namespaces attached to one group with publishRateInMsgs=200, one producer
  in each (separate connections): together ~200 msg/s, while a producer in a namespace
  outside the group runs unthrottled at the same time; updating the group to 400 changes
  the rate of the same producers (no reconnect: ``connectedSince`` unchanged).
* Dispatch: the same with dispatchRateInMsgs for consumers draining a backlog.
* ``/metrics`` carries ``pulsar_resource_group_calculated_messages_quota``.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason
from tests.integration.test_admin_support import start_standalone

pulsar = pytest.importorskip("pulsar")

V2 = "/admin/v2"
RG = f"{V2}/resourcegroups"
WARMUP_S = 1.5
MEASURE_S = 3.0


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    proc = start_standalone(tmp_path_factory.mktemp("rgroup"), {"managedLedgerMaxEntriesPerLedger": "50000"})
    try:
        yield proc
    finally:
        proc.terminate()


@pytest.fixture(scope="module")
def http(standalone: StandaloneProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=standalone.web_url, timeout=30) as client:
        yield client


def _ns(http: httpx.Client, ns: str) -> None:
    r = http.put(f"{V2}/namespaces/{ns}")
    assert r.status_code in (204, 409), r.text


def _group(http: httpx.Client, name: str, **rates: int) -> None:
    r = http.put(f"{RG}/{name}", json=rates)
    assert r.status_code == 204, r.text


def _attach(http: httpx.Client, ns: str, group: str) -> None:
    r = http.post(f"{V2}/namespaces/{ns}/resourcegroup/{group}")
    assert r.status_code == 204, r.text


# ---------------------------------------------------------------- REST and CLI
def test_resource_group_rest_answers_and_refusals(http: httpx.Client, standalone: StandaloneProcess) -> None:
    r = http.put(f"{RG}/rg-bad", json={"publishRateInMsgs": -5})
    assert r.status_code == 400 and "publishRateInMsgs" in r.text, r.text
    r = http.put(
        f"{RG}/rg-bad", content=b'{"publishRateInMsgs": 1', headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 400, r.text
    r = http.put(f"{RG}/rg-bad", json={"dispatchRateInBytes": "lots"})
    assert r.status_code == 400 and "dispatchRateInBytes" in r.text, r.text
    assert http.get(f"{RG}/rg-bad").status_code == 404
    assert "rg-bad" not in http.get(RG).json()

    _ns(http, "public/rg-rest")
    r = http.post(f"{V2}/namespaces/public/rg-rest/resourcegroup/no-such-group")
    assert r.status_code == 412 and "no-such-group" in r.text, r.text
    assert http.get(f"{V2}/namespaces/public/rg-rest/resourcegroup").status_code == 204  # still unset

    _group(http, "rg-rest", publishRateInMsgs=100, dispatchRateInBytes=5000)
    assert http.get(f"{RG}/rg-rest").json() == {
        "publishRateInMsgs": 100,
        "publishRateInBytes": -1,
        "dispatchRateInMsgs": -1,
        "dispatchRateInBytes": 5000,
    }
    _group(http, "rg-rest", publishRateInBytes=1024)  # an update changes what it carries
    assert http.get(f"{RG}/rg-rest").json()["publishRateInMsgs"] == 100
    assert http.get(f"{RG}/rg-rest").json()["publishRateInBytes"] == 1024
    assert "rg-rest" in http.get(RG).json()

    _attach(http, "public/rg-rest", "rg-rest")
    assert http.get(f"{V2}/namespaces/public/rg-rest/resourcegroup").json() == "rg-rest"
    r = http.delete(f"{RG}/rg-rest")
    assert r.status_code == 409 and "public/rg-rest" in r.text, r.text
    assert http.delete(f"{V2}/namespaces/public/rg-rest/resourcegroup").status_code == 204
    assert http.delete(f"{RG}/rg-rest").status_code == 204
    assert http.get(f"{RG}/rg-rest").status_code == 404
    assert http.delete(f"{RG}/rg-rest").status_code == 404

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "magnetar.cli.main", "admin", "--admin-url", standalone.web_url, *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)

    assert cli("resourcegroups", "create", "rg-cli", "--msg-publish-rate", "50", "-bd", "900").returncode == 0
    assert cli("resourcegroups", "update", "rg-cli", "--msg-dispatch-rate", "7").returncode == 0
    got = cli("-o", "json", "resourcegroups", "get", "rg-cli")
    assert got.returncode == 0, got.stderr
    assert '"dispatchRateInMsgs": 7' in got.stdout and '"publishRateInMsgs": 50' in got.stdout, got.stdout
    assert "rg-cli" in cli("resourcegroups", "list").stdout
    bad = cli("resourcegroups", "create", "rg-cli2", "--msg-publish-rate", "-3")
    assert bad.returncode != 0 and "publish" in (bad.stderr + bad.stdout).lower()
    assert cli("resourcegroups", "delete", "rg-cli").returncode == 0
    assert "rg-cli" not in http.get(RG).json()


# ---------------------------------------------------------------- rates
class Pump:
    """A producer sending as fast as the broker lets it (send_async, bounded queue)."""

    def __init__(self, producer) -> None:  # noqa: ANN001
        self.producer = producer
        self.acked = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _done(self, res, _msg_id) -> None:  # noqa: ANN001
        if res == pulsar.Result.Ok:
            with self._lock:
                self.acked += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.producer.send_async(b"x" * 16, self._done)
            except Exception:
                time.sleep(0.01)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


class Drain:
    """A consumer receiving (and acknowledging) as fast as the broker dispatches."""

    def __init__(self, consumer) -> None:  # noqa: ANN001
        self.consumer = consumer
        self.acked = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.consumer.acknowledge(self.consumer.receive(100))
                self.acked += 1
            except pulsar.Timeout:
                pass
            except Exception:
                time.sleep(0.01)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def rates(workers: list, seconds: float = MEASURE_S) -> list[float]:
    before = [w.acked for w in workers]
    t0 = time.monotonic()
    time.sleep(seconds)
    dt = time.monotonic() - t0
    return [(w.acked - b) / dt for w, b in zip(workers, before, strict=True)]


def group_rates(
    workers: list, what: str, limit: int, within: tuple[float, float], settle_s: float
) -> list[float]:
    """After ``settle_s``, the rates of ``workers`` over MEASURE_S (msg/s, printed).  The first two
    are in the group's two namespaces: their sum must be ``within`` (the group's ``limit``, give or
    take a batch's overshoot and a busy machine); a third is outside the group (its caller checks it)."""
    time.sleep(settle_s)
    got = rates(workers)
    a, b = got[:2]
    outside = f" outside={got[2]:.0f}" if len(got) > 2 else ""
    print(f"{what}, group at {limit} msg/s: a={a:.0f} b={b:.0f} (sum {a + b:.0f}){outside} msg/s")
    assert within[0] <= a + b <= within[1], (a, b)
    return got


def _producer(client, topic: str):  # noqa: ANN001, ANN202
    """Small batches: a busy 2-core machine still publishes thousands of messages a second
    unthrottled (the group counts messages, not batches, and carries a batch's overshoot as debt)."""
    return client.create_producer(
        topic,
        batching_enabled=True,
        batching_max_messages=10,
        batching_max_publish_delay_ms=5,
        max_pending_messages=500,
        block_if_queue_full=True,
    )


def _connected_since(http: httpx.Client, topic: str) -> str:
    stats = http.get(f"{V2}/persistent/{topic.removeprefix('persistent://')}/stats").json()
    return stats["publishers"][0]["connectedSince"]


def test_group_publish_rate_is_shared_by_its_namespaces(
    http: httpx.Client, standalone: StandaloneProcess
) -> None:
    for ns in ("public/rgp-a", "public/rgp-b", "public/rgp-out"):
        _ns(http, ns)
    _group(http, "rg-pub", publishRateInMsgs=200)
    _attach(http, "public/rgp-a", "rg-pub")
    _attach(http, "public/rgp-b", "rg-pub")
    topics = ["persistent://public/rgp-a/t", "persistent://public/rgp-b/t", "persistent://public/rgp-out/t"]
    clients = [pulsar.Client(standalone.broker_url, operation_timeout_seconds=30) for _ in topics]
    pumps: list[Pump] = []
    try:
        pumps = [Pump(_producer(c, t)) for c, t in zip(clients, topics, strict=True)]
        a, b, out = group_rates(pumps, "publish", 200, (140, 250), WARMUP_S)
        assert a > 20 and b > 20, (a, b)  # both namespaces get through, sharing it
        # the namespace outside the group is not limited: in the group it would share the 200
        assert out > 300, (out, a + b)
        since = [_connected_since(http, t) for t in topics[:2]]
        _group(http, "rg-pub", publishRateInMsgs=400)
        group_rates(pumps[:2], "publish, updated", 400, (300, 480), 1.0)
        assert [_connected_since(http, t) for t in topics[:2]] == since  # the same connections
        metrics = http.get("/metrics").text
        assert (
            'pulsar_resource_group_calculated_messages_quota{MonitoringClass="Publish",ResourceGroup="rg-pub"} 400.0'
            in metrics
        ), [ln for ln in metrics.splitlines() if "resource_group" in ln]
    finally:
        for p in pumps:
            p.stop()
        for c in clients:
            c.close()
        for ns in ("public/rgp-a", "public/rgp-b"):
            http.delete(f"{V2}/namespaces/{ns}/resourcegroup")


def test_group_dispatch_rate_is_shared_by_its_namespaces(
    http: httpx.Client, standalone: StandaloneProcess
) -> None:
    for ns in ("public/rgd-a", "public/rgd-b", "public/rgd-out"):
        _ns(http, ns)
    _group(http, "rg-disp", dispatchRateInMsgs=200)
    _attach(http, "public/rgd-a", "rg-disp")
    _attach(http, "public/rgd-b", "rg-disp")
    topics = ["persistent://public/rgd-a/t", "persistent://public/rgd-b/t", "persistent://public/rgd-out/t"]
    backlog = 2000
    clients = [pulsar.Client(standalone.broker_url, operation_timeout_seconds=30) for _ in topics]
    drains: list[Drain] = []
    try:
        for t in topics:  # the subscription first, then the backlog (batched: fast to write)
            clients[0].subscribe(t, "s").close()
            p = clients[0].create_producer(
                t, batching_enabled=True, batching_max_messages=10, block_if_queue_full=True
            )
            for i in range(backlog):
                p.send_async(b"m%d" % i, None)
            p.flush()
            p.close()
        drains = [
            Drain(c.subscribe(t, "s", receiver_queue_size=100)) for c, t in zip(clients, topics, strict=True)
        ]
        a, b, out = group_rates(drains, "dispatch", 200, (140, 260), WARMUP_S)
        assert a > 20 and b > 20, (a, b)
        assert drains[2].acked == backlog or out > 2 * (a + b), (drains[2].acked, out)  # not limited
        _group(http, "rg-disp", dispatchRateInMsgs=400)
        group_rates(drains[:2], "dispatch, updated", 400, (300, 500), 1.0)
    finally:
        for d in drains:
            d.stop()
        for c in clients:
            c.close()
        for ns in ("public/rgd-a", "public/rgd-b"):
            http.delete(f"{V2}/namespaces/{ns}/resourcegroup")
