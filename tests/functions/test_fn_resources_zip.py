"""Resources (ram enforced in the process runtime, refused in the thread runtime), key-ordered
processing (retainKeyOrdering -> Key_Shared) and .zip archives of a function with its dependencies."""

from __future__ import annotations

import zipfile

import httpx

from tests.functions.conftest import EXAMPLES, admin, wait_for, wait_running

HOG = """
HOLD = []


def hog(value):
    HOLD.append(b"x" * (400 * 1024 * 1024))  # resident: written, not calloc'ed
    return None
"""


def _status(sa, name):
    return httpx.get(f"{sa.web_url}/admin/v3/functions/public/default/{name}/status", timeout=10).json()


def test_ram_enforced_in_process_runtime_refused_in_thread(fn_standalone, client, unique, tmp_path):
    code = tmp_path / "hog.py"
    code.write_text(HOG)
    name, src = f"hog-{unique}", f"persistent://public/default/hog-{unique}"
    ram = str(256 * 1024 * 1024)
    r = admin(
        fn_standalone, "functions", "create", "--name", f"{name}-t", "--py", str(code), "--classname", "hog.hog",
        "--inputs", src, "--ram", ram, "--custom-runtime-options", '{"runtime": "thread"}', check=False,
    )  # fmt: skip
    assert r.returncode == 1 and "resources.ram cannot be enforced in the thread runtime" in r.stderr
    r = admin(fn_standalone, "functions", "create", "--name", name, "--py", str(code), "--classname",
              "hog.hog", "--inputs", src, "--ram", "1000", check=False)  # fmt: skip
    assert r.returncode == 1 and "resources.ram" in r.stderr
    admin(
        fn_standalone, "functions", "create", "--name", name, "--py", str(code), "--classname", "hog.hog",
        "--inputs", src, "--ram", ram, "--cpu", "0.5", "--custom-runtime-options", '{"runtime": "process"}',
    )  # fmt: skip
    wait_running(fn_standalone, name)
    got = admin(fn_standalone, "-o", "json", "functions", "get", "--name", name).stdout
    assert f'"ram": {ram}' in got and '"cpu": 0.5' in got
    client.create_producer(src).send(b"eat")

    def killed():
        s = _status(fn_standalone, name)["instances"][0]["status"]
        return s if "exceeded resources.ram" in s["error"] and s["numRestarts"] >= 1 else None

    wait_for(killed, 30, "the instance killed for its ram")
    admin(fn_standalone, "functions", "delete", "--name", name)


def test_retain_key_ordering_uses_key_shared(fn_standalone, client, unique):
    name = f"ko-{unique}"
    src, dst = f"persistent://public/default/koin-{unique}", f"persistent://public/default/koout-{unique}"
    out = client.subscribe(dst, "check")
    admin(
        fn_standalone, "functions", "create", "--name", name, "--py", str(EXAMPLES / "exclamation.py"),
        "--classname", "exclamation.ExclamationFunction", "--inputs", src, "--output", dst,
        "--retain-key-ordering", "--parallelism", "2", "--custom-runtime-options", '{"runtime": "thread"}',
    )  # fmt: skip
    wait_running(fn_standalone, name, n=2)
    stats = httpx.get(
        f"{fn_standalone.web_url}/admin/v2/persistent/public/default/koin-{unique}/stats"
    ).json()
    sub = stats["subscriptions"][f"public/default/{name}"]
    assert sub["type"] == "Key_Shared"
    producer = client.create_producer(src, batching_enabled=False)
    for i in range(60):
        producer.send(f"v{i}".encode(), partition_key=f"k{i % 4}")  # text: IdentitySerDe keeps a str
    per_key: dict[str, list[int]] = {}
    for _ in range(60):
        msg = out.receive(20000)
        per_key.setdefault(msg.partition_key(), []).append(int(msg.data().decode().strip("v!")))
        out.acknowledge(msg)
    assert sorted(per_key) == ["k0", "k1", "k2", "k3"]
    for key, seq in per_key.items():
        assert seq == sorted(seq), f"{key} out of order: {seq}"
    r = admin(fn_standalone, "functions", "create", "--name", f"{name}-x", "--py", str(EXAMPLES / "exclamation.py"),
              "--classname", "exclamation.ExclamationFunction", "--inputs", src,
              "--retain-key-ordering", "--retain-ordering", check=False)  # fmt: skip
    assert r.returncode == 1 and "cannot both be set" in r.stderr
    admin(fn_standalone, "functions", "delete", "--name", name)


def test_zip_archive_with_dependency(fn_standalone, client, unique, tmp_path):
    archive = tmp_path / "shouter.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(
            "shouter/src/shouter_fn.py",
            "from pulsar import Function\nfrom shoutlib import shout\n\n\n"
            "class Shouter(Function):\n    def process(self, input, context):\n        return shout(input)\n",
        )
        zf.writestr("shouter/deps/shoutlib/__init__.py", "def shout(s):\n    return s.upper() + '!!'\n")
    name = f"zip-{unique}"
    src, dst = f"persistent://public/default/zin-{unique}", f"persistent://public/default/zout-{unique}"
    out = client.subscribe(dst, "check")
    admin(
        fn_standalone, "functions", "create", "--name", name, "--py", str(archive),
        "--classname", "shouter_fn.Shouter", "--inputs", src, "--output", dst,
    )  # fmt: skip
    wait_running(fn_standalone, name)
    producer = client.create_producer(src)
    for word in ("hey", "you"):
        producer.send(word.encode())
    assert sorted(out.receive(20000).data().decode() for _ in range(2)) == ["HEY!!", "YOU!!"]
    bad = tmp_path / "evil.zip"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("../escape.py", "x = 1\n")
    r = admin(fn_standalone, "functions", "create", "--name", f"{name}-bad", "--py", str(bad),
              "--classname", "escape.x", "--inputs", src, check=False)  # fmt: skip
    assert r.returncode == 1 and "unsafe path" in r.stderr
    admin(fn_standalone, "functions", "delete", "--name", name)
