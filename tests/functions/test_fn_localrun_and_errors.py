"""``magnetar functions localrun`` against a real standalone, and clear errors for bad input."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import httpx

from tests.functions.conftest import EXAMPLES, admin


def test_localrun_runs_an_unchanged_function(fn_standalone, client, unique):
    src, dst = f"persistent://public/default/lrin-{unique}", f"persistent://public/default/lrout-{unique}"
    out = client.subscribe(dst, "check")
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "magnetar.cli.main", "functions", "localrun",
            "--broker-service-url", fn_standalone.broker_url, "--py", str(EXAMPLES / "exclamation.py"),
            "--classname", "exclamation.ExclamationFunction", "--inputs", src, "--output", dst,
            "--subs-position", "Earliest",
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert json.loads(proc.stdout.readline())["instances"] == 1
        producer = client.create_producer(src)
        producer.send(b"local")
        assert out.receive(20000).data() == b"local!"
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
    assert code == 0, proc.stderr.read()


def test_bad_function_configs_get_clear_errors(fn_standalone, unique, tmp_path):
    base = f"{fn_standalone.web_url}/admin/v3/functions/public/default/bad-{unique}"
    code = ("f.py", b"def f(x):\n    return x\n")

    def create(config):
        return httpx.post(base, files={"functionConfig": (None, json.dumps(config)), "data": code})

    r = create({"className": "f.f"})
    assert r.status_code == 400 and "inputs" in r.text
    r = create({"className": "f.f", "inputs": ["t"], "processingGuarantees": "TWICE"})
    assert r.status_code == 400 and "processingGuarantees" in r.text
    r = create({"className": "f.f", "inputs": ["t"], "parallelism": 0})
    assert r.status_code == 400 and "parallelism" in r.text
    r = httpx.post(base, files={"functionConfig": (None, "{not json")})
    assert r.status_code == 400
    r = httpx.post(base, files={"functionConfig": (None, json.dumps({"className": "f.f", "inputs": ["t"]}))})
    assert r.status_code == 400 and "code" in r.text
    assert httpx.get(base).status_code == 404
    assert httpx.get(base + "/status").status_code == 404
    # user code that does not load: the function exists, its instance reports the error
    bad = tmp_path / "broken.py"
    bad.write_text("raise RuntimeError('boom at import')\n")
    admin(
        fn_standalone, "functions", "create", "--name", f"broken-{unique}", "--py", str(bad),
        "--classname", "broken.X", "--inputs", f"persistent://public/default/x-{unique}",
        "--custom-runtime-options", '{"runtime": "thread"}',
    )  # fmt: skip
    url = f"{fn_standalone.web_url}/admin/v3/functions/public/default/broken-{unique}/status"

    def error():
        return httpx.get(url).json()["instances"][0]["status"]["error"]

    from tests.functions.conftest import wait_for

    assert "boom at import" in wait_for(error, what="the load error in the status")
    assert httpx.get(url).json()["numRunning"] == 0
