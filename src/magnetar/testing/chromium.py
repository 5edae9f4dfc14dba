"""A real browser for tests: Debian's headless Chromium driven by selenium.

Theory of operation: :func:`find_chromium` looks for the ``chromium`` binary
and its ``chromedriver`` (Debian's ``chromium`` and ``chromium-driver``
packages, or ``MAGNETAR_CHROMIUM`` / ``MAGNETAR_CHROMEDRIVER``).  When they are
missing, :func:`ensure_chromium` installs them with ``apt-get`` (``.ci/run``
does the same up front); when that is impossible too, a test is skipped with
the reason -- or FAILS when ``CI=true``, where a missing browser is a broken
machine, not an optional extra.

:func:`chromium_driver` starts one headless browser with a fresh profile
directory.  Both paths are given to selenium explicitly (``Service`` for the
driver, ``binary_location`` for the browser), so selenium-manager is never
asked to find or download anything; ``SE_OFFLINE`` says the same to it.  The
flags turn off everything that would reach the network on its own
(background networking, component updates, sync).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
DRIVER_CANDIDATES = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")
APT_PACKAGES = ("chromium", "chromium-driver")
APT_TIMEOUT_S = 900
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--no-first-run",
    "--no-default-browser-check",
    "--metrics-recording-only",
)


def _first(env: str, candidates: tuple[str, ...], name: str) -> str | None:
    explicit = os.environ.get(env)
    if explicit:
        return explicit if Path(explicit).is_file() else None
    for path in candidates:
        if Path(path).is_file():
            return path
    return shutil.which(name)


def find_chromium() -> tuple[str, str] | str:
    """(chromium, chromedriver) or the reason they are not there."""
    browser = _first("MAGNETAR_CHROMIUM", CHROMIUM_CANDIDATES, "chromium")
    driver = _first("MAGNETAR_CHROMEDRIVER", DRIVER_CANDIDATES, "chromedriver")
    if browser and driver:
        return browser, driver
    missing = [n for n, p in (("chromium", browser), ("chromedriver", driver)) if not p]
    return f"{' and '.join(missing)} not found (apt-get install {' '.join(APT_PACKAGES)})"


def install_chromium() -> str | None:
    """Install Debian's chromium + chromium-driver; None on success, else why not."""
    if shutil.which("apt-get") is None:
        return "apt-get is not available"
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return "not root: cannot apt-get install"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *APT_PACKAGES],
    ):
        try:
            done = subprocess.run(cmd, env=env, capture_output=True, timeout=APT_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{' '.join(cmd)}: {exc}"
        if done.returncode != 0:
            return f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.decode(errors='replace')[-300:]}"
    return None


def ensure_chromium() -> tuple[str, str] | str:
    """The browser and driver paths, installing them if missing; a reason string if impossible."""
    found = find_chromium()
    if not isinstance(found, str):
        return found
    why = install_chromium()
    if why is not None:
        return f"{found}; installing failed: {why}"
    return find_chromium()


def require_chromium() -> tuple[str, str]:
    """For pytest: the paths, or skip with the reason (FAIL when ``CI=true``)."""
    import pytest

    found = ensure_chromium()
    if isinstance(found, str):
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"headless Chromium is required in CI: {found}")
        pytest.skip(found)
    return found


@contextlib.contextmanager
def chromium_driver(
    browser: str, driver: str, *, window: tuple[int, int] = (1400, 1000), profile_dir: str | None = None
) -> Iterator[Any]:
    """A selenium ``webdriver.Chrome`` on headless Chromium with a fresh profile; quit on exit."""
    os.environ.setdefault("SE_OFFLINE", "true")  # selenium-manager must never download a browser/driver
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    own_dir = profile_dir is None
    profile = profile_dir or tempfile.mkdtemp(prefix="magnetar-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={window[0]},{window[1]}")
    drv = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    try:
        yield drv
    finally:
        drv.quit()
        if own_dir:
            shutil.rmtree(profile, ignore_errors=True)
