"""magnetar.broker -- the Pulsar broker: connections, topics, producers, subscriptions.

Layout (each module opens with its own theory of operation):

* ``config.py``      -- frozen :class:`BrokerConfig` (Pulsar key names -> snake_case fields),
                        ``load_config_file(path)``, ``parse_properties(text)``, ``with_overrides``.
* ``schema/``        -- the schema registry (its own package and docstring).
* ``errors.py``      -- typed broker errors, each with a wire ``ServerError`` code and an
                        ``http_status``; the one place internal errors become wire/HTTP codes.
* ``resources/``     -- typed views of metadata paths (clusters, tenants, namespaces,
                        partitioned-topic metadata) and ``initialize_cluster(...)``.
* ``service/``       -- :class:`BrokerService`, connections, per-family command handlers,
                        topics, producers, subscriptions, dispatchers, consumers, stats.

The service API (what ``app``/``web``/``cli`` call)
====================================================

::

    from magnetar.broker.config import BrokerConfig, load_config_file
    from magnetar.broker.service import BrokerService
    from magnetar.broker import errors

    svc = BrokerService(config, metadata_store, ml_factory, clock, rng)
    server = await svc.serve(host, port)   # binds the binary port (0 = pick one); returns asyncio.Server
    svc.broker_port                        # the bound binary port (after serve)
    await svc.serve_tls(host, port_tls)    # optional TLS listener (tlsCertificateFilePath/tlsKeyFilePath
    svc.broker_port_tls                    #  keys); lookups then also answer brokerServiceUrlTls
    svc.set_web_service_port(web_port)     # the bound HTTP port, used in lookup answers / cluster data
    await svc.start()                      # idempotent: creates cluster/tenant/namespaces on first start
                                           # (cluster `config.cluster_name`, tenant `public`,
                                           #  namespaces `public/default`, `pulsar/system`)
    ...
    await svc.aclose()                     # idempotent: stops accepting, closes every connection
                                           # (producers/consumers), closes topics and managed ledgers

    # Alternatively drive connections yourself: ``await svc.handle_connection(reader, writer)``.

Service calls for the HTTP layer (all coroutines unless noted; names are Pulsar-style strings
such as ``"persistent://public/default/t"`` or a short ``"t"``; they raise ``errors.BrokerError``
subclasses which carry ``.http_status`` and ``.message``):

* ``await svc.lookup_topic(topic, authoritative=False) -> LookupResult`` -- the bundle owner's
  URLs and whether to go there (``redirect``); see ``broker.ownership`` (bundles, ownership,
  the cluster's redirects).  ``svc.namespace_service`` is that service.
* ``await svc.lookup(topic) -> dict`` -- the owner's ``{"brokerUrl", "brokerUrlTls", "httpUrl", "httpUrlTls",
  "nativeUrl"}``; ``brokerUrlTls`` is the TLS URL once ``serve_tls`` ran, else ``None``;
  ``httpUrlTls`` is ``None`` (keys always present).
  Raises NamespaceNotFound (404) for an unknown tenant/namespace.
* ``await svc.get_partitioned_metadata(topic, check_allow_auto_creation=False) -> int`` --
  0 for non-partitioned / absent; with ``check_allow_auto_creation=True`` and
  ``allowAutoTopicCreationType=partitioned`` it creates the metadata.
* ``await svc.create_partitioned_topic(topic, num_partitions)`` -- 409 PartitionedTopicAlreadyExists /
  412 InvalidTopicName (name has ``-partition-``) / 406 InvalidPartitionCount.
* ``await svc.create_non_partitioned_topic(topic)`` -- 409 if it (or a partitioned one) exists.
* ``await svc.update_partitioned_topic(topic, num_partitions)`` -- only grows; 422 otherwise.
* ``await svc.list_topics(namespace, mode="PERSISTENT") -> list[str]`` -- full names, partitions
  included, system topics excluded; mode ``PERSISTENT``/``NON_PERSISTENT``/``ALL``.
* ``await svc.list_partitioned_topics(namespace) -> list[str]`` -- base names.
* ``await svc.delete_topic(topic, force=False)`` -- 404 if absent, 409 if partitioned,
  412 with active producers/consumers unless ``force`` (then they get CLOSE_PRODUCER/CLOSE_CONSUMER).
* ``await svc.delete_partitioned_topic(topic, force=False)`` -- metadata and every partition.
* What the admin API reads and does to a topic's state is ``broker.admin.topic_ops.TopicOps``
  (``AdminService(svc).topics``), not the service: ``unload_topic(topic)`` (clients reconnect),
  ``topic_stats(topic)`` (Pulsar TopicStats field names: msgInCounter, bytesInCounter,
  msgOutCounter, bytesOutCounter, storageSize, publishers[...], subscriptions{name: {msgBacklog,
  unackedMessages, type, consumers[...], isDurable, ...}}; 404 TopicNotFound if absent),
  ``partitioned_topic_stats(topic, per_partition=True)``, ``internal_stats(topic)``,
  ``list_subscriptions(topic)``, and the subscription / cursor / peek / terminate operations.
* ``svc.resources`` -- :class:`magnetar.broker.resources.BrokerResources`:
  ``.clusters``, ``.tenants``, ``.namespaces``, ``.partitioned_topics`` (typed async views with
  ``get/create/update/delete/list`` -- see their docstrings); the admin REST for
  tenants/namespaces/clusters uses these directly.
* ``svc.authentication`` / ``svc.authorization`` -- the ``broker.auth`` services built from the
  same config (authenticationEnabled, authorizationEnabled, superUserRoles, token keys...);
  the binary protocol uses them per connection (``service/security.py``); the HTTP middleware
  can share them.
* ``svc.schemas`` -- the :class:`magnetar.broker.schema.SchemaRegistry` the binary protocol uses
  (PRODUCER/SUBSCRIBE/GET_SCHEMA); the schema REST routes use the same instance.
* ``svc.config`` -- the BrokerConfig; ``svc.statistics()`` -- connection/topic counts.

Stats rates (``msgRateIn``/``msgThroughputIn``/``msgRateOut``...) are sampled every
``statsUpdateFrequencyInSecs`` (default 60), as Pulsar's are; counters are exact at all times.
"""
