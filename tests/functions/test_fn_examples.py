"""Unchanged pulsar.Function examples deployed with ``magnetar admin functions create`` on a real
standalone; the official client produces the input and reads the output."""

from __future__ import annotations

import httpx
from conftest import EXAMPLES, admin, wait_for, wait_running


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
        "--inputs", src, "--output", dst,
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
    admin(fn_standalone, "functions", "delete", "--fqfn", f"public/default/{name}")
    r = admin(fn_standalone, "functions", "get", "--fqfn", f"public/default/{name}", check=False)
    assert r.returncode == 1 and "404" in r.stderr
