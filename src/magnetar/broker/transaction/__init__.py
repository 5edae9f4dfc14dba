"""Transactions (enabled by ``transactionCoordinatorEnabled=true``): exactly-once across topics
and subscriptions, as Apache Pulsar builds them.

Theory of operation -- four parts, each in its own module:

* :mod:`coordinator` -- one :class:`TransactionCoordinator` per partition ``i`` of
  ``persistent://pulsar/system/transaction_coordinator_assign`` (coordinator id ``i``: the
  high 64 bits of every transaction id it hands out).  It keeps each transaction's state
  (OPEN / COMMITTING / COMMITTED / ABORTING / ABORTED / TIMEOUT), the partitions it produced
  to and the subscriptions it acknowledged on, in a transaction log (a managed ledger,
  :mod:`log`) replayed after a crash.  Ending a transaction logs COMMITTING/ABORTING, tells
  every participant (END_TXN_ON_PARTITION / END_TXN_ON_SUBSCRIPTION), then logs the final
  state; a recovered COMMITTING/ABORTING transaction is driven to its end again.
* :mod:`buffer` -- the transaction buffer of one topic: transactional entries are stored in
  the topic's own ledger but dispatch never passes the first entry of the oldest open
  transaction (the max-read position); commit and abort write markers into the topic; the
  aborted-transaction index (kept in snapshots) filters aborted entries out.
* :mod:`pending_ack` -- acknowledgements in a transaction, per subscription: held (and logged
  on a managed ledger) until commit makes them effective or abort makes the messages
  available again; two transactions acknowledging one message -> TransactionConflict.
* :mod:`service` -- the broker-wide owner: creates the coordinator topic, loads coordinators,
  buffers and pending-ack handles, and carries the end of a transaction to the topics and
  subscriptions of this broker.

The wire handlers are in ``broker/service/handlers/txn.py``; the admin REST in
``web/transactions.py``.
"""
