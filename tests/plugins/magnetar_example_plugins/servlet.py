"""An additional servlet at /example: hello, and the counting interceptor's counts."""

from __future__ import annotations

from fastapi import FastAPI

from magnetar.broker.plugins import AdditionalServlet


class HelloServlet(AdditionalServlet):
    base_path = "/example"

    def initialize(self, properties) -> None:
        self.greeting = properties.get("exampleGreeting", "hello")

    def asgi_app(self, service):
        app = FastAPI()

        @app.get("/hello")
        async def hello() -> dict:
            return {"greeting": self.greeting, "cluster": service.config.cluster_name}

        @app.get("/counts")
        async def counts() -> dict:
            ic = getattr(service, "example_interceptor", None)
            return dict(ic.counts) if ic is not None else {}

        return app
