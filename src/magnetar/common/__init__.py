"""Layer-0 building blocks with no I/O: ``naming`` (TopicName, NamespaceName),
``errors`` (MagnetarError and the name errors), ``murmur3`` (Key_Shared
hashing), ``rangeset`` (ack holes), ``backoff`` (retry delays).  Import the
modules directly; this package re-exports nothing."""
