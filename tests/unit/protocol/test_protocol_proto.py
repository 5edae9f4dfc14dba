"""PulsarApi.proto: the generated module is current, matches the reference, and the IntEnums mirror it."""

from __future__ import annotations

import pathlib
import re

import pytest

from magnetar.proto import PulsarApi_pb2 as pb
from magnetar.protocol import enums

PROTO_DIR = pathlib.Path(pb.__file__).parent
REFERENCE = pathlib.Path("/work/shared/reference/pulsar-api-fields.md")


def _messages():
    return list(pb.DESCRIPTOR.message_types_by_name.values())


def test_counts_match_the_reference_superset():
    # v20 (72 messages, 17 enums, 405 fields) plus Appendix A: 93 messages, 19 enums, 509 fields.
    messages = _messages()
    assert len(messages) == 93
    nested_enums = sum(len(m.enum_types) for m in messages)
    assert len(pb.DESCRIPTOR.enum_types_by_name) + nested_enums == 19
    assert sum(len(m.fields) for m in messages) == 509


def test_generated_module_is_up_to_date(tmp_path):
    grpc_tools = pytest.importorskip("grpc_tools.protoc")
    rc = grpc_tools.main(["protoc", f"-I{PROTO_DIR}", f"--python_out={tmp_path}", "PulsarApi.proto"])
    assert rc == 0
    assert (tmp_path / "PulsarApi_pb2.py").read_bytes() == (PROTO_DIR / "PulsarApi_pb2.py").read_bytes()


@pytest.mark.parametrize(
    "message,field,default",
    [
        ("MessageIdData", "partition", -1),
        ("MessageIdData", "batch_index", -1),
        ("CommandSubscribe", "durable", True),
        ("CommandSubscribe", "force_topic_creation", True),
        ("CommandProducer", "user_provided_producer_name", True),
        ("CommandProducerSuccess", "producer_ready", True),
        ("CommandProducerSuccess", "last_sequence_id", -1),
        ("CommandGetTopicsOfNamespaceResponse", "changed", True),
        ("MessageMetadata", "num_messages_in_batch", 1),
        ("CommandSend", "num_messages", 1),
        ("CommandPartitionedTopicMetadata", "metadata_auto_creation_enabled", True),
    ],
)
def test_non_zero_defaults(message, field, default):
    assert getattr(getattr(pb, message)(), field) == default


def _required_from_reference() -> dict[str, set[str]]:
    text = REFERENCE.read_text()
    section = text[text.index("## 7. Required fields") : text.index("## Appendix A")]
    out = {}
    for line in section.splitlines():
        m = re.match(r"^\| (\w+) \| (.+) \|$", line)
        if m and m.group(1) != "Message":
            out[m.group(1)] = set(re.findall(r"`(\w+)`", m.group(2)))
    return out


@pytest.mark.skipif(not REFERENCE.exists(), reason="reference notes not present")
def test_required_fields_match_reference():
    expected = _required_from_reference()
    assert len(expected) > 60
    for name, fields in expected.items():
        desc = pb.DESCRIPTOR.message_types_by_name[name]
        assert {f.name for f in desc.fields if f.is_required} == fields, name


def test_packed_form_of_repeated_scalars_is_accepted():
    # ack_set is declared unpacked, but decoders must accept the packed form too.
    unpacked = pb.MessageIdData(ledgerId=1, entryId=2, ack_set=[5, 7]).SerializeToString()
    packed = b"\x08\x01\x10\x02\x2a\x02\x05\x07"
    a, b = pb.MessageIdData(), pb.MessageIdData()
    a.ParseFromString(unpacked)
    b.ParseFromString(packed)
    assert list(a.ack_set) == list(b.ack_set) == [5, 7]
    assert unpacked == b"\x08\x01\x10\x02\x28\x05\x28\x07"


def _proto_enum(path: str):
    if "." in path:
        msg, name = path.split(".")
        return pb.DESCRIPTOR.message_types_by_name[msg].enum_types_by_name[name]
    return pb.DESCRIPTOR.enum_types_by_name[path]


@pytest.mark.parametrize(
    "ours,theirs",
    [
        (enums.CommandType, "BaseCommand.Type"),
        (enums.ServerError, "ServerError"),
        (enums.SubType, "CommandSubscribe.SubType"),
        (enums.InitialPosition, "CommandSubscribe.InitialPosition"),
        (enums.AckType, "CommandAck.AckType"),
        (enums.ValidationError, "CommandAck.ValidationError"),
        (enums.CompressionType, "CompressionType"),
        (enums.ProducerAccessMode, "ProducerAccessMode"),
        (enums.KeySharedMode, "KeySharedMode"),
        (enums.LookupType, "CommandLookupTopicResponse.LookupType"),
        (enums.PartitionedMetadataResult, "CommandPartitionedTopicMetadataResponse.LookupType"),
        (enums.TopicDomainMode, "CommandGetTopicsOfNamespace.Mode"),
        (enums.TxnAction, "TxnAction"),
        (enums.AuthMethod, "AuthMethod"),
        (enums.ResourceType, "CommandTopicMigrated.ResourceType"),
    ],
)
def test_int_enums_mirror_proto_names_and_values(ours, theirs):
    proto = _proto_enum(theirs)
    assert {m.name: m.value for m in ours} == {v.name: v.number for v in proto.values}


def test_schema_type_values_match_proto():
    proto = _proto_enum("Schema.Type")
    assert sorted(m.value for m in enums.SchemaType) == sorted(v.number for v in proto.values)
    assert enums.SchemaType.KEY_VALUE == proto.values_by_name["KeyValue"].number
    assert enums.SchemaType.PROTOBUF_NATIVE == proto.values_by_name["ProtobufNative"].number


def test_max_protocol_version_is_20():
    assert enums.MAX_PROTOCOL_VERSION == pb.v20
