from __future__ import annotations

from magnetar.broker import errors
from magnetar.managed_ledger import api as ml
from magnetar.metadata import api as md


def test_translate_maps_lower_layers_to_wire_codes() -> None:
    assert errors.translate(ml.ManagedLedgerFencedError("x")).server_error == errors.Code.ServiceNotReady
    assert (
        errors.translate(ml.ManagedLedgerTerminatedError("x")).server_error
        == errors.Code.TopicTerminatedError
    )
    assert errors.translate(ml.ManagedLedgerStorageError("x")).server_error == errors.Code.PersistenceError
    assert errors.translate(ml.CursorNotFoundError("x")).server_error == errors.Code.SubscriptionNotFound
    assert errors.translate(md.BadVersion("x")).server_error == errors.Code.MetadataError
    assert errors.translate(md.ConnectionLoss("x")).server_error == errors.Code.ServiceNotReady
    assert errors.translate(TimeoutError()).server_error == errors.Code.ServiceNotReady
    e = errors.translate(ValueError("boom"))
    assert e.server_error == errors.Code.UnknownError and "boom" in e.message
    own = errors.ConsumerBusyError("busy")
    assert errors.translate(own) is own


def test_http_statuses() -> None:
    assert errors.NamespaceNotFoundError("x").http_status == 404
    assert errors.AlreadyExistsError("x").http_status == 409
    assert errors.PreconditionFailedError("x").http_status == 412
    assert errors.InvalidPartitionCountError("x").http_status == 406
