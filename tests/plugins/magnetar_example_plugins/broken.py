"""An interceptor that fails at start-up (the broker must refuse to start, saying why)."""

from magnetar.broker.interceptors import BrokerInterceptor


class BrokenInterceptor(BrokerInterceptor):
    def initialize(self, service) -> None:
        raise RuntimeError("example-broken cannot start: no licence key")
