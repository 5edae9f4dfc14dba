"""Running the ``magnetar`` command from tests: in this process, or as a real subprocess.

Theory of operation: ``python -m magnetar.cli.main admin ...`` as a subprocess pays
an interpreter start and the admin client's imports (httpx, the protocol
modules: 1-2 s per command on a loaded 2-core machine), so a test issuing
twenty commands spent most of its time starting Pythons.  :func:`run_magnetar`
calls :func:`magnetar.cli.main.main` with the same argv instead -- the same
argparse tree, the same admin client speaking real HTTP to the real server --
with ``sys.stdout``/``sys.stderr`` captured, and returns a
:class:`subprocess.CompletedProcess` (``returncode``, ``stdout``, ``stderr``),
exactly what the subprocess form returned, so a test reads both alike.  An
argparse error (``SystemExit``) becomes its exit status, an uncaught exception
status 1 with the traceback on stderr (what the interpreter would print).

``subprocess=True`` runs the real ``python -m magnetar.cli.main`` (a test file
keeps one such call: it proves the entry point as a user runs it), and
``MAGNETAR_CLI_SUBPROCESS=1`` in the environment makes every call a
subprocess, for a run that wants the old behaviour throughout.  In-process
calls redirect the interpreter-wide ``sys.stdout``, so they are serialised by a
lock; use them from the test's thread, not from a running event loop (the CLI
runs its own).
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess as _subprocess
import sys
import threading
import traceback
from collections.abc import Mapping

CLI_TIMEOUT_S = 60.0
SUBPROCESS_ENV = "MAGNETAR_CLI_SUBPROCESS"
_lock = threading.Lock()


def run_magnetar(
    *args: str,
    subprocess: bool = False,
    timeout_s: float = CLI_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
) -> _subprocess.CompletedProcess[str]:
    """``magnetar <args>``: its exit status and output, in-process unless ``subprocess``.

    ``env`` (subprocess only) replaces the child's environment, as ``subprocess.run`` does."""
    argv = [str(a) for a in args]
    if subprocess or env is not None or os.environ.get(SUBPROCESS_ENV):
        cmd = [sys.executable, "-m", "magnetar.cli.main", *argv]
        return _subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout_s, env=dict(env) if env else None
        )
    from magnetar.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with _lock, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's usage errors, or a command exiting early
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if isinstance(exc.code, str):
                print(exc.code, file=sys.stderr)
        except Exception:  # noqa: BLE001 -- as the interpreter would: traceback, status 1
            traceback.print_exc()
            code = 1
    return _subprocess.CompletedProcess(["magnetar", *argv], code, out.getvalue(), err.getvalue())


def run_admin(
    web_url: str, *args: str, check: bool = True, subprocess: bool = False, timeout_s: float = CLI_TIMEOUT_S
) -> _subprocess.CompletedProcess[str]:
    """``magnetar admin --admin-url <web_url> <args>``; with ``check`` a non-zero status fails
    the test with the command and its output."""
    done = run_magnetar("admin", "--admin-url", web_url, *args, subprocess=subprocess, timeout_s=timeout_s)
    if check and done.returncode != 0:
        raise AssertionError(
            f"magnetar admin {' '.join(args)} failed ({done.returncode}): {done.stdout} {done.stderr}"
        )
    return done
