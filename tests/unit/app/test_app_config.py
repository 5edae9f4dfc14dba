"""Configuration layers: defaults < Pulsar properties file < CLI flags."""

from __future__ import annotations

import pytest

from magnetar.app.config import ConfigError, load_standalone_config, parse_properties


def test_parse_properties_java_rules():
    text = "# comment\n! also comment\n\nbrokerServicePort = 7000\nclusterName:east\nkey value here\nlong=a,\\\n   b\nempty=\n"
    props = parse_properties(text)
    assert props == {
        "brokerServicePort": "7000",
        "clusterName": "east",
        "key": "value here",
        "long": "a,b",
        "empty": "",
    }


def test_precedence_defaults_file_flags(tmp_path):
    conf = tmp_path / "standalone.conf"
    conf.write_text("brokerServicePort=7000\nwebServicePort=7080\nadvertisedAddress=\nmaxMessageSize=1024\n")
    cfg = load_standalone_config(conf, data_dir=tmp_path / "d", overrides={"webServicePort": "0", "x": None})
    assert cfg.broker_port == 7000  # file beats default
    assert cfg.web_port == 0  # flag beats file
    assert cfg.advertised_address == "localhost"  # empty value = not set
    assert cfg.properties["maxMessageSize"] == "1024"
    assert cfg.properties["clusterName"] == "standalone"
    assert cfg.metadata_dir == tmp_path / "d" / "metadata"


def test_bad_values_are_config_errors(tmp_path):
    conf = tmp_path / "c.conf"
    conf.write_text("brokerServicePort=seven\n")
    with pytest.raises(ConfigError, match="brokerServicePort"):
        load_standalone_config(conf)
    with pytest.raises(ConfigError, match="cannot read"):
        load_standalone_config(tmp_path / "missing.conf")
    with pytest.raises(ConfigError, match="TCP port"):
        load_standalone_config(None, overrides={"webServicePort": "70000"})


def test_environment_layer_between_file_and_flags(tmp_path):
    conf = tmp_path / "c.conf"
    conf.write_text("brokerServicePort=7000\nwebServicePort=7080\nmaxMessageSize=1024\n")
    env = {
        "maxMessageSize": "2048",  # named like a key in the file: replaces it
        "defaultNumPartitions": "5",  # a known key (known_keys) not in the file
        "PULSAR_PREFIX_customPluginKey": "x",  # any key through the prefix
        "PATH": "/usr/bin",  # not a key: ignored
        "webServicePort": "7090",
    }
    cfg = load_standalone_config(
        conf, overrides={"webServicePort": "0"}, env=env, known_keys=frozenset({"defaultNumPartitions"})
    )
    assert cfg.properties["maxMessageSize"] == "2048"
    assert cfg.properties["defaultNumPartitions"] == "5"
    assert cfg.properties["customPluginKey"] == "x"
    assert "PATH" not in cfg.properties
    assert cfg.broker_port == 7000 and cfg.web_port == 0  # the CLI flag still wins over the env
