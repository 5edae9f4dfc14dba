"""magnetar.testing.cli: the in-process ``magnetar`` answers as the subprocess does."""

from __future__ import annotations

import socket

from magnetar.testing.cli import run_admin, run_magnetar


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_usage_error_matches_the_subprocess_and_help_is_status_0():
    args = ("admin", "tenants", "no-such-command")
    inproc, child = run_magnetar(*args), run_magnetar(*args, subprocess=True)
    assert inproc.returncode == child.returncode == 2, (inproc, child)
    assert inproc.stdout == child.stdout
    assert inproc.stderr.strip() == child.stderr.strip() != ""
    usage = run_magnetar("admin", "--help")
    assert usage.returncode == 0 and "usage: magnetar admin" in usage.stdout


def test_connection_error_is_status_1_and_check_raises():
    url = f"http://127.0.0.1:{_closed_port()}"
    done = run_admin(url, "--request-timeout", "2", "tenants", "list", check=False)
    assert done.returncode == 1 and "Error connecting to" in done.stderr, done
    try:
        run_admin(url, "--request-timeout", "2", "tenants", "list")
    except AssertionError as exc:
        assert "tenants list failed (1)" in str(exc)
    else:
        raise AssertionError("check=True did not raise on a failed command")
