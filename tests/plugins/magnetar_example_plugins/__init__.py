"""Example Magnetar plugins, one of each kind, used by tests/e2e/test_plugins_standalone.py.

Installed into the test venv with ``pip install -e tests/plugins`` (the test
fixture does it when missing; ``.ci/run`` does it up front).
"""
