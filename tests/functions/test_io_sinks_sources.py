"""Pulsar IO on a real standalone: the PostgreSQL sink (with a PostgreSQL restart mid-stream),
the file sink and source, the data-generator source, and the connector admin commands."""

from __future__ import annotations

import json
import os
import time

import httpx
import pytest
from conftest import admin, wait_for, wait_running

from magnetar.testing.postgres import PostgresServer, postgres_unavailable_reason


@pytest.fixture
def postgres():
    reason = postgres_unavailable_reason()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL must be installed in CI (.ci/run installs it): {reason}")
        pytest.skip(reason)
    server = PostgresServer().init()
    server.start()
    yield server
    server.close()


def _count(url: str, table: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=3) as conn:
        return conn.execute(f"SELECT count(DISTINCT id) FROM {table}").fetchone()[0]


def test_postgres_sink_survives_a_postgres_restart(fn_standalone, client, unique, postgres):
    import psycopg

    with psycopg.connect(postgres.url, autocommit=True) as conn:
        conn.execute("CREATE TABLE people (id int PRIMARY KEY, name text, age int)")
    name, src = f"pg-{unique}", f"persistent://public/default/people-{unique}"
    config = {"jdbcUrl": f"jdbc:{postgres.url}", "tableName": "people", "key": "id"}
    admin(
        fn_standalone, "sinks", "create", "--name", name, "--archive", "builtin://jdbc-postgres",
        "--inputs", src, "--sink-config", json.dumps(config),
    )  # fmt: skip
    wait_running(fn_standalone, name, family="sinks")
    producer = client.create_producer(src)
    n = 200
    for i in range(n):
        producer.send(json.dumps({"id": i, "name": f"p{i}", "age": i % 90}).encode())
        if i == n // 3:
            producer.flush()
            postgres.stop()  # PostgreSQL goes away mid-stream ...
        if i == n // 2:
            producer.flush()
            time.sleep(2)  # ... the sink fails, retries ...
            postgres.start()  # ... and it comes back on the same port
    producer.flush()
    wait_for(lambda: _count(postgres.url, "people") == n, timeout_s=60, what=f"{n} rows")
    with psycopg.connect(postgres.url, autocommit=True) as conn:
        assert conn.execute("SELECT name, age FROM people WHERE id = 150").fetchone() == ("p150", 60)
    status = httpx.get(f"{fn_standalone.web_url}/admin/v3/sinks/public/default/{name}/status").json()
    assert status["numRunning"] == 1
    # the writes during the outage failed and were retried (redelivered), none lost (count above)
    assert status["instances"][0]["status"]["numUserExceptions"] > 0
    listed = admin(fn_standalone, "sinks", "list").stdout.split()
    assert name in listed
    assert "jdbc-postgres" in admin(fn_standalone, "sinks", "available-sinks").stdout


def test_file_source_to_file_sink(fn_standalone, client, unique, tmp_path):
    topic = f"persistent://public/default/lines-{unique}"
    in_dir, out_file = tmp_path / "in", tmp_path / "out" / "lines.txt"
    in_dir.mkdir()
    admin(
        fn_standalone, "sinks", "create", "--name", f"fsink-{unique}", "--archive", "builtin://file",
        "--inputs", topic, "--sink-config", json.dumps({"outputFile": str(out_file)}),
    )  # fmt: skip
    wait_running(fn_standalone, f"fsink-{unique}", family="sinks")
    admin(
        fn_standalone, "sources", "create", "--name", f"fsrc-{unique}", "--archive", "builtin://file",
        "--destination-topic-name", topic, "--source-config", json.dumps({"inputDirectory": str(in_dir)}),
    )  # fmt: skip
    wait_running(fn_standalone, f"fsrc-{unique}", family="sources")
    time.sleep(1)  # the sink's subscription starts at Latest: let it be in place
    (in_dir / "a.txt").write_text("one\ntwo\nthree\n")
    wait_for(
        lambda: out_file.exists() and out_file.read_text().split() == ["one", "two", "three"], what="lines"
    )
    assert not (in_dir / "a.txt").exists()


def test_data_generator_source(fn_standalone, client, unique):
    topic = f"persistent://public/default/gen-{unique}"
    consumer = client.subscribe(topic, "check")
    admin(
        fn_standalone, "sources", "create", "--name", f"gen-{unique}", "--archive", "builtin://data-generator",
        "--destination-topic-name", topic, "--source-config", '{"sleepBetweenMessages": 5, "maxMessages": 20}',
    )  # fmt: skip
    people = [json.loads(consumer.receive(20000).data()) for _ in range(20)]
    assert [p["id"] for p in people] == list(range(1, 21))
    assert all(18 <= p["age"] <= 90 and "@" in p["email"] for p in people)
    admin(fn_standalone, "sources", "delete", "--name", f"gen-{unique}")
