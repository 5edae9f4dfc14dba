"""magnetar.web -- the broker's HTTP surface (admin REST v2, HTTP lookup, /metrics).

Theory of operation: :func:`magnetar.web.app.create_app` builds one FastAPI
application around a running ``BrokerService``.  Each resource family lives in
its own module with its own ``APIRouter`` (``lookup``, ``topics``,
``namespaces``, ``schemas``, ``brokers``, ``metrics``); handlers translate the
request into one service call and the service's answer into JSON -- they hold
no broker logic.  Errors leave through one place (``errors``): every broker
error carries its Pulsar HTTP status and becomes ``{"reason": ...}``.
The application runs inside the broker's own event loop (uvicorn's ``Server``
as a task), never in a thread or a second loop.
"""
