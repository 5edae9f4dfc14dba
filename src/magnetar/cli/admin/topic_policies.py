"""``magnetar admin topicPolicies`` (alias ``topic-policies``): topic-level policies.

Theory of operation: the same ``set-``/``get-``/``remove-`` commands as the
policy commands of ``topics`` (both come from ``policy_cmds`` at topic level),
in the group ``pulsar-admin`` introduced for them; every command takes
``-g/--global`` and getters take ``-ap/--applied``.
"""

from __future__ import annotations

import argparse

from magnetar.cli.admin.policy_cmds import register_policy_commands


def register(sub: argparse._SubParsersAction) -> None:
    register_policy_commands(sub, "topic", lambda c: c.admin.topic_policies)
