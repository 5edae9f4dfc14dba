"""``magnetar admin`` starts without what it does not use (the start-up figures are in the
house5 report: ~0.75 s -> ~0.3 s of CPU for ``admin --help``).

* pydantic and the REST bodies are imported only when a command builds or reads a body
  (``admin_client.models`` resolves its names on first use);
* httpx's own command-line client (click, rich) and the trio runtime httpcore probes for
  are kept out of a process that *is* the command (``cli.main.NEVER_IMPORTED``), not out
  of an in-process caller of ``main(argv)``.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("pydantic", "magnetar.common.rest_models", "click", "rich", "trio")


def _loaded_after(argv: list[str]) -> dict[str, bool]:
    """Run ``magnetar <argv>`` as the process's own command line; which HEAVY modules loaded."""
    code = (
        "import json, sys\n"
        f"sys.argv = ['magnetar', *{argv!r}]\n"
        "from magnetar.cli.main import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(json.dumps({{m: sys.modules.get(m) is not None for m in {HEAVY!r}}}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_admin_help_and_a_getter_import_no_body_library() -> None:
    assert not any(_loaded_after(["admin", "--help"]).values())
    # a getter that makes an HTTP client and calls (nothing listens there: a connection error)
    loaded = _loaded_after(["admin", "--admin-url", "http://127.0.0.1:9", "tenants", "list"])
    assert not any(loaded.values()), loaded


def test_a_command_that_builds_a_body_imports_the_bodies_then() -> None:
    loaded = _loaded_after(
        ["admin", "--admin-url", "http://127.0.0.1:9", "tenants", "create", "t1", "--allowed-clusters", "c"]
    )
    assert loaded["pydantic"] and loaded["magnetar.common.rest_models"]
    assert not loaded["click"] and not loaded["trio"]


def test_the_client_package_still_names_every_body() -> None:
    import magnetar.admin_client as pkg
    from magnetar.common import rest_models

    assert pkg.TenantInfo is rest_models.TenantInfo
    assert "RetentionPolicies" in pkg.__all__ and pkg.RetentionPolicies is rest_models.RetentionPolicies
