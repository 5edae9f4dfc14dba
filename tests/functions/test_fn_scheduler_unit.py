"""The scheduler's assignment rule and the worker config reader (no processes)."""

from __future__ import annotations

import pytest

from magnetar.app.functions_cluster import WorkerConfigError, load_worker_config
from magnetar.functions.scheduler import assign

KEYS = [f"t/n/f:{i}" for i in range(6)]


def test_assign_spreads_evenly_and_is_sticky():
    first = assign(KEYS, ["w1", "w2", "w3"], {})
    assert sorted(list(first.values()).count(w) for w in ("w1", "w2", "w3")) == [2, 2, 2]
    # a worker joins: nothing moves
    assert assign(KEYS, ["w1", "w2", "w3", "w4"], first) == first
    # a worker dies: only its instances move, to the least loaded
    second = assign(KEYS, ["w1", "w3"], first)
    assert all(second[k] == first[k] for k in KEYS if first[k] != "w2")
    assert sorted(list(second.values()).count(w) for w in ("w1", "w3")) == [3, 3]
    assert assign(KEYS, [], first) == {}
    # new instances (parallelism up) go to the least loaded
    more = assign([*KEYS, "t/n/f:6"], ["w1", "w2", "w3"], first)
    assert more["t/n/f:6"] == "w1" and all(more[k] == first[k] for k in KEYS)


def test_worker_config_keys_and_errors():
    base = {
        "workerId": "w1",
        "pulsarServiceUrl": "pulsar://b:6650",
        "pulsarWebServiceUrl": "http://b:8080",
        "metadataStoreUrl": "zk:127.0.0.1:2181",
    }
    c = load_worker_config(base, {"workerPort": 7000})
    assert (c.port, c.runtime, c.metadata_url) == (7000, "process", "zk:127.0.0.1:2181")
    t = load_worker_config(
        {
            **base,
            "functionRuntimeFactoryClassName": "org.apache.pulsar.functions.runtime.thread.ThreadRuntimeFactory",
        }
    )
    assert t.runtime == "thread"
    with pytest.raises(WorkerConfigError, match="pulsarServiceUrl is required"):
        load_worker_config({k: v for k, v in base.items() if k != "pulsarServiceUrl"})
    with pytest.raises(WorkerConfigError, match="KubernetesRuntimeFactory"):
        load_worker_config({**base, "functionRuntimeFactoryClassName": "x.KubernetesRuntimeFactory"})
    with pytest.raises(WorkerConfigError):
        load_worker_config({**base, "workerPort": "many"})
