"""The ledger client: BookKeeper's client side (ledgers, quorums, fencing, recovery, auto-recovery)."""
