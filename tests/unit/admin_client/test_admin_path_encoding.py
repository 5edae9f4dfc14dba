"""Property: any topic local name, subscription or role lands in exactly one path segment and decodes back."""

from __future__ import annotations

from urllib.parse import unquote, unquote_plus

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetar.admin_client import PulsarAdmin

names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=40
).filter(lambda s: s.strip() and s not in (".", ".."))


def _recorder() -> tuple[PulsarAdmin, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    return PulsarAdmin("http://b:8080", transport=httpx.MockTransport(handler)), seen


@settings(max_examples=100, deadline=None)
@given(local=names.filter(lambda s: "/" not in s), sub=names, role=names)
def test_names_stay_in_one_segment(local, sub, role):
    admin, seen = _recorder()
    topic = f"persistent://t/ns/{local}"
    admin.topics.delete_subscription(topic, sub)
    admin.topics.revoke_permission(topic, role)
    segs = seen[0].url.raw_path.decode().split("?")[0].split("/")
    # /admin/v2/persistent/t/ns/<local>/subscription/<sub>
    assert len(segs) == 9 and segs[7] == "subscription"
    assert unquote_plus(segs[6]) == local  # local names use Java URLEncoder rules ('+' for space)
    assert unquote(segs[8]) == sub
    segs = seen[1].url.raw_path.decode().split("/")
    assert len(segs) == 9 and unquote(segs[8]) == role
