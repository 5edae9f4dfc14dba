"""The admin client's resource groups: Pulsar's paths and verbs, and bodies with only the rates given."""

from __future__ import annotations

import json

import httpx
import pytest

from magnetar.admin_client import PulsarAdmin
from magnetar.common.errors import InvalidArgument
from magnetar.common.rest_models import ResourceGroup


def test_resource_group_calls() -> None:
    seen: list[tuple[str, str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        seen.append((request.method, request.url.path, body))
        if request.method == "GET":
            return httpx.Response(200, json=["a"] if request.url.path.endswith("resourcegroups") else {})
        return httpx.Response(204)

    admin = PulsarAdmin("http://broker:8080", transport=httpx.MockTransport(handler))
    rg = admin.resource_groups
    assert rg.list() == ["a"]
    rg.get("g 1")
    rg.create("g", ResourceGroup(publish_rate_in_msgs=200))
    rg.update("g", {"dispatchRateInBytes": 10})
    rg.delete("g")
    assert seen == [
        ("GET", "/admin/v2/resourcegroups", None),
        ("GET", "/admin/v2/resourcegroups/g 1", None),
        ("PUT", "/admin/v2/resourcegroups/g", {"publishRateInMsgs": 200}),
        ("PUT", "/admin/v2/resourcegroups/g", {"dispatchRateInBytes": 10}),
        ("DELETE", "/admin/v2/resourcegroups/g", None),
    ]


def test_a_rate_below_minus_one_is_refused_before_sending() -> None:
    with pytest.raises(InvalidArgument, match="publish_rate_in_msgs.*greater than or equal to -1"):
        ResourceGroup(publish_rate_in_msgs=-2)
