"""``stop_after_last_user``: a session fixture shared by some modules stops right after the last
test that uses it (not at the end of the run), and the run's end still stops it otherwise."""

from __future__ import annotations

pytest_plugins = ["pytester"]

CONFTEST = """
import pytest
from magnetar.testing.standalone import stop_after_last_user

EVENTS = []

@pytest.fixture(scope="session")
def shared(request):
    EVENTS.append("start")
    stop_after_last_user(request, lambda: EVENTS.append("stop"))
    yield "broker"
    EVENTS.append("session end")

@pytest.fixture
def via_shared(shared):  # a user through another fixture counts too
    return shared
"""


def test_stops_after_the_last_selected_user_before_later_modules(pytester) -> None:  # noqa: ANN001
    """test_a2 uses it through another fixture; test_d would use it but is deselected: the stop
    comes right after test_a2, before test_b and test_c run."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_a="def test_a1(shared): pass\ndef test_a2(via_shared): pass\n",
        test_b="from conftest import EVENTS\ndef test_b(): EVENTS.append('b runs')\n",
        test_c="from conftest import EVENTS\ndef test_c(): print('EVENTS', EVENTS)\n",
        test_d="def test_d_late(shared): pass\n",
    )
    result = pytester.runpytest_inprocess("-s", "-p", "no:cacheprovider", "-k", "not late")
    result.assert_outcomes(passed=4, deselected=1)
    assert "EVENTS ['start', 'stop', 'b runs']" in result.stdout.str()
