"""The Chromium test kit: finding the browser, and skip vs. fail when it cannot be had."""

from __future__ import annotations

import pytest

from magnetar.testing import chromium


def test_explicit_paths_that_do_not_exist_give_a_reason(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("MAGNETAR_CHROMIUM", str(tmp_path / "no-chromium"))
    monkeypatch.setenv("MAGNETAR_CHROMEDRIVER", str(tmp_path / "no-driver"))
    found = chromium.find_chromium()
    assert isinstance(found, str)
    assert "chromium and chromedriver not found" in found and "chromium-driver" in found


def test_explicit_paths_are_used(monkeypatch, tmp_path) -> None:
    for name in ("chromium", "chromedriver"):
        (tmp_path / name).write_text("#!/bin/sh\n")
    monkeypatch.setenv("MAGNETAR_CHROMIUM", str(tmp_path / "chromium"))
    monkeypatch.setenv("MAGNETAR_CHROMEDRIVER", str(tmp_path / "chromedriver"))
    assert chromium.find_chromium() == (str(tmp_path / "chromium"), str(tmp_path / "chromedriver"))


@pytest.mark.parametrize(("ci", "outcome"), [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_missing_and_not_installable_skips_locally_and_fails_in_ci(
    monkeypatch, tmp_path, ci, outcome
) -> None:
    monkeypatch.setenv("MAGNETAR_CHROMIUM", str(tmp_path / "no-chromium"))
    monkeypatch.setenv("MAGNETAR_CHROMEDRIVER", str(tmp_path / "no-driver"))
    monkeypatch.setattr(chromium, "install_chromium", lambda: "apt-get is not available")
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome) as err:
        chromium.require_chromium()
    assert "installing failed: apt-get is not available" in str(err.value)
