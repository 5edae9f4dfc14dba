"""What the managed ledger keeps in the metadata store, and where.

Theory of operation: two kinds of nodes, JSON in Pulsar's field names (the
shape of ``/internal-info``), so an operator reading the store recognises them:

* ``/managed-ledgers/<name>`` -- :class:`MLInfo`: the ledger list (``ledgerId``,
  ``entries``, ``size``, ``timestamp``, ``isOffloaded``), ``terminatedPosition``
  when terminated, ``properties``.  Only the owner writes it, always with the
  version it last read (compare-and-set): a failed CAS means another broker
  owns the ledger now (the managed ledger becomes Fenced).
* ``/managed-ledgers/<name>/<cursor>`` -- :class:`CursorInfo`: the cursor ledger
  id (``cursorsLedgerId``, -1 = none yet), the last ``markDelete`` position
  written here (a fallback when the cursor ledger is unreadable), a bounded
  copy of the ``individualDeletedMessages`` (only when no cursor ledger is
  used) and ``properties``.  The full state lives in the cursor ledger
  (see :mod:`magnetar.managed_ledger.cursor_store`).

Cursor names are URL-quoted in paths (``/`` and ``%`` escaped) so any name is
one path segment.  The ``"kind"`` key tells the two node types apart when
listing (a topic name has slashes, so a ledger's children are cursors only).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

from magnetar.managed_ledger.api import LedgerInfo, Position
from magnetar.managed_ledger.offload import OffloadContext

ROOT = "/managed-ledgers"
ML_KIND = "managed-ledger"
CURSOR_KIND = "cursor"


def ledger_path(name: str) -> str:
    name = name.strip("/")
    if not name or "//" in name:
        raise ValueError(f"bad managed ledger name {name!r}")
    return f"{ROOT}/{name}"


def cursor_path(name: str, cursor: str) -> str:
    return f"{ledger_path(name)}/{quote(cursor, safe='')}"


def cursor_name_of(segment: str) -> str:
    return unquote(segment)


def _pos_json(p: Position) -> dict:
    return {"ledgerId": p.ledger_id, "entryId": p.entry_id}


def _pos_of(d: dict) -> Position:
    return Position(int(d["ledgerId"]), int(d["entryId"]))


@dataclass
class MLInfo:
    ledgers: list[LedgerInfo] = field(default_factory=list)
    terminated_position: Position | None = None
    properties: dict[str, str] = field(default_factory=dict)
    creation_ms: int = 0
    modification_ms: int = 0

    def encode(self) -> bytes:
        d: dict = {
            "kind": ML_KIND,
            "ledgers": [
                {
                    "ledgerId": li.ledger_id,
                    "entries": li.entries,
                    "size": li.size_bytes,
                    "timestamp": li.timestamp_ms,
                    "isOffloaded": li.offloaded,
                    **({"offloadContext": li.offload_context.to_json()} if li.offload_context else {}),
                }
                for li in self.ledgers
            ],
            "properties": self.properties,
            "creationDate": self.creation_ms,
            "modificationDate": self.modification_ms,
        }
        if self.terminated_position is not None:
            d["terminatedPosition"] = _pos_json(self.terminated_position)
        return json.dumps(d, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> MLInfo:
        d = json.loads(raw)
        if d.get("kind") != ML_KIND:
            raise ValueError("not a managed-ledger info node")
        ledgers = [
            LedgerInfo(
                ledger_id=int(x["ledgerId"]),
                entries=int(x.get("entries", 0)),
                size_bytes=int(x.get("size", 0)),
                timestamp_ms=int(x.get("timestamp", 0)),
                offloaded=bool(x.get("isOffloaded", False)),
                offload_context=OffloadContext.from_json(x["offloadContext"]) if x.get("offloadContext") else None,
            )
            for x in d.get("ledgers", [])
        ]
        tp = d.get("terminatedPosition")
        return cls(
            ledgers=ledgers,
            terminated_position=_pos_of(tp) if tp else None,
            properties=dict(d.get("properties", {})),
            creation_ms=int(d.get("creationDate", 0)),
            modification_ms=int(d.get("modificationDate", 0)),
        )


@dataclass
class CursorInfo:
    cursors_ledger_id: int = -1
    mark_delete: Position = Position(-1, -1)
    # Closed (first, last) acked pairs, only when no cursor ledger holds them.
    individual_deleted: list[tuple[Position, Position]] = field(default_factory=list)
    properties: dict[str, int] = field(default_factory=dict)
    last_active_ms: int = 0

    def encode(self) -> bytes:
        d = {
            "kind": CURSOR_KIND,
            "cursorsLedgerId": self.cursors_ledger_id,
            "markDelete": _pos_json(self.mark_delete),
            "individualDeletedMessages": [
                {"from": _pos_json(a), "to": _pos_json(b)} for a, b in self.individual_deleted
            ],
            "properties": self.properties,
            "lastActive": self.last_active_ms,
        }
        return json.dumps(d, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> CursorInfo:
        d = json.loads(raw)
        if d.get("kind") != CURSOR_KIND:
            raise ValueError("not a cursor info node")
        return cls(
            cursors_ledger_id=int(d.get("cursorsLedgerId", -1)),
            mark_delete=_pos_of(d["markDelete"]),
            individual_deleted=[
                (_pos_of(r["from"]), _pos_of(r["to"])) for r in d.get("individualDeletedMessages", [])
            ],
            properties={k: int(v) for k, v in d.get("properties", {}).items()},
            last_active_ms=int(d.get("lastActive", 0)),
        )
