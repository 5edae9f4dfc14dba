from __future__ import annotations

import pytest

from magnetar.broker.config import (
    BrokerConfig,
    ConfigError,
    config_from_properties,
    load_config_file,
    parse_properties,
    unknown_keys,
)


def test_defaults_are_standalones() -> None:
    c = BrokerConfig()
    assert c.broker_service_port == 6650 and c.web_service_port == 8080
    assert c.cluster_name == "standalone"
    assert c.allow_auto_topic_creation and c.allow_auto_topic_creation_type == "non-partitioned"
    assert c.max_message_size == 5 * 1024 * 1024
    assert c.max_frame_size == 5 * 1024 * 1024 + 10 * 1024
    assert c.managed_ledger_default_ensemble_size == 1


def test_properties_format() -> None:
    text = "# comment\n! also a comment\n\n  brokerServicePort = 7000 \nclusterName:c1\nlong=a,\\\n   b\nempty=\n"
    assert parse_properties(text) == {"brokerServicePort": "7000", "clusterName": "c1", "long": "a,b"}


def test_file_with_typed_values_and_unknown_keys(tmp_path) -> None:
    p = tmp_path / "standalone.conf"
    p.write_text(
        "brokerServicePort=0\nallowAutoTopicCreation=false\nallowAutoTopicCreationType=partitioned\n"
        "defaultNumPartitions=3\nsubscriptionTypesEnabled=Exclusive, Shared\ntokenSecretKey=abc\n"
        "managedLedgerMaxEntriesPerLedger=10\n"
    )
    c = load_config_file(p)
    assert c.broker_service_port == 0
    assert c.allow_auto_topic_creation is False
    assert c.allow_auto_topic_creation_type == "partitioned"
    assert c.default_num_partitions == 3
    assert c.subscription_types_enabled == ("Exclusive", "Shared")
    assert unknown_keys(c) == ["tokenSecretKey"]
    assert c.extra["tokenSecretKey"] == "abc"
    assert c.managed_ledger_config().max_entries_per_ledger == 10


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("brokerServicePort", "abc", "brokerServicePort"),
        ("allowAutoTopicCreation", "maybe", "allowAutoTopicCreation"),
        ("brokerServicePort", "70000", "port"),
        ("allowAutoTopicCreationType", "sometimes", "allowAutoTopicCreationType"),
        ("managedLedgerDefaultAckQuorum", "3", "quorum"),
    ],
)
def test_bad_values_name_the_key(key: str, value: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        config_from_properties({key: value})


def test_overrides_take_field_names_and_typed_values() -> None:
    c = BrokerConfig().with_overrides({"broker_service_port": 1234, "advertisedAddress": "h"})
    assert c.broker_service_port == 1234 and c.advertised_address == "h"
    with pytest.raises(ConfigError):
        BrokerConfig().with_overrides({"broker_service_port": "x1"})
    with pytest.raises(ConfigError):
        BrokerConfig().with_overrides({"broker_service_port": True})


def test_as_properties_round_trips() -> None:
    c = BrokerConfig().with_overrides({"clusterName": "x", "subscriptionTypesEnabled": "Shared"})
    again = config_from_properties(
        {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in c.as_properties().items()}
    )
    assert again == c


def test_missing_file_is_a_config_error(tmp_path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config_file(tmp_path / "nope.conf")
