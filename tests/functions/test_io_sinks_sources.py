"""Pulsar IO on a real standalone: the PostgreSQL sink (with a PostgreSQL restart mid-stream),
the file sink and source, the data-generator source, and the connector admin commands."""

from __future__ import annotations

import json
import os
import time

import httpx
import pytest

from magnetar.testing.postgres import PostgresServer, postgres_unavailable_reason
from tests.functions.conftest import admin, wait_for, wait_running


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


def test_user_python_sink_archive_and_http_sink(fn_standalone, client, unique, tmp_path):
    import http.server
    import threading

    received: list[bytes] = []
    fail_first = [2]  # the endpoint refuses the first two POSTs: the sink must retry them

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 -- http.server's name
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if fail_first[0] > 0:
                fail_first[0] -= 1
                self.send_response(503)
            else:
                received.append(body)
                self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        hook_topic, own_topic = (
            f"persistent://public/default/hook-{unique}",
            f"persistent://public/default/own-{unique}",
        )
        admin(
            fn_standalone, "sinks", "create", "--name", f"hook-{unique}", "--archive", "builtin://http",
            "--inputs", hook_topic, "--sink-config", json.dumps({"url": f"http://127.0.0.1:{server.server_port}/"}),
        )  # fmt: skip
        # a user's own sink, uploaded as a Python file (no Magnetar import needed: duck-typed)
        out_file = tmp_path / "own.txt"
        own = tmp_path / "upper_sink.py"
        own.write_text(
            "class UpperSink:\n"
            "    def open(self, config, context):\n"
            "        self.f = open(config['path'], 'a')\n"
            "    def write(self, record):\n"
            "        self.f.write(record.value.upper() + '\\n'); self.f.flush()\n"
            "    def close(self):\n"
            "        self.f.close()\n"
        )
        admin(
            fn_standalone, "sinks", "create", "--name", f"own-{unique}", "--archive", str(own),
            "--classname", "upper_sink.UpperSink", "--inputs", own_topic,
            "--sink-config", json.dumps({"path": str(out_file)}),
        )  # fmt: skip
        wait_running(fn_standalone, f"hook-{unique}", family="sinks")
        wait_running(fn_standalone, f"own-{unique}", family="sinks")
        time.sleep(1)
        p1, p2 = client.create_producer(hook_topic), client.create_producer(own_topic)
        for i in range(5):
            p1.send(f"h{i}".encode())
            p2.send(f"o{i}".encode())
        wait_for(lambda: sorted(received) == [f"h{i}".encode() for i in range(5)], what="5 webhook posts")
        wait_for(
            lambda: out_file.exists() and sorted(out_file.read_text().split()) == [f"O{i}" for i in range(5)]
        )
    finally:
        server.shutdown()


def test_postgres_sink_avro_records(fn_standalone, client, unique, postgres):
    """An Avro topic (the official client's AvroSchema): each record's fields are the row's columns."""
    import psycopg
    from pulsar.schema import AvroSchema, Integer, Record, String

    class Person(Record):
        id = Integer()
        name = String()
        age = Integer()

    with psycopg.connect(postgres.url, autocommit=True) as conn:
        conn.execute("CREATE TABLE avro_people (id int PRIMARY KEY, name text, age int)")
    name, src = f"pga-{unique}", f"persistent://public/default/avro-people-{unique}"
    producer = client.create_producer(src, schema=AvroSchema(Person))
    config = {"jdbcUrl": f"jdbc:{postgres.url}", "tableName": "avro_people", "key": "id"}
    admin(
        fn_standalone, "sinks", "create", "--name", name, "--archive", "builtin://jdbc-postgres",
        "--inputs", src, "--sink-config", json.dumps(config), "--subs-position", "Earliest",
    )  # fmt: skip
    wait_running(fn_standalone, name, family="sinks")
    for i in range(50):
        producer.send(Person(id=i, name=f"a{i}", age=20 + i % 7))
    producer.send(Person(id=7, name="seven-again", age=77))  # an upsert on the key
    producer.flush()
    wait_for(lambda: _count(postgres.url, "avro_people") == 50, timeout_s=60, what="50 rows")

    def row7():
        with psycopg.connect(postgres.url, autocommit=True) as conn:
            return conn.execute("SELECT name, age FROM avro_people WHERE id = 7").fetchone()

    wait_for(lambda: row7() == ("seven-again", 77), timeout_s=30, what="the upsert of id 7")
    with psycopg.connect(postgres.url, autocommit=True) as conn:
        assert conn.execute("SELECT name, age FROM avro_people WHERE id = 30").fetchone() == ("a30", 22)
    admin(fn_standalone, "sinks", "delete", "--name", name)
