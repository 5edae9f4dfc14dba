"""`magnetar <cmd>` imports only that subcommand's module (start-up time and idle memory)."""

from __future__ import annotations

import subprocess
import sys


def _modules_after(argv: list[str]) -> set[str]:
    code = (
        "import sys\n"
        "from magnetar.cli.main import build_parser, _chosen\n"
        f"build_parser(_chosen({argv!r}))\n"
        "print('\\n'.join(sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    return set(out.stdout.split())


def test_standalone_does_not_import_the_other_subcommands() -> None:
    mods = _modules_after(["standalone", "--data-dir", "x"])
    assert "magnetar.cli.standalone" in mods
    assert not {"magnetar.cli.admin", "magnetar.cli.client", "magnetar.cli.perf", "rich"} & mods


def test_help_and_unknown_commands_still_list_every_subcommand() -> None:
    mods = _modules_after(["--help"])
    assert {"magnetar.cli.admin", "magnetar.cli.standalone", "magnetar.cli.tokens"} <= mods
    done = subprocess.run(
        [sys.executable, "-m", "magnetar.cli.main", "bogus"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "standalone" in done.stderr and "admin" in done.stderr
