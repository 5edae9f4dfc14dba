"""The credentials an instance presents to the broker and to the worker's REST API.

Theory of operation: a worker's instances talk to the broker (consume, produce)
and to the worker's REST API (state, the output topic's deduplication policy).
When the cluster has ``authenticationEnabled`` they must authenticate, as
Pulsar's instances do with the worker's ``clientAuthenticationPlugin`` /
``clientAuthenticationParameters`` (in a standalone, the broker's
``brokerClientAuthenticationPlugin`` / ``...Parameters``; the role should be a
super-user, or an admin of the functions' tenants).

:class:`ClientAuth` carries the two strings as given (so the process runtime
writes them into the instance's spec and the child builds the same thing);
it turns them, with the admin client's parser (token ``token:<jwt>`` /
``file://path`` / JSON, basic ``{"userId", "password"}``, TLS
``tlsCertFile:..,tlsKeyFile:..``), into the broker client's
``Authentication`` and the HTTP headers of REST calls.  A bad pair fails when
the worker starts (:meth:`ClientAuth.check`), not in every instance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from magnetar.admin_client.auth import BasicAuth, TlsAuth, TokenAuth, auth_from_plugin
from magnetar.client import Authentication, AuthenticationBasic, AuthenticationTLS, AuthenticationToken


@dataclass(frozen=True)
class ClientAuth:
    plugin: str = ""
    params: str = ""

    @classmethod
    def from_json(cls, doc: Any) -> ClientAuth:
        if not isinstance(doc, dict):
            return cls()
        return cls(str(doc.get("plugin") or ""), str(doc.get("params") or ""))

    def to_json(self) -> dict[str, str]:
        return {"plugin": self.plugin, "params": self.params}

    def _provider(self) -> Any:
        if not self.plugin and not self.params:
            return None
        return auth_from_plugin(self.plugin, self.params)

    def check(self) -> None:
        """Raise ``InvalidArgument`` now if the plugin or params cannot be used."""
        self._provider()

    def http_headers(self) -> dict[str, str]:
        provider = self._provider()
        return dict(provider.http_headers()) if provider is not None else {}

    def client_authentication(self) -> Authentication | None:
        provider = self._provider()
        if provider is None:
            return None
        if isinstance(provider, TokenAuth):
            return AuthenticationToken(provider.token)
        if isinstance(provider, BasicAuth):
            return AuthenticationBasic(provider.user_id, provider.password)
        if isinstance(provider, TlsAuth):
            return AuthenticationTLS(provider.cert_file, provider.key_file)
        raise ValueError(f"unsupported client auth plugin {self.plugin!r}")


NO_AUTH = ClientAuth()
