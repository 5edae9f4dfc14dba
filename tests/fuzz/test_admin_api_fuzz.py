"""Property-based fuzz of the admin REST API over its own OpenAPI document.

Hypothesis draws an operation from ``/openapi.json`` (every path and method
the server declares), fills its path parameters with hostile names (unicode,
dots, percent signs, very long, empty-looking), adds random query parameters
and a random body (valid-looking JSON of any shape, or raw bytes), and sends
it to a real standalone subprocess.  The property: no 5xx answer, every error
body is ``{"reason": ...}``, and the server is still healthy afterwards.
The default run is bounded (``max_examples``) to stay well under a minute.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from magnetar.testing.standalone import StandaloneProcess, broker_unavailable_reason

MAX_EXAMPLES = 400
PARAM = re.compile(r"\{(\w+)\}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("fuzz")
    conf = tmp / "standalone.conf"
    conf.write_text("forceDeleteNamespaceAllowed=true\nbrokerDeleteInactiveTopicsEnabled=false\n")
    proc = StandaloneProcess(tmp / "data", config_file=conf)
    proc.start()
    try:
        yield proc
    finally:
        proc.terminate()


@pytest.fixture(scope="module")
def http(server: StandaloneProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.web_url, timeout=30) as c:
        yield c


@pytest.fixture(scope="module")
def operations(http: httpx.Client) -> list[tuple[str, str]]:
    doc = http.get("/openapi.json").json()
    ops = []
    for path, item in doc["paths"].items():
        for method in item:
            if method.upper() in ("GET", "PUT", "POST", "DELETE"):
                if path == "/admin/v2/brokers/health":  # a full produce/read round trip per call: slow
                    continue
                ops.append((method.upper(), path))
    return sorted(ops)


names = st.one_of(
    st.sampled_from(
        ["public", "default", "standalone", "pulsar", "system", "t", "x-partition-0", "0x00000000_0x40000000"]
    ),
    st.text(min_size=1, max_size=20),
    st.text(alphabet="%./:=-_ \\\x00\u00e9\u4e2d", min_size=1, max_size=10),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.just("a" * 300),
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=10,
)
bodies = st.one_of(
    st.none(),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=64),
)
queries = st.dictionaries(
    st.sampled_from(
        [
            "force",
            "applied",
            "authoritative",
            "mode",
            "perPartition",
            "messageTTL",
            "backlogQuotaType",
            "initialPosition",
            "messagePosition",
            "checkAllowAutoCreation",
        ]
    ),
    st.one_of(st.text(max_size=8), st.sampled_from(["true", "false", "1", "-1", "ALL", "latest"])),
    max_size=3,
)


# Pulsar answers 503 (with a reason) for a feature this broker does not run; not a server error.
DISABLED_FEATURE_REASONS = (
    "not configured with transactionCoordinatorEnabled=true",
    "Function worker service is not enabled",
)


@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_no_server_errors(http: httpx.Client, operations: list[tuple[str, str]], data: st.DataObject) -> None:
    method, template = data.draw(st.sampled_from(operations))
    params = PARAM.findall(template)
    path = template
    for p in params:
        value = data.draw(names, label=p)
        path = path.replace("{" + p + "}", quote(value, safe=""), 1)
    body = data.draw(bodies, label="body")
    query = data.draw(queries, label="query")
    headers = {"content-type": "application/json"} if body is not None else {}
    r = http.request(method, path, content=body, params=query, headers=headers)
    disabled = r.status_code == 503 and any(why in r.text for why in DISABLED_FEATURE_REASONS)
    assert r.status_code < 500 or disabled, (method, path, query, body, r.status_code, r.text[:300])
    if r.status_code >= 400:
        assert r.headers.get("content-type", "").startswith("application/json"), (method, path, r.text[:200])
        assert "reason" in r.json(), (method, path, r.text[:200])


def test_still_healthy_after_fuzz(http: httpx.Client) -> None:
    assert http.get("/admin/v2/brokers/health").text == "ok"
    assert "public" in http.get("/admin/v2/tenants").json()
