"""Unchanged pulsar.Function examples deployed with ``magnetar admin functions create`` on a real
standalone; the official client produces the input and reads the output."""

from __future__ import annotations

import httpx

from tests.functions.conftest import EXAMPLES, admin, wait_for, wait_running


def _recv_all(consumer, n: int, timeout_ms: int = 20000) -> list[str]:
    out = []
    for _ in range(n):
        msg = consumer.receive(timeout_ms)
        out.append(msg.data().decode())
        consumer.acknowledge(msg)
    return out


def test_exclamation_function_via_admin_cli(fn_standalone, client, unique):
    name = f"excl-{unique}"
    src, dst = f"persistent://public/default/in-{unique}", f"persistent://public/default/out-{unique}"
    out = client.subscribe(dst, "check")
    r = admin(
        fn_standalone, "functions", "create", "--tenant", "public", "--namespace", "default", "--name", name,
        "--py", str(EXAMPLES / "exclamation.py"), "--classname", "exclamation.ExclamationFunction",
        "--inputs", src, "--output", dst, subprocess=True,  # the entry point as a user runs it
    )  # fmt: skip
    assert "Created successfully" in r.stdout
    wait_running(fn_standalone, name)
    producer = client.create_producer(src)
    for i in range(20):
        producer.send(f"hello-{i}".encode())
    assert sorted(_recv_all(out, 20)) == sorted(f"hello-{i}!" for i in range(20))
    listed = admin(fn_standalone, "functions", "list", "--tenant", "public", "--namespace", "default").stdout
    assert name in listed.split()
    stats = httpx.get(f"{fn_standalone.web_url}/admin/v3/functions/public/default/{name}/stats").json()
    wait_for(
        lambda: (
            httpx.get(f"{fn_standalone.web_url}/admin/v3/functions/public/default/{name}/stats").json()[
                "processedSuccessfullyTotal"
            ]
            >= 20
        ),
        what="stats to count 20",
    )
    assert stats["userExceptionsTotal"] == 0
    # trigger: a value into the input, the function's answer back
    r = admin(fn_standalone, "functions", "trigger", "--name", name, "--trigger-value", "ping")
    assert r.stdout.strip() == "ping!"
    # update: two instances now, same code
    admin(fn_standalone, "functions", "update", "--name", name, "--parallelism", "2")
    wait_running(fn_standalone, name, n=2)
    got = admin(fn_standalone, "-o", "json", "functions", "get", "--name", name).stdout
    assert '"parallelism": 2' in got and "exclamation.ExclamationFunction" in got
    # state put / query through the admin CLI
    admin(
        fn_standalone, "functions", "putstate", "--name", name, "--state", '{"key": "k", "stringValue": "v"}'
    )
    r = admin(fn_standalone, "-o", "json", "functions", "querystate", "--name", name, "-k", "k")
    assert '"stringValue": "v"' in r.stdout
    admin(fn_standalone, "functions", "delete", "--fqfn", f"public/default/{name}")
    r = admin(fn_standalone, "functions", "get", "--fqfn", f"public/default/{name}", check=False)
    assert r.returncode == 1 and "404" in r.stderr


def test_word_count_counters_read_through_admin(fn_standalone, client, unique):
    name = f"wc-{unique}"
    src = f"persistent://public/default/words-{unique}"
    admin(
        fn_standalone, "functions", "create", "--name", name, "--py", str(EXAMPLES / "word_count.py"),
        "--classname", "word_count.WordCountFunction", "--inputs", src,
        "--custom-runtime-options", '{"runtime": "thread"}',
    )  # fmt: skip
    wait_running(fn_standalone, name)
    producer = client.create_producer(src)
    for line in ["the quick brown fox", "the lazy dog", "the end"]:
        producer.send(line.encode())

    def counter(key: str):
        r = httpx.get(f"{fn_standalone.web_url}/admin/v3/functions/public/default/{name}/state/{key}")
        return r.json()["numberValue"] if r.status_code == 200 else None

    wait_for(lambda: counter("the") == 3, what="counter 'the' == 3")
    assert counter("fox") == 1 and counter("dog") == 1 and counter("cat") is None
    r = admin(fn_standalone, "-o", "json", "functions", "querystate", "--name", name, "--key", "the")
    assert '"numberValue": 3' in r.stdout
    status = httpx.get(f"{fn_standalone.web_url}/admin/v3/functions/public/default/{name}/status").json()
    assert status["instances"][0]["status"]["runtime"] == "thread"


def test_routing_function_with_context_publish(fn_standalone, client, unique):
    name = f"route-{unique}"
    src = f"persistent://public/default/items-{unique}"
    fruits, vegs = (
        f"persistent://public/default/fruits-{unique}",
        f"persistent://public/default/vegs-{unique}",
    )
    log_topic = f"persistent://public/default/route-log-{unique}"
    fruit_sub, veg_sub = client.subscribe(fruits, "check"), client.subscribe(vegs, "check")
    log_sub = client.subscribe(log_topic, "check")
    admin(
        fn_standalone, "functions", "create", "--name", name, "--py", str(EXAMPLES / "routing.py"),
        "--classname", "routing.RoutingFunction", "--inputs", src, "--log-topic", log_topic,
        "--user-config", f'{{"fruit-topic": "{fruits}", "vegetable-topic": "{vegs}"}}',
    )  # fmt: skip
    wait_running(fn_standalone, name)
    producer = client.create_producer(src)
    for item in ["apple", "carrot", "rock", "pear", "leek"]:
        producer.send(item.encode())
    assert sorted(_recv_all(fruit_sub, 2)) == ["apple", "pear"]
    assert sorted(_recv_all(veg_sub, 2)) == ["carrot", "leek"]
    assert "rock is neither a fruit nor a vegetable" in _recv_all(log_sub, 1)[0]
