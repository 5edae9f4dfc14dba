"""magnetar.broker.admin -- the admin service layer behind the REST API.

Theory of operation: the web handlers (``magnetar.web``) parse HTTP and call
one method here; all admin logic -- validation with Pulsar's status codes,
metadata updates, cursor operations, policy resolution and enforcement --
lives in this package, over a running ``BrokerService``:

* ``models.py``         -- pydantic models of Pulsar's JSON bodies (also the OpenAPI schema).
* ``policies.py``       -- the policy table (REST suffixes <-> stored fields) and value parsing.
* ``tenancy.py``        -- clusters and tenants.
* ``namespaces.py``     -- namespace lifecycle, namespace policies, permissions, properties.
* ``topic_ops.py``      -- subscriptions, skip/clear/expire/reset, peek/examine, terminate.
* ``topic_policies.py`` -- topic-level policies (metadata-store documents), the
                           effective-policy resolver and the enforcement loop.

* ``schemas.py``        -- schema registry REST operations (effective strategy) and compaction.
* ``brokers.py``        -- broker list/leader, dynamic configuration, bookies.
* ``admission.py``      -- the producer/consumer admission checks the broker's
                           handlers call (imports nothing of the service).

``service.AdminService(svc)`` bundles them; ``start()`` spawns the enforcement loop on
the broker's task supervisor (idempotent).
"""
