"""An authentication provider (static keys) and an authorization provider (topic prefixes)."""

from __future__ import annotations

from magnetar.broker.auth import AuthenticationError
from magnetar.broker.auth.providers import AuthResult
from magnetar.broker.plugins import AuthorizationProvider


class StaticKeyProvider:
    """Method ``static``: auth data ``key:<role>`` where key is ``exampleStaticKey``."""

    method_name = "static"

    def initialize(self, properties) -> None:
        self.key = properties.get("exampleStaticKey", "")
        if not self.key:
            raise ValueError("exampleStaticKey is not set")

    def authenticate(self, creds) -> AuthResult:
        key, _, role = creds.auth_data.decode(errors="replace").partition(":")
        if key != self.key or not role:
            raise AuthenticationError("Failed to authenticate: bad static key")
        return AuthResult(role=role, method=self.method_name)


class PrefixAuthorization(AuthorizationProvider):
    """A role may produce to and consume from topics whose local name starts with ``<role>-``."""

    def initialize(self, properties, service) -> None:
        self.service = service

    @staticmethod
    def _owned(role, topic: str) -> bool:
        return role is not None and topic.rsplit("/", 1)[-1].startswith(f"{role}-")

    async def can_produce(self, role, topic) -> bool:
        return self._owned(role, topic)

    async def can_consume(self, role, topic, subscription) -> bool:
        return self._owned(role, topic)
