"""magnetar.broker.admin -- the admin service layer behind the REST API.

Theory of operation: the web handlers (``magnetar.web``) parse HTTP and call
one method here; all admin logic -- validation with Pulsar's status codes,
metadata updates, cursor operations, policy resolution and enforcement --
lives in this package, over a running ``BrokerService``:

* ``models.py``         -- pydantic models of Pulsar's JSON bodies (also the OpenAPI schema).
* ``policies.py``       -- the policy table (REST suffixes <-> stored fields) and value parsing.
* ``tenancy.py``        -- clusters and tenants.
* ``isolation.py``      -- failure domains and namespace-isolation policies (stored).
* ``namespaces.py``     -- namespace lifecycle, namespace policies, permissions, properties.
* ``topic_ops.py``      -- a topic's state: stats, subscriptions, unload, terminate; over
                           ``topic_resolve.py`` (which topics, fan-out), ``topic_cursor_ops.py``
                           (skip/clear/expire/reset) and ``topic_peek.py`` (peek/examine).
* ``topic_policies.py`` -- topic-level policies (metadata-store documents), the
                           effective-policy resolver and the enforcement loop.

* ``schemas.py``        -- schema registry REST operations (effective strategy) and compaction.
* ``brokers.py``        -- broker list/leader, dynamic configuration, bookies.
* ``resource_groups.py`` -- resource groups (create/update/delete, 412 on an unknown group).

The admission checks that read the resolved policies on the hot path live in the
service layer (``broker.service.admission`` over ``broker.service.policies.TopicPolicies``);
``broker.service`` never imports this package (an import-linter contract).

``service.AdminService(svc)`` bundles them; ``start()`` spawns the enforcement loop on
the broker's task supervisor (idempotent).

What is enforced (effective value = topic > namespace > broker default, applied
to live topics on every policy write and within 100 ms of a topic loading):
retention and persistence (managed-ledger config; a ledger that cannot be
created refuses producers with the cause), message TTL, backlog quota
(producer admission; connected producers dropped over producer_request_hold /
producer_exception quotas, so the client holds / fails its sends;
consumer_backlog_eviction -- by size, ``destination_storage``, and by the age of
the oldest unacknowledged message, ``message_age``/``limitTime``:
``backlog_age.py``), max topics per namespace (topic creation refused past it),
max producers / consumers / consumers per
subscription / subscriptions per topic, max unacked per consumer and per
subscription, publish rate (messages and bytes), dispatch rate per topic and
per subscription (messages and bytes), subscribe rate (per client host and
consumer name), topic max message size and encryption required (per SEND),
subscription expiration, deduplication snapshot interval, subscription types
enabled, auto subscription creation, delayed delivery on/off (new
dispatchers), inactive topic deletion, schema compatibility strategy, resource
groups (``resource_groups.py``: ``/admin/v2/resourcegroups``; the namespace's
``resource_group_name`` puts its topics under the group's shared publish and
dispatch rates, ``broker.service.resource_groups``).  Stored only: offload,
replication clusters, permissions (read by the auth layer from the same
document), entry filters, anti-affinity, failure domains and
namespace-isolation policies (``isolation.py``).  bookieAffinityGroup
places the namespace's new ledgers on the bookies of its groups (bookie groups set
through ``bookies/racks-info``; ``magnetar.bookkeeper.isolation``).
"""
