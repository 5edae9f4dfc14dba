"""Geo-replication: replicators between clusters, their stats, replicated subscriptions.

Theory of operation: see :mod:`.service` (which topics replicate where),
:mod:`.replicator` (one topic towards one remote cluster, through its own
cursor), :mod:`.remote` (the producer on the remote cluster, spoken in the
binary protocol), :mod:`.stats` (the ``replication`` stats section and
metrics).  The configuration store the clusters share is
:mod:`magnetar.metadata.routing`, wired by the composition root.
"""
