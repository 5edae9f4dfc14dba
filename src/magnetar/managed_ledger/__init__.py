"""The managed ledger: a topic's log as a list of ledgers, with cursors, caching and cleanup."""
