"""Bookie isolation groups: placing a ledger on the bookies of chosen groups.

Theory of operation: as in Pulsar, operators put bookies into *groups* (``pulsar-admin
bookies set-bookie-rack --group``), kept as one JSON document at ``BOOKIE_GROUPS_PATH``
(Pulsar's ``BookiesRackConfiguration``: ``{group: {bookie id: {"rack": .., "hostname":
..}}}``).  A namespace's ``bookieAffinityGroup`` policy names a primary and a secondary
group list; the broker hands it to ledger creation in the ledger's custom metadata
(``PLACEMENT_CONFIG_KEY``, a JSON document in the shape of Pulsar's
``EnsemblePlacementPolicyConfig``: the policy class and its properties
``isolationBookieGroups`` / ``secondaryIsolationBookieGroups``), and the ledger client
excludes, as Pulsar's ``IsolatedBookieEnsemblePlacementPolicy`` does:

* the bookies of every group that is not a primary group;
* unless the primary groups hold fewer available bookies than the ensemble needs, in
  which case the secondary groups' bookies are allowed too.

Bookies in no group at all are not excluded (Pulsar's rule).  When what is left cannot
make the ensemble, ledger creation fails with NotEnoughBookies -- the topic refuses
producers with that cause, as for any unsatisfiable persistence setting.  The same
exclusions hold when a bookie of the ledger is replaced (the writer's ensemble change,
auto-recovery's re-replication): :func:`isolation_exclusions` reads them from the
ledger's own custom metadata, so a namespace's ledgers never leave its groups.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

BOOKIE_GROUPS_PATH = "/bookies"
PLACEMENT_CONFIG_KEY = "EnsemblePlacementPolicyConfig"
ISOLATED_POLICY_CLASS = "org.apache.pulsar.bookie.rackawareness.IsolatedBookieEnsemblePlacementPolicy"


def placement_config(primary: Sequence[str], secondary: Sequence[str]) -> bytes:
    """The custom-metadata value that asks for placement on these bookie groups."""
    props = {
        "isolationBookieGroups": ",".join(primary),
        "secondaryIsolationBookieGroups": ",".join(secondary),
    }
    return json.dumps({"policyClass": ISOLATED_POLICY_CLASS, "properties": props}, sort_keys=True).encode()


def groups_of(config: bytes) -> tuple[list[str], list[str]] | None:
    """(primary, secondary) groups from a ``placement_config`` value; None if it asks none."""
    try:
        doc = json.loads(config)
        props = doc.get("properties") or {}
    except (ValueError, AttributeError):
        return None

    def split(key: str) -> list[str]:
        return [g.strip() for g in str(props.get(key) or "").split(",") if g.strip()]

    primary, secondary = split("isolationBookieGroups"), split("secondaryIsolationBookieGroups")
    return (primary, secondary) if primary or secondary else None


def parse_groups_document(raw: bytes | None) -> dict[str, dict[str, Any]]:
    if not raw:
        return {}
    try:
        doc = json.loads(raw)
    except ValueError:
        return {}
    return (
        {g: dict(members) for g, members in doc.items() if isinstance(members, dict)}
        if isinstance(doc, dict)
        else {}
    )


def excluded_bookies(
    groups: Mapping[str, Mapping[str, Any]],
    primary: Sequence[str],
    secondary: Sequence[str],
    available: Sequence[str],
    ensemble_size: int,
) -> set[str]:
    """The bookies a ledger isolated on ``primary`` (then ``secondary``) groups may not use."""
    excluded: set[str] = set()
    in_primary: set[str] = set()
    for group, members in groups.items():
        if group in primary:
            in_primary.update(members)
        else:
            excluded.update(members)
    excluded -= in_primary  # a bookie in a primary group stays, whatever else it is in
    if len(in_primary & set(available)) < ensemble_size:
        for group in secondary:
            excluded -= set(groups.get(group, {}))
    return excluded


class _GroupsSource(Protocol):
    async def bookie_groups(self) -> dict[str, dict]: ...


async def isolation_exclusions(
    registry: _GroupsSource,
    custom_metadata: Mapping[str, bytes] | None,
    available: Sequence[str],
    ensemble_size: int,
) -> set[str]:
    """The bookies a ledger with this custom metadata may not use ({} when it asks no groups)."""
    isolation = groups_of((custom_metadata or {}).get(PLACEMENT_CONFIG_KEY, b""))
    if isolation is None:
        return set()
    return excluded_bookies(await registry.bookie_groups(), *isolation, available, ensemble_size)
