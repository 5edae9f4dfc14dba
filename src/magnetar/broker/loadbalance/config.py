"""LoadBalancerConfig: the load manager's settings, typed once from the broker's key=value settings.

Theory of operation: the keys are Pulsar's (``loadBalancer*``, ``loadManagerClassName``,
``defaultNamespaceBundleSplitAlgorithm``); they arrive through ``BrokerConfig.extra`` and are
converted here, a bad value being a ConfigError that names the key.  The load manager reads
the config afresh at every round (``from_properties(svc.config.as_properties())``), so a
dynamic-config change (``admin brokers update-dynamic-config``) applies at the next round.

Pulsar's interval keys are whole minutes; Magnetar accepts fractional minutes too
(``loadBalancerSheddingIntervalMinutes=0.02`` is 1.2 s) so tests and small clusters can
shed quickly without inventing new keys.  ``loadBalancerOverrideBrokerNicSpeedGbps`` is
the bandwidth limit the in/out usage is a percentage of (a Python process cannot see its
NIC share; Pulsar reads it from the NIC): default 1 Gbps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from magnetar.broker.config import ConfigError

SPLIT_ALGORITHMS = ("range_equally_divide", "topic_count_equally_divide")

# Pulsar key -> (field, default, type)
_KEYS: dict[str, tuple[str, Any, type]] = {
    "loadBalancerEnabled": ("enabled", True, bool),
    "loadManagerClassName": ("load_manager_class_name", "", str),
    "loadBalancerReportUpdateThresholdPercentage": ("report_update_threshold_pct", 10.0, float),
    "loadBalancerReportUpdateMinIntervalMillis": ("report_update_min_interval_ms", 5000, int),
    "loadBalancerReportUpdateMaxIntervalMinutes": ("report_update_max_interval_min", 15.0, float),
    "loadBalancerSheddingEnabled": ("shedding_enabled", True, bool),
    "loadBalancerSheddingIntervalMinutes": ("shedding_interval_min", 1.0, float),
    "loadBalancerSheddingGracePeriodMinutes": ("shedding_grace_period_min", 30.0, float),
    "lowerBoundarySheddingEnabled": ("lower_boundary_shedding_enabled", False, bool),
    "loadBalancerBrokerOverloadedThresholdPercentage": ("overloaded_threshold_pct", 85.0, float),
    "loadBalancerBrokerThresholdShedderPercentage": ("threshold_shedder_pct", 10.0, float),
    "loadBalancerHistoryResourcePercentage": ("history_resource_pct", 0.9, float),
    "loadBalancerBundleUnloadMinThroughputThreshold": ("unload_min_throughput_mb", 10.0, float),
    "loadBalancerAverageResourceUsageDifferenceThresholdPercentage": ("placement_band_pct", 10.0, float),
    "loadBalancerCPUResourceWeight": ("cpu_weight", 1.0, float),
    "loadBalancerMemoryResourceWeight": ("memory_weight", 1.0, float),
    "loadBalancerDirectMemoryResourceWeight": ("direct_memory_weight", 1.0, float),
    "loadBalancerBandwithInResourceWeight": ("bandwidth_in_weight", 1.0, float),
    "loadBalancerBandwithOutResourceWeight": ("bandwidth_out_weight", 1.0, float),
    "loadBalancerOverrideBrokerNicSpeedGbps": ("nic_speed_gbps", 1.0, float),
    "loadBalancerAutoBundleSplitEnabled": ("auto_bundle_split_enabled", True, bool),
    "loadBalancerAutoUnloadSplitBundlesEnabled": ("auto_unload_split_bundles_enabled", True, bool),
    "loadBalancerNamespaceBundleMaxTopics": ("bundle_max_topics", 1000, int),
    "loadBalancerNamespaceBundleMaxSessions": ("bundle_max_sessions", 1000, int),
    "loadBalancerNamespaceBundleMaxMsgRate": ("bundle_max_msg_rate", 30000.0, float),
    "loadBalancerNamespaceBundleMaxBandwidthMbytes": ("bundle_max_bandwidth_mb", 100.0, float),
    "loadBalancerNamespaceMaximumBundles": ("max_bundles", 128, int),
    "defaultNamespaceBundleSplitAlgorithm": ("split_algorithm", "range_equally_divide", str),
}
KNOWN_KEYS = frozenset(_KEYS)
# Changeable at run time through /admin/v2/brokers/configuration (read each round).
DYNAMIC_KEYS = tuple(_KEYS)


@dataclass(frozen=True)
class LoadBalancerConfig:
    enabled: bool = True
    load_manager_class_name: str = ""
    report_update_threshold_pct: float = 10.0
    report_update_min_interval_ms: int = 5000
    report_update_max_interval_min: float = 15.0
    shedding_enabled: bool = True
    shedding_interval_min: float = 1.0
    shedding_grace_period_min: float = 30.0
    lower_boundary_shedding_enabled: bool = False
    overloaded_threshold_pct: float = 85.0
    threshold_shedder_pct: float = 10.0
    history_resource_pct: float = 0.9
    unload_min_throughput_mb: float = 10.0
    placement_band_pct: float = 10.0
    cpu_weight: float = 1.0
    memory_weight: float = 1.0
    direct_memory_weight: float = 1.0
    bandwidth_in_weight: float = 1.0
    bandwidth_out_weight: float = 1.0
    nic_speed_gbps: float = 1.0
    auto_bundle_split_enabled: bool = True
    auto_unload_split_bundles_enabled: bool = True
    bundle_max_topics: int = 1000
    bundle_max_sessions: int = 1000
    bundle_max_msg_rate: float = 30000.0
    bundle_max_bandwidth_mb: float = 100.0
    max_bundles: int = 128
    split_algorithm: str = "range_equally_divide"

    @property
    def shedding_interval_s(self) -> float:
        return self.shedding_interval_min * 60.0

    @property
    def grace_period_ms(self) -> int:
        return int(self.shedding_grace_period_min * 60_000)

    @property
    def bandwidth_limit_bytes_s(self) -> float:
        """The NIC speed in bytes per second (the 100 % of bandwidth in/out usage)."""
        return self.nic_speed_gbps * 1e9 / 8

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> LoadBalancerConfig:
        values: dict[str, Any] = {}
        for key, (name, _default, kind) in _KEYS.items():
            raw = props.get(key)
            if raw is None or raw == "":
                continue
            values[name] = _convert(key, raw, kind)
        cfg = cls(**values)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, int | float) and not isinstance(v, bool) and v < 0:
                raise ConfigError(f"{_key_of(f.name)}={v}: must not be negative")
        if not 0.0 <= self.history_resource_pct < 1.0:
            raise ConfigError(
                f"loadBalancerHistoryResourcePercentage={self.history_resource_pct}: 0 <= x < 1"
            )
        if self.split_algorithm not in SPLIT_ALGORITHMS:
            raise ConfigError(
                f"defaultNamespaceBundleSplitAlgorithm={self.split_algorithm!r}: one of {', '.join(SPLIT_ALGORITHMS)}"
            )
        if self.shedding_interval_min <= 0 or self.report_update_max_interval_min <= 0:
            raise ConfigError("loadBalancer interval minutes must be positive")
        if self.nic_speed_gbps <= 0:
            raise ConfigError("loadBalancerOverrideBrokerNicSpeedGbps must be positive")


def _key_of(name: str) -> str:
    return next((k for k, (n, _d, _t) in _KEYS.items() if n == name), name)


def _convert(key: str, raw: Any, kind: type) -> Any:
    text = str(raw).strip()
    if kind is bool:
        if text.lower() in ("true", "1", "yes", "on"):
            return True
        if text.lower() in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{key}={raw!r}: expected true or false")
    if kind is str:
        return text
    try:
        return kind(float(text)) if kind is int and "." not in text else kind(text)
    except ValueError:
        raise ConfigError(f"{key}={raw!r}: expected a number") from None
