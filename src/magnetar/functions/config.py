"""``FunctionConfig``: a function's (or connector's) definition, in Pulsar's JSON field names.

Theory of operation: ``pulsar-admin functions create`` sends a ``functionConfig``
JSON document (Pulsar's ``FunctionConfig``: ``tenant``, ``namespace``, ``name``,
``className``, ``inputs``, ``topicsPattern``, ``output``, ``logTopic``,
``processingGuarantees``, ``parallelism``, ``userConfig``, ``secrets``,
``deadLetterTopic``, ``maxMessageRetries``, ``timeoutMs``, ``subName``,
``autoAck``, ...).  :func:`parse_function_config` validates one such document
into a frozen :class:`FunctionConfig`; :meth:`FunctionConfig.to_json` writes it
back with the same names, so what ``functions get`` answers is what was sent
(plus defaults).  Bad input raises :class:`FunctionConfigError` with a message
that names the field -- the REST layer answers it as 400.

Magnetar's own choice of runtime travels in Pulsar's ``customRuntimeOptions``
string (JSON): ``{"runtime": "thread"}`` or ``{"runtime": "process"}``.
``resources`` (``cpu`` cores, ``ram`` and ``disk`` bytes) is validated here and
enforced by the process runtime (see ``runtime``); ``retainOrdering`` reads with
a Failover subscription, ``retainKeyOrdering`` with Key_Shared.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
from dataclasses import dataclass, field
from typing import Any

# No leading dot: a name is also a directory under the worker's data dir ("..", ".x" refused).
NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}$")
PARALLELISM_MAX = 64
RAM_MIN_BYTES = 64 * 1024 * 1024  # a Python instance with the client needs about this much


class FunctionConfigError(ValueError):
    """The function configuration is invalid; the message names the field."""


class ProcessingGuarantees(enum.Enum):
    ATMOST_ONCE = "ATMOST_ONCE"
    ATLEAST_ONCE = "ATLEAST_ONCE"
    EFFECTIVELY_ONCE = "EFFECTIVELY_ONCE"


class RuntimeKind(enum.Enum):
    THREAD = "thread"
    PROCESS = "process"


@dataclass(frozen=True)
class FunctionConfig:
    tenant: str
    namespace: str
    name: str
    className: str = ""
    inputs: tuple[str, ...] = ()
    topicsPattern: str | None = None
    output: str | None = None
    logTopic: str | None = None
    processingGuarantees: ProcessingGuarantees = ProcessingGuarantees.ATLEAST_ONCE
    parallelism: int = 1
    userConfig: dict[str, Any] = field(default_factory=dict)
    secrets: dict[str, Any] = field(default_factory=dict)
    deadLetterTopic: str | None = None
    maxMessageRetries: int | None = None
    timeoutMs: int | None = None
    subName: str | None = None
    subscriptionPosition: str = "Latest"
    autoAck: bool = True
    retainOrdering: bool = False
    retainKeyOrdering: bool = False
    resources: dict[str, Any] | None = None  # {"cpu": cores, "ram": bytes, "disk": bytes}
    cleanupSubscription: bool = True
    py: str | None = None
    runtime: str = "PYTHON"
    customRuntimeOptions: str | None = None
    # connectors: "source" / "sink" / None (a function); their own config map
    componentType: str | None = None
    configs: dict[str, Any] = field(default_factory=dict)
    archive: str | None = None

    @property
    def fqfn(self) -> str:
        return f"{self.tenant}/{self.namespace}/{self.name}"

    @property
    def runtime_kind(self) -> RuntimeKind | None:
        if not self.customRuntimeOptions:
            return None
        try:
            return RuntimeKind(json.loads(self.customRuntimeOptions).get("runtime", ""))
        except (ValueError, AttributeError):
            return None

    @property
    def subscription(self) -> str:
        return self.subName or f"{self.tenant}/{self.namespace}/{self.name}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, enum.Enum):
                v = v.value
            elif isinstance(v, tuple):
                v = list(v)
            if v is not None:
                out[f.name] = v
        return out

    def merged(self, update: dict[str, Any]) -> FunctionConfig:
        """This config with the non-null fields of ``update`` applied (``functions update``)."""
        base = self.to_json()
        base.update({k: v for k, v in update.items() if v is not None})
        return parse_function_config(base)


def _str(doc: dict[str, Any], key: str, default: str | None = None) -> str | None:
    v = doc.get(key, default)
    if v is None:
        return None
    if not isinstance(v, str):
        raise FunctionConfigError(f"{key} must be a string")
    return v


def _topic(doc: dict[str, Any], key: str) -> str | None:
    v = _str(doc, key)
    return v or None


def _int(doc: dict[str, Any], key: str, default: int | None, lo: int, hi: int) -> int | None:
    v = doc.get(key, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise FunctionConfigError(f"{key} must be an integer in [{lo}, {hi}], not {v!r}")
    return v


def _map(doc: dict[str, Any], key: str) -> dict[str, Any]:
    v = doc.get(key) or {}
    if isinstance(v, str):  # the CLI passes --user-config as a JSON string
        try:
            v = json.loads(v)
        except ValueError:
            raise FunctionConfigError(f"{key} must be a JSON object")
    if not isinstance(v, dict):
        raise FunctionConfigError(f"{key} must be a JSON object")
    return v


def _inputs(doc: dict[str, Any]) -> tuple[str, ...]:
    raw = doc.get("inputs") or []
    if isinstance(raw, str):
        raw = [t for t in raw.split(",") if t]
    # Pulsar also accepts inputSpecs / customSerdeInputs maps keyed by topic.
    for extra in ("inputSpecs", "customSerdeInputs", "customSchemaInputs"):
        if isinstance(doc.get(extra), dict):
            raw = list(raw) + [t for t in doc[extra] if t not in raw]
    if not isinstance(raw, list) or not all(isinstance(t, str) and t for t in raw):
        raise FunctionConfigError("inputs must be a list of topic names")
    return tuple(raw)


def _resources(raw: Any) -> dict[str, Any] | None:
    """Pulsar's ``Resources``: ``cpu`` (cores, float), ``ram`` and ``disk`` (bytes)."""
    if raw is None:
        return None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise FunctionConfigError("resources must be a JSON object")
    if not isinstance(raw, dict):
        raise FunctionConfigError('resources must be {"cpu": cores, "ram": bytes, "disk": bytes}')
    unknown = set(raw) - {"cpu", "ram", "disk"}
    if unknown:
        raise FunctionConfigError(f"resources: unknown field(s) {sorted(unknown)}; use cpu, ram, disk")
    out: dict[str, Any] = {}
    for key, kind in (("cpu", float), ("ram", int), ("disk", int)):
        v = raw.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int | float) or v <= 0:
            raise FunctionConfigError(f"resources.{key} must be a positive number, not {v!r}")
        if kind is int and v != int(v):
            raise FunctionConfigError(f"resources.{key} is a number of bytes (an integer), not {v!r}")
        out[key] = kind(v)
    if "ram" in out and out["ram"] < RAM_MIN_BYTES:
        raise FunctionConfigError(
            f"resources.ram {out['ram']} is below {RAM_MIN_BYTES} bytes, too little for an instance"
        )
    return out or None


def parse_function_config(doc: Any, *, component: str | None = None) -> FunctionConfig:
    """Validate a functionConfig / sourceConfig / sinkConfig document."""
    if not isinstance(doc, dict):
        raise FunctionConfigError("the function config must be a JSON object")
    names = {}
    for key in ("tenant", "namespace", "name"):
        v = _str(doc, key)
        if not v or not NAME_RE.match(v):
            raise FunctionConfigError(f"{key} is required and must match {NAME_RE.pattern}")
        names[key] = v
    try:
        guarantee = ProcessingGuarantees(doc.get("processingGuarantees") or "ATLEAST_ONCE")
    except ValueError:
        raise FunctionConfigError(
            "processingGuarantees must be one of ATMOST_ONCE, ATLEAST_ONCE, EFFECTIVELY_ONCE"
        )
    inputs = _inputs(doc)
    pattern = _str(doc, "topicsPattern")
    if pattern:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise FunctionConfigError(f"topicsPattern is not a regular expression: {exc}")
    kind = component or doc.get("componentType")
    class_name = _str(doc, "className", "") or ""
    if kind != "source" and not inputs and not pattern:
        raise FunctionConfigError("inputs (or topicsPattern) is required: no input topic given")
    if kind is None and not class_name:
        raise FunctionConfigError("className is required")
    if kind == "source" and not (doc.get("output") or doc.get("topicName")):
        raise FunctionConfigError("topicName (the source's output topic) is required")
    if doc.get("retainOrdering") and doc.get("retainKeyOrdering"):
        raise FunctionConfigError("retainOrdering and retainKeyOrdering cannot both be set")
    if guarantee is ProcessingGuarantees.EFFECTIVELY_ONCE and doc.get("retainKeyOrdering"):
        raise FunctionConfigError(
            "EFFECTIVELY_ONCE reads in order (Failover); retainKeyOrdering cannot apply"
        )
    if guarantee is ProcessingGuarantees.EFFECTIVELY_ONCE and (pattern or len(inputs) > 1):
        raise FunctionConfigError("EFFECTIVELY_ONCE needs exactly one input topic")
    position = _str(doc, "subscriptionPosition", "Latest") or "Latest"
    if position not in ("Latest", "Earliest"):
        raise FunctionConfigError("subscriptionPosition must be Latest or Earliest")
    cfg = FunctionConfig(
        **names,
        className=class_name,
        inputs=inputs,
        topicsPattern=pattern or None,
        output=_topic(doc, "output") or _topic(doc, "topicName"),  # a sourceConfig names it topicName
        logTopic=_topic(doc, "logTopic"),
        processingGuarantees=guarantee,
        parallelism=_int(doc, "parallelism", 1, 1, PARALLELISM_MAX) or 1,
        userConfig=_map(doc, "userConfig"),
        secrets=_map(doc, "secrets"),
        deadLetterTopic=_topic(doc, "deadLetterTopic"),
        maxMessageRetries=_int(doc, "maxMessageRetries", None, 0, 1_000_000),
        timeoutMs=_int(doc, "timeoutMs", None, 1, 86_400_000),
        subName=_topic(doc, "subName"),
        subscriptionPosition=position,
        autoAck=bool(doc.get("autoAck", True)),
        retainOrdering=bool(doc.get("retainOrdering", False)),
        retainKeyOrdering=bool(doc.get("retainKeyOrdering", False)),
        resources=_resources(doc.get("resources")),
        cleanupSubscription=bool(doc.get("cleanupSubscription", True)),
        py=_str(doc, "py"),
        runtime=_str(doc, "runtime", "PYTHON") or "PYTHON",
        customRuntimeOptions=_str(doc, "customRuntimeOptions"),
        componentType=kind,
        configs=_map(doc, "configs"),
        archive=_str(doc, "archive"),
    )
    if cfg.runtime.upper() != "PYTHON":
        raise FunctionConfigError(f"runtime {cfg.runtime} is not supported here; only PYTHON")
    if cfg.customRuntimeOptions and cfg.runtime_kind is None:
        raise FunctionConfigError(
            'customRuntimeOptions must be {"runtime": "thread"} or {"runtime": "process"}'
        )
    return cfg
