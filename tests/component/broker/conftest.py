"""Fixtures of the broker component tests.

The harness lives in ``broker_harness`` (a unique module name): test modules import
helpers from it by name, and ``conftest`` is not unique across the test tree.
"""

from broker_harness import broker, raw  # noqa: F401  (pytest fixtures)
