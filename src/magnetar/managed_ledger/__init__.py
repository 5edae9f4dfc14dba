"""The managed ledger: a topic's log as a list of ledgers, with cursors, caching and cleanup.

Modules: ``api`` (the interface the broker uses), ``factory`` (ManagedLedgerFactoryImpl: opens
ledgers by name, owns the shared entry ``cache``), ``ledger`` (ManagedLedgerImpl: open/recovery,
cursors, terminate, close, delete) with ``writer`` (pipelined adds, rollover, write failures),
``reads`` and ``positions`` (reading and position arithmetic over the ledger list), ``cursor``
(ManagedCursorImpl: acks, ranges, ack sets, moves, counts) with ``persister``, ``cursor_store``
and ``snapshot`` (durable cursor state), ``metadata`` and ``ledger_meta`` (the JSON nodes under
/managed-ledgers and their CAS writes), ``trimmer`` (retention, trimming, TTL), tiered storage:
``offload`` (the LedgerOffloader interface, policies, offload contexts), ``offload_format``
(data + index objects), ``offload_blob`` (fsspec drivers: filesystem, aws-s3), ``offload_process``
(when to offload, the deletion lag, status); ``counts`` (messages per entry), ``state`` (the state machines), ``stats``.
"""
