"""Tiered storage end to end: a real ``magnetar standalone`` subprocess, the official client,
the filesystem driver and the aws-s3 driver against a real S3 API server (moto, server mode).

Each scenario produces tens of MB over several ledgers, offloads them (``magnetar admin topics
offload --size-threshold 0`` or ``PUT .../offload``), waits for the deletion lag, checks the
bookies no longer hold those ledgers (no BookKeeper metadata; the bookie's disk usage falls
once its GC runs), then reads everything back from the tier: a new subscription from earliest
and a reader seeking into the middle get every message in order with the original ids.  The
kill -9 scenario kills the standalone in the middle of an offload and restarts it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from magnetar.testing.moto_s3 import MotoS3Server
from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason

pulsar = pytest.importorskip("pulsar")
pytestmark = pytest.mark.skipif(broker_unavailable_reason() is not None, reason="no broker")

MESSAGE = 16 * 1024
TOPIC = "persistent://public/default/tiered"
CONFIG = """
managedLedgerMaxEntriesPerLedger={per_ledger}
managedLedgerMinLedgerRolloverTimeMinutes=0
defaultRetentionTimeInMinutes=-1
defaultRetentionSizeInMB=-1
brokerDeleteInactiveTopicsEnabled=false
retentionCheckIntervalInSeconds=1
managedLedgerOffloadDeletionLagMs=1000
managedLedgerOffloadMaxBlockSizeInBytes=5242880
managedLedgerOffloadReadBufferSizeInBytes=1048576
gcWaitTime=1000
flushInterval=1000
minorCompactionInterval=1
majorCompactionInterval=1
logSizeLimit=2097152
journalMaxSizeMB=2
journalPreAllocSizeMB=1
"""


def du(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


def rest(url: str, method: str = "GET", body: object | None = None) -> object:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        raw = r.read()
    return json.loads(raw) if raw else None


def http_error(url: str, method: str, body: object | None = None) -> int:
    try:
        rest(url, method, body)
    except urllib.error.HTTPError as e:
        return e.code
    return 200


def topic_url(sp: StandaloneProcess, suffix: str) -> str:
    return f"{sp.web_url}/admin/v2/persistent/public/default/tiered/{suffix}"


def cli(sp: StandaloneProcess, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "magnetar.cli.main", "admin", "--admin-url", sp.web_url, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def payload(i: int) -> bytes:
    head = b"%08d" % i
    return head + bytes([i % 251]) * (MESSAGE - len(head))


def produce(sp: StandaloneProcess, count: int) -> list:
    client = pulsar.Client(sp.broker_url, operation_timeout_seconds=60)
    try:
        producer = client.create_producer(
            TOPIC, batching_enabled=False, max_pending_messages=500, block_if_queue_full=True
        )
        ids: list = [None] * count
        errors: list = []

        def done(i: int):  # noqa: ANN202
            def cb(res, mid) -> None:  # noqa: ANN001
                if res != pulsar.Result.Ok:
                    errors.append(res)
                ids[i] = mid

            return cb

        for i in range(count):
            producer.send_async(payload(i), done(i))
        producer.flush()
        producer.close()
        assert not errors
        return [(m.ledger_id(), m.entry_id()) for m in ids]
    finally:
        client.close()


def read_back(sp: StandaloneProcess, ids: list, subscription: str) -> None:
    """A new subscription from earliest and a reader seeking into the middle see every
    message in order with the original ids."""
    client = pulsar.Client(sp.broker_url, operation_timeout_seconds=60)
    try:
        consumer = client.subscribe(
            TOPIC, subscription, initial_position=pulsar.InitialPosition.Earliest, receiver_queue_size=200
        )
        for i, want in enumerate(ids):
            msg = consumer.receive(30_000)
            got = (msg.message_id().ledger_id(), msg.message_id().entry_id())
            assert got == want, f"message {i}: id {got}, produced as {want}"
            assert msg.data() == payload(i), f"message {i}: wrong bytes"
            consumer.acknowledge(msg)
        consumer.close()
        middle = len(ids) // 2
        start = pulsar.MessageId(-1, ids[middle][0], ids[middle][1], -1)
        reader = client.create_reader(TOPIC, start, start_message_id_inclusive=True)
        for i in range(middle, len(ids)):
            msg = reader.read_next(30_000)
            assert (msg.message_id().ledger_id(), msg.message_id().entry_id()) == ids[i]
            assert msg.data() == payload(i)
        reader.close()
    finally:
        client.close()


def internal_stats(sp: StandaloneProcess, metadata: bool = False) -> dict:
    return rest(topic_url(sp, "internalStats" + ("?metadata=true" if metadata else "")))  # type: ignore[return-value]


def wait_until(pred, timeout_s: float, what: str):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def closed_ledgers(stats: dict) -> list[dict]:
    return [ledger for ledger in stats["ledgers"][:-1] if ledger["entries"] > 0]


def bookies_let_go(sp: StandaloneProcess) -> list[dict] | None:
    ledgers = closed_ledgers(internal_stats(sp))
    ok = all(x["offloaded"] and x.get("offloadContext", {}).get("bookkeeperDeleted") for x in ledgers)
    return ledgers if ok else None


def scenario(
    tmp_path: Path, props: dict[str, str], count: int, per_ledger: int
) -> tuple[StandaloneProcess, list]:
    conf = tmp_path / "standalone.conf"
    conf.write_text(CONFIG.format(per_ledger=per_ledger) + "".join(f"{k}={v}\n" for k, v in props.items()))
    sp = StandaloneProcess(tmp_path / "data", config_file=conf)
    sp.start()
    ids = produce(sp, count)
    return sp, ids


def offload_and_check(sp: StandaloneProcess, ids: list) -> list[dict]:
    bookie_dir = sp.data_dir / "bookie"
    before = du(bookie_dir)
    stats = internal_stats(sp)
    n_closed = len(closed_ledgers(stats))
    assert n_closed >= 3, stats["ledgers"]
    out = cli(sp, "topics", "offload", TOPIC, "--size-threshold", "0")
    assert out.returncode == 0 and "Offload triggered" in out.stdout, out.stderr
    out = cli(sp, "topics", "offload-status", TOPIC, "-w", "--wait-timeout", "300")
    assert out.returncode == 0 and "Offload was a success" in out.stdout, (out.stdout, out.stderr)
    ledgers = wait_until(lambda: bookies_let_go(sp), 60, "the deletion lag to delete BookKeeper copies")
    assert len(ledgers) >= n_closed
    with_md = internal_stats(sp, metadata=True)["ledgers"]
    gone = {x["ledgerId"] for x in ledgers}
    assert not [x for x in with_md if x["ledgerId"] in gone and "metadata" in x]  # no BK metadata left
    offloaded_bytes = sum(x["size"] for x in ledgers)
    stats = rest(topic_url(sp, "stats"))
    assert stats["offloadedStorageSize"] == offloaded_bytes and stats["lastOffloadSuccessTimeStamp"] > 0
    # The standalone's bookie garbage-collects the deleted ledgers: its disk usage falls.
    after = wait_until(
        lambda: (s := du(bookie_dir)) < before - offloaded_bytes // 2 and s,
        60,
        "bookie disk usage to fall",
    )
    assert after < before - offloaded_bytes // 2
    return ledgers


def test_filesystem_offload_standalone(tmp_path: Path) -> None:
    tier = tmp_path / "tier"
    sp, ids = scenario(
        tmp_path,
        {"managedLedgerOffloadDriver": "filesystem", "fileSystemURI": f"file://{tier}"},
        count=1600,
        per_ledger=300,
    )
    try:
        ledgers = offload_and_check(sp, ids)
        assert len(list(tier.iterdir())) == 2 * len(ledgers)
        read_back(sp, ids, "from-tier")
        # Compaction reads the whole topic, offloaded ledgers included, from the tier.
        rest(topic_url(sp, "compaction"), "PUT")
        st = wait_until(
            lambda: (s := rest(topic_url(sp, "compaction")))["status"] in ("SUCCESS", "ERROR") and s,
            120,
            "compaction",
        )
        assert st["status"] == "SUCCESS", st
        # Restart: the offload contexts are in the ledger list; reads still come from the tier.
        sp.terminate()
        sp.restart()
        read_back(sp, ids, "after-restart")
        # Deleting the topic deletes the offloaded objects too.
        rest(f"{sp.web_url}/admin/v2/persistent/public/default/tiered?force=true", "DELETE")
        wait_until(lambda: not list(tier.iterdir()), 30, "offloaded objects to be deleted")
    finally:
        sp.terminate()


def test_s3_offload_standalone_against_moto(tmp_path: Path) -> None:
    with MotoS3Server("tiered-it", log_path=tmp_path / "moto.log") as m:
        sp, ids = scenario(tmp_path, m.properties(), count=1600, per_ledger=300)
        try:
            ledgers = offload_and_check(sp, ids)
            assert len(m.object_keys()) == 2 * len(ledgers)
            read_back(sp, ids, "from-s3")
            rest(f"{sp.web_url}/admin/v2/persistent/public/default/tiered?force=true", "DELETE")
            wait_until(lambda: not m.object_keys(), 30, "offloaded objects to be deleted")
        finally:
            sp.terminate()


def test_wrong_credentials_are_a_clear_offload_status_error(tmp_path: Path) -> None:
    with MotoS3Server("tiered-auth", auth=True) as m:
        props = {**m.properties(), "s3ManagedLedgerOffloadCredentialSecret": "wrong-secret"}
        sp, ids = scenario(tmp_path, props, count=60, per_ledger=20)
        try:
            first = internal_stats(sp)["ledgers"][-1]["ledgerId"]
            assert http_error(topic_url(sp, "offload"), "PUT", {}) == 400  # messageId is null
            np_url = f"{sp.web_url}/admin/v2/non-persistent/public/default/np/offload"
            assert http_error(np_url, "PUT", {"ledgerId": 1, "entryId": 0}) == 405
            rest(topic_url(sp, "offload"), "PUT", {"ledgerId": first, "entryId": 0})
            st = wait_until(
                lambda: (s := rest(topic_url(sp, "offload")))["status"] == "ERROR" and s, 120, "ERROR"
            )
            assert "access denied" in st["lastError"] or "Signature" in st["lastError"], st
            out = cli(sp, "topics", "offload-status", TOPIC)
            assert out.returncode == 1 and "Error in offload" in out.stdout
            assert not any(x["offloaded"] for x in internal_stats(sp)["ledgers"])
            read_back(sp, ids, "still-on-bookies")  # nothing was deleted from the bookies
        finally:
            sp.terminate()


def test_kill9_during_offload_loses_nothing_and_offload_completes(tmp_path: Path) -> None:
    with MotoS3Server("tiered-kill", log_path=tmp_path / "moto.log") as m:
        sp, ids = scenario(tmp_path, m.properties(), count=1600, per_ledger=100)
        try:
            stats = internal_stats(sp)
            n_closed = len(closed_ledgers(stats))
            rest(
                topic_url(sp, "offload"), "PUT", {"ledgerId": stats["ledgers"][-1]["ledgerId"], "entryId": 0}
            )

            def mid_offload() -> bool:
                ls = closed_ledgers(internal_stats(sp))
                return 1 <= sum(x["offloaded"] for x in ls) < len(ls)

            wait_until(mid_offload, 120, "the offload to be half done")
            sp.kill()
            sp.restart()
            ls = closed_ledgers(internal_stats(sp))
            done = sum(x["offloaded"] for x in ls)
            assert 1 <= done < n_closed, ls  # the kill did land in the middle
            read_back(sp, ids, "after-kill")  # nothing lost: tier and bookies together
            status = rest(topic_url(sp, "offload"))
            assert status["status"] == "NOT_RUN"
            rest(topic_url(sp, "offload"), "PUT", {"ledgerId": ls[-1]["ledgerId"] + 1, "entryId": 0})
            wait_until(
                lambda: rest(topic_url(sp, "offload"))["status"] == "SUCCESS", 300, "the retried offload"
            )
            ledgers = wait_until(lambda: bookies_let_go(sp), 60, "BookKeeper copies to go")
            # Every ledger closed when the retry was asked for: the restart's recovery may close the
            # ledger that was current at the kill (a full one can still be open), so count after it.
            assert len(ledgers) == len(ls) >= n_closed
            # The interrupted attempt's objects were cleaned up: exactly two objects a ledger.
            uids = {x["offloadContext"]["uuid"] for x in ledgers}
            keys = m.object_keys()
            assert len(keys) == 2 * len(ls) and {k.split("-ledger-")[0] for k in keys} == uids
            read_back(sp, ids, "after-retry")
        finally:
            sp.terminate()


@pytest.mark.slow
@pytest.mark.parametrize("driver", ["filesystem", "aws-s3"])
def test_offload_200mb_standalone(tmp_path: Path, driver: str) -> None:
    count = 200 * 1024 * 1024 // MESSAGE
    with MotoS3Server("tiered-big", log_path=tmp_path / "moto.log") as m:
        props = (
            m.properties()
            if driver == "aws-s3"
            else {"managedLedgerOffloadDriver": "filesystem", "fileSystemURI": f"file://{tmp_path / 'tier'}"}
        )
        sp, ids = scenario(tmp_path, props, count=count, per_ledger=2000)
        try:
            offload_and_check(sp, ids)
            read_back(sp, ids, "big")
        finally:
            sp.terminate()


def test_namespace_offload_policies_offload_automatically(tmp_path: Path) -> None:
    """No driver in the broker's config: the namespace's offload-policies (set with the CLI)
    choose aws-s3, a 0 threshold and a 1 s deletion lag; ledgers offload as they roll over."""
    with MotoS3Server("tiered-ns", log_path=tmp_path / "moto.log") as m:
        conf = tmp_path / "standalone.conf"
        conf.write_text(CONFIG.format(per_ledger=100) + "magnetarPolicyCheckIntervalMs=200\n")
        sp = StandaloneProcess(tmp_path / "data", config_file=conf)
        sp.start()
        try:
            rest(f"{sp.web_url}/admin/v2/persistent/public/default/tiered", "PUT")
            # No driver anywhere yet: a clear 412, not a silent no-op.
            assert http_error(topic_url(sp, "offload"), "PUT", {"ledgerId": 0, "entryId": 0}) == 412
            out = cli(
                sp, "namespaces", "set-offload-policies", "public/default", "-d", "aws-s3", "-b", m.bucket,
                "-e", m.endpoint, "-r", m.region, "-i", m.access_key, "-s", m.secret_key,
                "-t", "0", "-dl", "1s", "-mbs", "5M", "-rbs", "256K",
            )  # fmt: skip
            assert out.returncode == 0, out.stderr
            got = cli(sp, "namespaces", "get-offload-policies", "public/default")
            assert "aws-s3" in got.stdout
            ids = produce(sp, 450)
            ledgers = wait_until(
                lambda: (ls := bookies_let_go(sp)) and len(ls) >= 4 and ls, 120, "automatic offload"
            )
            assert len(m.object_keys()) == 2 * len(ledgers)
            read_back(sp, ids, "auto")
        finally:
            sp.terminate()
