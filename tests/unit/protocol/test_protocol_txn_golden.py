"""Golden frames for the transaction commands: what our codec encodes decodes, field for field,
with the official protocol definitions -- the field numbers, types and labels of PulsarApi.proto
as tabulated in the protocol reference (``/work/shared/reference/pulsar-api-fields.md``).

The decoder here is independent of ``magnetar.proto``: a plain protobuf wire-format reader
driven by the reference tables (field number -> name, scalar type or nested message).  Each
frame is also compared byte for byte with a frame encoded here from the reference numbers
(proto2 writes present fields in field-number order), so a renumbered or mistyped field in our
.proto fails the test even if our own encode/decode agree with each other.
"""

from __future__ import annotations

import pathlib
import re
import struct

import pytest

from magnetar.protocol import client_commands as cc
from magnetar.protocol import server_commands as sc
from magnetar.protocol.enums import CommandType as T
from magnetar.protocol.enums import ServerError, TxnAction
from magnetar.protocol.message_id import MessageId
from magnetar.protocol.payload import parse_headers_and_payload
from magnetar.protocol.txn_markers import TXN_ABORT, TXN_COMMIT, txn_marker

REFERENCE = pathlib.Path("/work/shared/reference/pulsar-api-fields.md")
ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*`(\w+)`\s*\|\s*`([\w.]+)`\s*\|\s*(\w+)\s*\|")
SCALARS = {"uint64", "int64", "uint32", "int32", "bool", "string", "bytes", "sint64", "double", "fixed64"}

MOST, LEAST = 3, (1 << 40) + 5  # a least-bits value that needs a 6-byte varint


def _reference() -> dict[str, dict[int, tuple[str, str, str]]]:
    if not REFERENCE.exists():
        pytest.skip("protocol reference not available")
    tables: dict[str, dict[int, tuple[str, str, str]]] = {}
    current = None
    for line in REFERENCE.read_text().splitlines():
        if line.startswith("### "):
            current = line[4:].strip()
            tables.setdefault(current, {})
        elif current and (m := ROW.match(line)):
            tables[current][int(m.group(1))] = (m.group(2), m.group(3), m.group(4))
    return tables


REF = _reference() if REFERENCE.exists() else {}


# ---------------------------------------------------------------- independent wire codec
def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def decode(buf: bytes, message: str) -> dict:
    """Decode ``buf`` as ``message`` using only the reference table."""
    table = REF[message]
    out: dict = {}
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        assert number in table, f"{message}: field {number} is not in the official definition"
        name, typ, label = table[number]
        if wire == 0:
            value, i = _varint(buf, i)
            if typ == "bool":
                value = bool(value)
        elif wire == 2:
            n, i = _varint(buf, i)
            raw = buf[i : i + n]
            i += n
            if typ == "string":
                value = raw.decode()
            elif typ == "bytes":
                value = raw
            elif typ in SCALARS:
                raise AssertionError(f"{message}.{name}: packed scalars not expected")
            else:
                value = decode(raw, typ.rsplit(".", 1)[-1])
        elif wire == 1:
            value = struct.unpack_from("<Q", buf, i)[0]
            i += 8
        else:
            raise AssertionError(f"{message}.{name}: unexpected wire type {wire}")
        nested = typ.rsplit(".", 1)[-1] in REF
        expected_wire = (
            2 if typ in ("string", "bytes") or nested else 1 if typ in ("fixed64", "double") else 0
        )
        assert wire == expected_wire, (
            f"{message}.{name}: wire type {wire}, the definition says {expected_wire}"
        )
        if label == "repeated":
            out.setdefault(name, []).append(value)
        else:
            assert name not in out, f"{message}.{name} twice"
            out[name] = value
    return out


def _enc_varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode(message: str, fields: dict) -> bytes:
    """Encode ``fields`` (names) as ``message`` in field-number order, from the reference."""
    table = REF[message]
    by_name = {name: (num, typ, label) for num, (name, typ, label) in table.items()}
    out = bytearray()
    for name in sorted(fields, key=lambda n: by_name[n][0]):
        num, typ, label = by_name[name]
        values = fields[name] if label == "repeated" else [fields[name]]
        for v in values:
            if typ in REF:
                body = encode(typ, v)
                out += _enc_varint(num << 3 | 2) + _enc_varint(len(body)) + body
            elif typ in ("string", "bytes"):
                body = v.encode() if isinstance(v, str) else v
                out += _enc_varint(num << 3 | 2) + _enc_varint(len(body)) + body
            else:
                out += _enc_varint(num << 3) + _enc_varint(int(v))
    return bytes(out)


def split_frame(frame: bytes) -> tuple[bytes, bytes]:
    total, cmd_size = struct.unpack_from(">II", frame)
    assert total == len(frame) - 4
    return frame[8 : 8 + cmd_size], frame[8 + cmd_size :]


def base_field(command_type: T) -> str:
    name, typ, _ = REF["BaseCommand"][int(command_type)]
    return name


# ---------------------------------------------------------------- the commands
SUB_A = {"topic": "persistent://public/default/in-partition-1", "subscription": "xform"}
CASES = [
    (T.TC_CLIENT_CONNECT_REQUEST, cc.tc_client_connect_request(11, 3), {"request_id": 11, "tc_id": 3}),
    (T.TC_CLIENT_CONNECT_RESPONSE, sc.tc_client_connect_response(11), {"request_id": 11}),
    (
        T.TC_CLIENT_CONNECT_RESPONSE,
        sc.tc_client_connect_response(12, ServerError.TransactionCoordinatorNotFound, "no tc 9"),
        {"request_id": 12, "error": int(ServerError.TransactionCoordinatorNotFound), "message": "no tc 9"},
    ),
    (
        T.NEW_TXN,
        cc.new_txn(13, txn_ttl_ms=45_000, tc_id=1),
        {"request_id": 13, "txn_ttl_seconds": 45_000, "tc_id": 1},
    ),
    (
        T.NEW_TXN_RESPONSE,
        sc.new_txn_response(13, LEAST, MOST),
        {"request_id": 13, "txnid_least_bits": LEAST, "txnid_most_bits": MOST},
    ),
    (
        T.NEW_TXN_RESPONSE,
        sc.new_txn_response(14, error=ServerError.TransactionCoordinatorNotFound, message="closed"),
        {"request_id": 14, "error": int(ServerError.TransactionCoordinatorNotFound), "message": "closed"},
    ),
    (
        T.ADD_PARTITION_TO_TXN,
        cc.add_partition_to_txn(15, LEAST, MOST, ["persistent://a/b/c", "persistent://a/b/d-partition-0"]),
        {
            "request_id": 15,
            "txnid_least_bits": LEAST,
            "txnid_most_bits": MOST,
            "partitions": ["persistent://a/b/c", "persistent://a/b/d-partition-0"],
        },
    ),
    (
        T.ADD_PARTITION_TO_TXN_RESPONSE,
        sc.txn_op_response(T.ADD_PARTITION_TO_TXN_RESPONSE, 15, LEAST, MOST),
        {"request_id": 15, "txnid_least_bits": LEAST, "txnid_most_bits": MOST},
    ),
    (
        T.ADD_SUBSCRIPTION_TO_TXN,
        cc.add_subscription_to_txn(
            16, LEAST, MOST, [(SUB_A["topic"], "xform"), ("persistent://x/y/z", "s2")]
        ),
        {
            "request_id": 16,
            "txnid_least_bits": LEAST,
            "txnid_most_bits": MOST,
            "subscription": [SUB_A, {"topic": "persistent://x/y/z", "subscription": "s2"}],
        },
    ),
    (
        T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE,
        sc.txn_op_response(
            T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE,
            16,
            LEAST,
            MOST,
            error=ServerError.InvalidTxnStatus,
            message="ending",
        ),
        {
            "request_id": 16,
            "txnid_least_bits": LEAST,
            "txnid_most_bits": MOST,
            "error": int(ServerError.InvalidTxnStatus),
            "message": "ending",
        },
    ),
    (
        T.END_TXN,
        cc.end_txn(17, LEAST, MOST, TxnAction.COMMIT),
        {"request_id": 17, "txnid_least_bits": LEAST, "txnid_most_bits": MOST, "txn_action": 0},
    ),
    (
        T.END_TXN_RESPONSE,
        sc.txn_op_response(
            T.END_TXN_RESPONSE, 17, LEAST, MOST, error=ServerError.TransactionNotFound, message="gone"
        ),
        {
            "request_id": 17,
            "txnid_least_bits": LEAST,
            "txnid_most_bits": MOST,
            "error": int(ServerError.TransactionNotFound),
            "message": "gone",
        },
    ),
    (
        T.END_TXN_ON_PARTITION,
        cc.end_txn_on_partition(18, LEAST, MOST, "persistent://a/b/c", TxnAction.ABORT),
        {
            "request_id": 18,
            "txnid_least_bits": LEAST,
            "txnid_most_bits": MOST,
            "topic": "persistent://a/b/c",
            "txn_action": 1,
        },
    ),
    (
        T.END_TXN_ON_PARTITION_RESPONSE,
        sc.txn_op_response(T.END_TXN_ON_PARTITION_RESPONSE, 18, LEAST, MOST),
        {"request_id": 18, "txnid_least_bits": LEAST, "txnid_most_bits": MOST},
    ),
    (
        T.END_TXN_ON_SUBSCRIPTION,
        cc.end_txn_on_subscription(19, LEAST, MOST, SUB_A["topic"], "xform", TxnAction.COMMIT),
        {
            "request_id": 19,
            "txnid_least_bits": LEAST,
            "txnid_most_bits": MOST,
            "subscription": SUB_A,
            "txn_action": 0,
        },
    ),
    (
        T.END_TXN_ON_SUBSCRIPTION_RESPONSE,
        sc.txn_op_response(
            T.END_TXN_ON_SUBSCRIPTION_RESPONSE,
            19,
            LEAST,
            MOST,
            error=ServerError.TransactionConflict,
            message="c",
        ),
        {
            "request_id": 19,
            "txnid_least_bits": LEAST,
            "txnid_most_bits": MOST,
            "error": int(ServerError.TransactionConflict),
            "message": "c",
        },
    ),
    (
        T.ACK,
        cc.ack(
            7,
            cc.AckType.Individual,
            [MessageId(5, 9)],
            txnid_least_bits=LEAST,
            txnid_most_bits=MOST,
            request_id=20,
        ),
        {
            "consumer_id": 7,
            "ack_type": 0,
            "message_id": [{"ledgerId": 5, "entryId": 9}],
            "txnid_least_bits": LEAST,
            "txnid_most_bits": MOST,
            "request_id": 20,
        },
    ),
    (
        T.ACK,
        cc.ack(
            7,
            cc.AckType.Individual,
            [MessageId(5, 10, batch_size=4, ack_set=(0b1011,))],
            txnid_least_bits=LEAST,
            txnid_most_bits=MOST,
            request_id=21,
        ),
        {
            "consumer_id": 7,
            "ack_type": 0,
            "message_id": [{"ledgerId": 5, "entryId": 10, "ack_set": [0b1011], "batch_size": 4}],
            "txnid_least_bits": LEAST,
            "txnid_most_bits": MOST,
            "request_id": 21,
        },
    ),
]


@pytest.mark.parametrize("kind,frame,fields", CASES, ids=[f"{c[0].name}-{i}" for i, c in enumerate(CASES)])
def test_txn_command_decodes_field_for_field(kind, frame, fields):
    cmd, rest = split_frame(frame)
    assert rest == b""
    base = decode(cmd, "BaseCommand")
    assert base["type"] == int(kind)
    sub_name = base_field(kind)
    assert set(base) == {"type", sub_name}
    sub_type = REF["BaseCommand"][int(kind)][1]
    assert base[sub_name] == fields
    # byte for byte: the official numbering, proto2 field order
    assert cmd == encode("BaseCommand", {"type": int(kind), sub_name: fields}), sub_type


def test_every_txn_command_type_is_covered():
    txn_kinds = {t for t in T if "TXN" in t.name or t.name.startswith("TC_CLIENT")}
    assert txn_kinds <= {c[0] for c in CASES}


def test_transactional_send_and_marker_metadata():
    from magnetar.protocol.payload import build_headers_and_payload, new_message_metadata

    meta = new_message_metadata(
        producer_name="p", sequence_id=4, publish_time=1000, txnid_most_bits=MOST, txnid_least_bits=LEAST
    )
    frame = cc.send(
        2, 4, build_headers_and_payload(meta, b"hello"), txnid_least_bits=LEAST, txnid_most_bits=MOST
    )
    cmd, rest = split_frame(frame)
    base = decode(cmd, "BaseCommand")
    assert base["send"] == {
        "producer_id": 2,
        "sequence_id": 4,
        "txnid_least_bits": LEAST,
        "txnid_most_bits": MOST,
    }
    parsed_meta, payload = _metadata_of(rest)
    assert payload == b"hello"
    assert parsed_meta["txnid_most_bits"] == MOST and parsed_meta["txnid_least_bits"] == LEAST
    for commit, marker in ((True, TXN_COMMIT), (False, TXN_ABORT)):
        meta, payload = _metadata_of(txn_marker(commit, MOST, LEAST, 0, 1234))
        assert payload == b""
        assert meta == {
            "producer_name": "pulsar.txn.marker",
            "sequence_id": 0,
            "publish_time": 1234,
            "marker_type": marker,
            "txnid_least_bits": LEAST,
            "txnid_most_bits": MOST,
        }


def _metadata_of(headers_and_payload: bytes) -> tuple[dict, bytes]:
    assert headers_and_payload[:2] == b"\x0e\x01"
    (size,) = struct.unpack_from(">I", headers_and_payload, 6)
    meta = decode(headers_and_payload[10 : 10 + size], "MessageMetadata")
    parse_headers_and_payload(headers_and_payload)  # our own parser agrees (CRC checked)
    return meta, headers_and_payload[10 + size :]
