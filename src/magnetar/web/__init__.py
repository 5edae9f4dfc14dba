"""magnetar.web -- the broker's HTTP surface (admin REST v2, HTTP lookup, /metrics).

Theory of operation: :func:`magnetar.web.app.create_app` builds one FastAPI
application around a running ``BrokerService``.  Each resource family lives in
its own module with its own ``APIRouter`` (``lookup``, ``tenancy`` (clusters,
tenants), ``namespaces`` (lifecycle + one generated route triple per policy),
``topics`` (partition metadata), ``topic_admin`` (stats, subscriptions, cursor
operations, peek, terminate, compaction), ``topic_policies``, ``schemas``,
``brokers`` (health, broker list, dynamic config, bookies), ``metrics``);
handlers translate the request into one call of the broker service or of the
admin service layer (``magnetar.broker.admin``, on ``app.state.admin``) and
the answer into JSON -- they hold no broker logic.  Bodies are typed pydantic
models, so ``/openapi.json`` describes every route.  Every path parameter
passes Pulsar's name rule first (``deps.validate_path_names``, 412).  Errors leave through one place (``errors``): every broker
error carries its Pulsar HTTP status and becomes ``{"reason": ...}``.
The application runs inside the broker's own event loop (uvicorn's ``Server``
as a task), never in a thread or a second loop, behind ``front``: a plain-ASGI
front that serves ``/metrics``, HTTP lookup, the readiness probe and the
WebSocket API without FastAPI and builds the FastAPI app on the first request
that needs it (start-up time and idle memory).
"""
