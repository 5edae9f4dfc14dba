"""Metadata store: one interface (``api``), three backends, coordination recipes."""
