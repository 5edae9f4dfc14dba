"""The bookie: BookKeeper's storage server (journal, entry logs, index, GC), its wire codec and server."""
