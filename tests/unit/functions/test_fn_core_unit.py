"""Unit tests of the functions core: config validation, user-code loading, serde, context, sequence ids."""

from __future__ import annotations

import logging

import pytest

from magnetar.functions.config import FunctionConfigError, ProcessingGuarantees, parse_function_config
from magnetar.functions.context import Context
from magnetar.functions.instance import sequence_id_of
from magnetar.functions.loader import (
    UserCodeError,
    identity_deserialize,
    identity_serialize,
    load_callable,
)
from magnetar.functions.state import LocalState
from magnetar.protocol.message_id import MessageId

BASE = {"tenant": "public", "namespace": "default", "name": "f", "className": "m.C", "inputs": ["t"]}


def test_config_round_trips_in_pulsar_names():
    cfg = parse_function_config(
        {**BASE, "processingGuarantees": "EFFECTIVELY_ONCE", "userConfig": '{"a": 1}'}
    )
    assert cfg.processingGuarantees is ProcessingGuarantees.EFFECTIVELY_ONCE
    assert cfg.userConfig == {"a": 1}
    assert parse_function_config(cfg.to_json()) == cfg
    assert cfg.merged({"parallelism": 3}).parallelism == 3


@pytest.mark.parametrize(
    "change, words",
    [
        ({"name": "bad/name"}, "name"),
        ({"name": ".."}, "name"),
        ({"inputs": []}, "inputs"),
        ({"parallelism": 1000}, "parallelism"),
        ({"processingGuarantees": "NEVER"}, "processingGuarantees"),
        ({"topicsPattern": "(", "inputs": []}, "topicsPattern"),
        ({"processingGuarantees": "EFFECTIVELY_ONCE", "inputs": ["a", "b"]}, "EFFECTIVELY_ONCE"),
        ({"customRuntimeOptions": '{"runtime": "vm"}'}, "customRuntimeOptions"),
        ({"runtime": "JAVA"}, "PYTHON"),
    ],
)
def test_config_rejects_bad_input_naming_the_field(change, words):
    with pytest.raises(FunctionConfigError, match=words):
        parse_function_config({**BASE, **change})


def test_loader_accepts_classes_and_plain_functions(tmp_path):
    code = tmp_path / "user.py"
    code.write_text(
        "class WithCtx:\n    def process(self, input, context):\n        return (input, context)\n"
        "class NoCtx:\n    def process(self, input):\n        return input * 2\n"
        "def plain(input):\n    return input + 1\n"
        "def plain_ctx(input, context):\n    return context\n"
    )
    assert load_callable(code, "user.WithCtx")(1, "ctx") == (1, "ctx")
    assert load_callable(code, "NoCtx")(2, None) == 4
    assert load_callable(code, "user.plain")(1, None) == 2
    assert load_callable(code, "user.plain_ctx")(1, "c") == "c"
    with pytest.raises(UserCodeError, match="no attribute"):
        load_callable(code, "user.Missing")
    with pytest.raises(UserCodeError, match="does not exist"):
        load_callable(tmp_path / "nope.py", "nope.X")


def test_pulsar_function_subclass_loads(tmp_path):
    pytest.importorskip("pulsar")
    code = tmp_path / "excl.py"
    code.write_text(
        "from pulsar import Function\nclass E(Function):\n    def process(self, input, context):\n"
        "        return input + '!'\n"
    )
    assert load_callable(code, "excl.E")("hi", None) == "hi!"


def test_identity_serde_matches_pulsar():
    assert identity_deserialize(b"42") == 42
    assert identity_deserialize(b"1.5") == 1.5
    assert identity_deserialize(b"hello") == "hello"
    assert identity_deserialize(b"\xff\x00") == b"\xff\x00"
    assert identity_serialize("x!") == b"x!" and identity_serialize(7) == b"7"
    with pytest.raises(TypeError):
        identity_serialize({"a": 1})


def test_context_config_secrets_state_and_metrics(monkeypatch, tmp_path):
    secret_file = tmp_path / "s"
    secret_file.write_text("from-file\n")
    monkeypatch.setenv("DB_PASSWORD", "from-env")
    cfg = parse_function_config(
        {
            **BASE,
            "userConfig": {"k": "v"},
            "secrets": {"a": "env:DB_PASSWORD", "b": f"file:{secret_file}", "c": "clear"},
        }
    )
    published = []
    metrics: dict = {}
    ctx = Context(
        cfg, 2, state=LocalState(), publish_fn=lambda *a: published.append(a),
        logger=logging.getLogger("t"), metrics=metrics,
    )  # fmt: skip
    assert ctx.get_user_config_value("k") == "v" and ctx.get_user_config_map() == {"k": "v"}
    assert (ctx.get_secret("a"), ctx.get_secret("b"), ctx.get_secret("c")) == (
        "from-env",
        "from-file",
        "clear",
    )
    assert ctx.get_secret("DB_PASSWORD") == "from-env"
    assert ctx.get_instance_id() == 2 and ctx.get_function_name() == "f"
    ctx.incr_counter("w", 2)
    ctx.incr_counter("w", 3)
    assert ctx.get_counter("w") == 5
    ctx.put_state("s", "x")
    assert ctx.get_state("s") == "x"
    ctx.record_metric("m", 4)
    ctx.record_metric("m", 6)
    assert metrics["m"]["sum"] == 10 and metrics["m"]["count"] == 2
    ctx.publish("persistent://public/default/o", "hi", properties={"p": "1"})
    assert published[0][0] == "persistent://public/default/o" and published[0][1] == b"hi"
    assert published[0][2] == {"properties": {"p": "1"}}


def test_sequence_ids_grow_with_the_input_position():
    ids = [MessageId(5, 9, batch_index=1), MessageId(5, 10), MessageId(5, 10, batch_index=3), MessageId(6, 0)]
    seqs = [sequence_id_of(m) for m in ids]
    assert seqs == sorted(seqs) and len(set(seqs)) == 4
    assert sequence_id_of(MessageId((1 << 24) - 1, (1 << 28) - 1, batch_index=2047)) < 1 << 63
