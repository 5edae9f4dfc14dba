"""The broker service: connections, command handlers, topics, subscriptions, dispatchers.

See ``magnetar.broker`` for the service API; :class:`BrokerService` is the entry point.
"""

from magnetar.broker.service.broker_service import BrokerService

__all__ = ["BrokerService"]
