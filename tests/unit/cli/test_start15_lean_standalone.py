"""``magnetar standalone`` imports only what the standalone needs (issue 15 start-up).

The pattern of ``test_admin_cli_lean_imports.py``: run the command as the process's own
command line and look at ``sys.modules``.  ``standalone --help`` builds only its own
sub-command's parser (``cli.main.build_parser(only=...)``): no other sub-command module,
no FastAPI, pydantic or httpx; ``magnetar --help`` still lists every sub-command.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = (
    "fastapi",
    "pydantic",
    "httpx",
    "magnetar.common.rest_models",
    "magnetar.cli.admin",
    "magnetar.cli.client",
    "magnetar.cli.perf",
    "magnetar.cli.tokens",
    "magnetar.cli.cluster",
    "magnetar.web.app",
)


def _run(argv: list[str]) -> tuple[dict[str, bool], str]:
    code = (
        "import json, sys, io, contextlib\n"
        f"sys.argv = ['magnetar', *{argv!r}]\n"
        "from magnetar.cli.main import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    try:\n"
        "        main()\n"
        "    except SystemExit:\n"
        "        pass\n"
        f"print(json.dumps([{{m: sys.modules.get(m) is not None for m in {HEAVY!r}}}, out.getvalue()]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    loaded, out = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded, out


def test_standalone_help_imports_only_the_standalone_command() -> None:
    loaded, out = _run(["standalone", "--help"])
    assert "--data-dir" in out
    assert not any(loaded.values()), {m for m, v in loaded.items() if v}


def test_the_standalone_start_path_imports_no_web_framework() -> None:
    """What ``magnetar standalone`` imports before its event loop runs (the composition root)."""
    code = (
        "import json, sys\n"
        "import magnetar.cli.standalone, magnetar.app.standalone, magnetar.web.front\n"
        f"print(json.dumps({{m: sys.modules.get(m) is not None for m in {HEAVY!r}}}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert not any(loaded.values()), {m for m, v in loaded.items() if v}


def test_magnetar_help_still_lists_every_command() -> None:
    from magnetar.cli.main import SUBCOMMANDS

    _, out = _run(["--help"])
    for name in SUBCOMMANDS:
        assert name in out
