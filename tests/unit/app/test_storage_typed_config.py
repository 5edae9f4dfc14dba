"""Each component types its own keys once: the embedded bookie, the ledger client, the key registry."""

from __future__ import annotations

import logging

import pytest

from magnetar.app.config import BROKER_DEFAULTS, load_standalone_config
from magnetar.app.config_keys import known_keys, log_unknown_keys, unknown_keys
from magnetar.app.storage import StorageStartError, standalone_bookie_config
from magnetar.bookie.config import BookieConfig
from magnetar.bookkeeper.config import ClientConfig
from magnetar.bookkeeper.placement import (
    DefaultPlacementPolicy,
    RackAwarePlacementPolicy,
    RegionAwarePlacementPolicy,
    make_policy,
    region_of,
)
from magnetar.broker.config import BrokerConfig, config_from_properties
from magnetar.runtime import Rng


def test_journal_sync_data_is_off_in_the_standalone_and_on_for_a_bookie(tmp_path) -> None:
    standalone = standalone_bookie_config(load_standalone_config(None, data_dir=tmp_path))
    assert standalone.journal_sync_data is False
    assert standalone.gc_wait_time_ms == 300_000  # Pulsar's standalone: GC every 5 minutes
    assert BookieConfig().journal_sync_data is True  # `magnetar bookie`
    on = load_standalone_config(None, data_dir=tmp_path, overrides={"journalSyncData": "true"})
    assert standalone_bookie_config(on).journal_sync_data is True
    assert not hasattr(BrokerConfig(), "journal_sync_data")


def test_standalone_bookie_reads_bk_keys_but_keeps_its_own_directories(tmp_path) -> None:
    config = load_standalone_config(
        None,
        data_dir=tmp_path,
        overrides={"gcWaitTime": "1000", "minorCompactionInterval": "5", "journalDirectory": "/elsewhere"},
    )
    cfg = standalone_bookie_config(config)
    assert (cfg.gc_wait_time_ms, cfg.minor_compaction_interval_s) == (1000, 5)
    assert cfg.journal_directory == f"{tmp_path / 'bookie'}/journal"
    bad = load_standalone_config(None, data_dir=tmp_path, overrides={"gcWaitTime": "soon"})
    with pytest.raises(StorageStartError, match="gcWaitTime"):
        standalone_bookie_config(bad)


def test_cluster_broker_defaults_are_pulsars_broker_conf() -> None:
    cfg = config_from_properties({**BROKER_DEFAULTS, "clusterName": "c"})
    assert (
        cfg.managed_ledger_default_ensemble_size,
        cfg.managed_ledger_default_write_quorum,
        cfg.managed_ledger_default_ack_quorum,
    ) == (2, 2, 2)
    assert "clusterName" not in BROKER_DEFAULTS


@pytest.mark.parametrize(
    ("props", "policy", "cls"),
    [
        ({}, "rack_aware", RackAwarePlacementPolicy),
        ({"bookkeeperClientRackawarePolicyEnabled": "false"}, "default", DefaultPlacementPolicy),
        ({"bookkeeperClientRegionawarePolicyEnabled": "true"}, "region_aware", RegionAwarePlacementPolicy),
        (
            {"ensemblePlacementPolicy": "org.apache.bookkeeper.client.RegionAwareEnsemblePlacementPolicy"},
            "region_aware",
            RegionAwarePlacementPolicy,
        ),
    ],
)
def test_placement_policy_keys(props, policy, cls) -> None:  # type: ignore[no-untyped-def]
    cfg = ClientConfig.from_properties(props, ClientConfig(placement_policy="rack_aware"))
    assert cfg.placement_policy == policy
    assert isinstance(make_policy(cfg.placement_policy, Rng(1)), cls)


def test_region_aware_spreads_each_write_set_over_regions() -> None:
    racks = {"a1": "/east/r1", "a2": "/east/r2", "b1": "/west/r1", "b2": "/west/r2"}
    policy = RegionAwarePlacementPolicy(Rng(4))
    for _ in range(20):
        ensemble = policy.new_ensemble(2, 2, sorted(racks), racks, set())
        assert {region_of(racks[b]) for b in ensemble} == {"/east", "/west"}
    assert region_of("/default-rack") == "/default-region"


def test_client_keys_are_converted_to_milliseconds() -> None:
    cfg = ClientConfig.from_properties(
        {
            "lostBookieRecoveryDelay": "2",
            "auditorPeriodicCheckInterval": "60",
            "bookkeeperClientTimeoutInSeconds": "7",
        }
    )
    assert cfg.lost_bookie_recovery_delay_ms == 2000
    assert cfg.auditor_periodic_check_ms == 60_000
    assert cfg.add_timeout_ms == cfg.read_timeout_ms == 7000
    with pytest.raises(ValueError, match="lostBookieRecoveryDelay"):
        ClientConfig.from_properties({"lostBookieRecoveryDelay": "later"})


def test_keys_read_by_some_component_are_known(caplog) -> None:  # type: ignore[no-untyped-def]
    known = known_keys()
    for key in (
        "authenticationEnabled",
        "tokenSecretKey",
        "gcWaitTime",
        "journalSyncData",
        "bookkeeperClientRegionawarePolicyEnabled",
        "delayedDeliveryEnabled",
        "brokerServicePort",
    ):
        assert key in known, key
    props = {"authenticationEnabled": "true", "a": "1", "b": "2"}
    assert unknown_keys(props) == ["a", "b"]
    with caplog.at_level(logging.WARNING):
        log_unknown_keys(props, logging.getLogger("t"))
        log_unknown_keys({"gcWaitTime": "1"}, logging.getLogger("t"))
    assert len(caplog.records) == 1 and caplog.records[0].getMessage().endswith(": a, b")
