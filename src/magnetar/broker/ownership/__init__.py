"""Bundle ownership: which broker serves which topics (Pulsar's NamespaceService).

* ``bundles.py``    -- hash ranges of topic names (crc32), boundaries, split.
* ``registry.py``   -- broker registration under ``/loadbalance/brokers``, the leader.
* ``ownership.py``  -- one ephemeral lock per bundle under ``/namespace``.
* ``placement.py``  -- which live broker takes an unowned bundle.
* ``api.py``        -- LookupResult, NotOwnedHere, the NamespaceService face.
* ``local.py``      -- the standalone: one broker owns everything.
* ``cluster.py``    -- the cluster: lookup, redirect, unload, split, failover.
"""
