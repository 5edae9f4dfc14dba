"""Configuration of a standalone (or broker) process.

Theory of operation: Pulsar operators bring a ``standalone.conf`` / ``broker.conf``
in Java-properties ``key=value`` form with Pulsar's key names, and expect CLI
flags to win over the file.  We read settings in three layers, lowest first:

    built-in defaults  <  --config FILE  <  environment  <  explicit CLI flags

The environment layer is the one Pulsar's Docker image applies
(``apply-config-from-env.py``): a variable named exactly like a key that the
file, the defaults or ``known_keys`` mention replaces its value, and
``PULSAR_PREFIX_<key>`` sets any key.  The environment is passed in (a
mapping), never read from a global here.

and keep the merged result as one flat ``{pulsar_key: string}`` mapping
(:attr:`StandaloneConfig.properties`).  The few settings the assembly itself
needs (ports, addresses, data directory, cluster) are lifted into typed fields
of the frozen :class:`StandaloneConfig`; every component then builds its own
small typed config from the same mapping (the broker engineer's
``BrokerConfig``, the managed-ledger config, the bookie's journal settings),
so no 4,000-line configuration object is passed around.

Unknown keys are kept, not rejected (Pulsar hands them to plugins).  An empty
value (``key=``) means "not set": the default applies.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


class ConfigError(Exception):
    """A configuration file or value that cannot be used (bad syntax, bad number)."""


# Standalone defaults (conf/standalone.conf), for the keys the assembly reads itself.
STANDALONE_DEFAULTS: dict[str, str] = {
    "clusterName": "standalone",
    "brokerServicePort": "6650",
    "webServicePort": "8080",
    "bindAddress": "0.0.0.0",
    "advertisedAddress": "",
    "allowAutoTopicCreation": "true",
    "allowAutoTopicCreationType": "non-partitioned",
    "defaultNumPartitions": "1",
    "maxMessageSize": "5242880",
    "managedLedgerDefaultEnsembleSize": "1",
    "managedLedgerDefaultWriteQuorum": "1",
    "managedLedgerDefaultAckQuorum": "1",
    "journalSyncData": "false",
    "keepAliveIntervalSeconds": "30",
}

# A cluster broker's defaults (`magnetar broker`), where Pulsar's broker.conf differs from
# standalone.conf: two copies of every entry, and no default cluster name (clusterName is required).
BROKER_DEFAULTS: dict[str, str] = {
    **{k: v for k, v in STANDALONE_DEFAULTS.items() if k not in ("clusterName", "journalSyncData")},
    "managedLedgerDefaultEnsembleSize": "2",
    "managedLedgerDefaultWriteQuorum": "2",
    "managedLedgerDefaultAckQuorum": "2",
}

# Largest properties file we read; a config is a few KB, anything bigger is a mistake.
CONFIG_FILE_BYTES_MAX = 4 * 1024 * 1024


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java-properties text: ``#``/``!`` comments, ``=``, ``:`` or blank as the
    separator, a trailing backslash continues the line; keys and values trimmed."""
    out: dict[str, str] = {}
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip() if not pending else raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if _ends_with_continuation(line):
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    for line in logical:
        key, value = _split_key_value(line)
        if key:
            out[key] = value
    return out


def _ends_with_continuation(line: str) -> bool:
    # An odd number of trailing backslashes continues the line ("\\" is a literal backslash).
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    for i, ch in enumerate(line):
        if ch in "=:":
            return line[:i].strip(), line[i + 1 :].strip()
        if ch.isspace():
            rest = line[i:].lstrip()
            if rest[:1] in ("=", ":"):
                rest = rest[1:]
            return line[:i].strip(), rest.strip()
    return line.strip(), ""


def read_properties_file(path: str | os.PathLike[str]) -> dict[str, str]:
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > CONFIG_FILE_BYTES_MAX:
            raise ConfigError(f"config file {p} is {size} bytes, more than {CONFIG_FILE_BYTES_MAX}")
        return parse_properties(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {p}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {p} is not UTF-8 text: {exc}") from exc


def merge_layers(*layers: Mapping[str, str | None]) -> dict[str, str]:
    """Later layers win; a value of None or "" in a layer means "not set here"."""
    out: dict[str, str] = {}
    for layer in layers:
        for key, value in layer.items():
            if value is None or value == "":
                continue
            out[key] = str(value)
    return out


def get_int(props: Mapping[str, str], key: str, default: int) -> int:
    raw = props.get(key, "")
    if raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{key}={raw!r} is not an integer") from None


def get_bool(props: Mapping[str, str], key: str, default: bool) -> bool:
    raw = props.get(key, "").lower()
    if raw == "":
        return default
    if raw in ("true", "yes", "1"):
        return True
    if raw in ("false", "no", "0"):
        return False
    raise ConfigError(f"{key}={props[key]!r} is not a boolean")


@dataclass(frozen=True)
class StandaloneConfig:
    """What the standalone assembly needs; everything else stays in ``properties``."""

    data_dir: Path
    cluster_name: str = "standalone"
    bind_address: str = "0.0.0.0"
    broker_port: int = 6650
    web_port: int = 8080
    # Host put into lookup answers and the ready line.  Pulsar's standalone uses
    # "localhost" when empty; we do the same.
    advertised_address: str = "localhost"
    properties: Mapping[str, str] = field(default_factory=dict)

    @property
    def metadata_dir(self) -> Path:
        return self.data_dir / "metadata"

    @property
    def bookie_dir(self) -> Path:
        return self.data_dir / "bookie"


ENV_PREFIX = "PULSAR_PREFIX_"


def environment_layer(env: Mapping[str, str], mentioned_keys: set[str] | frozenset[str]) -> dict[str, str]:
    """Settings from the environment, as Pulsar's Docker image reads them."""
    out = {key: env[key] for key in sorted(mentioned_keys) if key in env}
    for name, value in env.items():
        if name.startswith(ENV_PREFIX) and len(name) > len(ENV_PREFIX):
            out[name[len(ENV_PREFIX) :]] = value
    return out


def load_standalone_config(
    config_file: str | os.PathLike[str] | None = None,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    overrides: Mapping[str, str | None] | None = None,
    env: Mapping[str, str] | None = None,
    known_keys: frozenset[str] = frozenset(),
    defaults: Mapping[str, str] = STANDALONE_DEFAULTS,
) -> StandaloneConfig:
    """Build the config from ``defaults`` < file < ``env`` < ``overrides`` (CLI flags, Pulsar key names)."""
    file_layer = read_properties_file(config_file) if config_file else {}
    mentioned = set(defaults) | set(file_layer) | set(known_keys)
    env_layer = environment_layer(env, mentioned) if env is not None else {}
    props = merge_layers(defaults, file_layer, env_layer, overrides or {})
    for key in ("brokerServicePort", "webServicePort"):
        port = get_int(props, key, 0)
        if not 0 <= port <= 65535:
            raise ConfigError(f"{key}={port} is not a TCP port")
    return StandaloneConfig(
        data_dir=Path(data_dir if data_dir is not None else "data"),
        cluster_name=props.get("clusterName", "standalone"),
        bind_address=props.get("bindAddress", "0.0.0.0"),
        broker_port=get_int(props, "brokerServicePort", 6650),
        web_port=get_int(props, "webServicePort", 8080),
        advertised_address=props.get("advertisedAddress") or "localhost",
        properties=props,
    )
