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


SUB_CONFTEST = """
import pytest
from magnetar.testing.standalone import stop_after_last_user

@pytest.fixture(scope="session")
def shared(request):  # same name as another directory's fixture, another broker
    print("EVENT {d} start")
    stop_after_last_user(request, lambda: print("EVENT {d} stop"))
    yield "{d}"
"""


def test_same_named_fixtures_of_two_directories_each_stop_after_their_own_users(pytester) -> None:  # noqa: ANN001
    """tests/client and tests/compat both define ``standalone``: each stops after its own last
    user (the first run of this kit registered both under one name and failed every compat test),
    so a's broker is stopped before b's starts.  This is also the guard of the pytest internals
    ``stop_after_last_user`` reads (no public API names a test's fixture *definition*): were they
    gone, a's stop would come after b's test (still safe, too late) and this test would fail."""
    for d in ("a", "b"):
        sub = pytester.mkdir(d)
        (sub / "conftest.py").write_text(SUB_CONFTEST.replace("{d}", d))
    (pytester.path / "a" / "test_a.py").write_text("def test_a(shared): assert shared == 'a'\n")
    (pytester.path / "b" / "test_b.py").write_text("def test_b(shared): assert shared == 'b'\n")
    result = pytester.runpytest_inprocess("-s", "-p", "no:cacheprovider", "--import-mode=importlib")
    result.assert_outcomes(passed=2)
    events = [ln.split("EVENT ", 1)[1] for ln in result.stdout.lines if "EVENT " in ln]
    assert events == ["a start", "a stop", "b start", "b stop"], events
