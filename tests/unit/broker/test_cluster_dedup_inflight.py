"""Deduplication of a resend whose first copy is still being stored (a client that reconnected
mid-add, e.g. after a broker failover): the resend is acknowledged as a duplicate only once the
first copy is stored; if that add fails, the resend fails too and the next resend is stored."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from magnetar.broker.service.dedup import DUPLICATE_POSITION, MessageDeduplication
from magnetar.managed_ledger.api import ManagedLedgerStorageError, Position
from magnetar.protocol.payload import build_headers_and_payload, new_message_metadata


def _msg(seq: int, producer: str = "p") -> bytes:
    md = new_message_metadata(producer_name=producer, sequence_id=seq, publish_time=1)
    return build_headers_and_payload(md, b"v%d" % seq)


class Storage:
    """The topic's add: each call returns a future the test completes."""

    def __init__(self) -> None:
        self.adds: list[asyncio.Future[Position]] = []

    def start(self) -> asyncio.Future[Position]:
        fut: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
        self.adds.append(fut)
        return fut


def _dedup() -> MessageDeduplication:
    return MessageDeduplication(SimpleNamespace(name="persistent://t/n/x"), cursor=None)  # type: ignore[arg-type]


async def test_resend_of_a_failed_first_copy_is_not_acknowledged_as_duplicate():
    dedup, storage = _dedup(), Storage()
    assert dedup.add("p", _msg(0), storage.start) is storage.adds[0]
    first = storage.adds[0]
    first.set_result(Position(1, 0))
    await asyncio.sleep(0)
    original = dedup.add("p", _msg(1), storage.start)  # on the old connection, still being stored
    resend = dedup.add("p", _msg(1), storage.start)  # the client reconnected and sent it again
    assert len(storage.adds) == 2, "a resend of an add in flight is not stored a second time"
    assert not resend.done(), "no receipt before the first copy is known to be stored"
    original.set_exception(ManagedLedgerStorageError("bookie lost"))
    await asyncio.sleep(0)
    with pytest.raises(ManagedLedgerStorageError):
        resend.result()  # before the fix: (-1, -1), i.e. acknowledged and never in the log
    again = dedup.add("p", _msg(1), storage.start)  # the client's next resend is stored
    assert len(storage.adds) == 3 and again is storage.adds[2]
    again.set_result(Position(1, 1))
    await asyncio.sleep(0)
    assert dedup.last_sequence_id("p") == 1


async def test_resend_of_a_stored_first_copy_is_a_duplicate_after_it():
    dedup, storage = _dedup(), Storage()
    original = dedup.add("p", _msg(0), storage.start)
    resend = dedup.add("p", _msg(0), storage.start)
    assert not resend.done()
    original.set_result(Position(1, 0))
    await asyncio.sleep(0)
    assert resend.result() == DUPLICATE_POSITION
    late = dedup.add("p", _msg(0), storage.start)  # already stored: answered at once
    assert late.done() and late.result() == DUPLICATE_POSITION
    assert len(storage.adds) == 1 and dedup.duplicates == 2


async def test_resend_follows_its_own_add_not_a_later_one():
    dedup, storage = _dedup(), Storage()
    first = dedup.add("p", _msg(0), storage.start)
    second = dedup.add("p", _msg(1), storage.start)
    resend = dedup.add("p", _msg(0), storage.start)
    second.set_result(Position(1, 1))  # a later add completing says nothing of seq 0
    await asyncio.sleep(0)
    assert not resend.done()
    first.set_exception(ManagedLedgerStorageError("write failed"))
    await asyncio.sleep(0)
    assert resend.exception() is not None
