"""Tenants: ``/admin/v2/tenants`` (admin roles and allowed clusters).

Theory of operation: as for every resource family, methods only build calls;
the executor decides whether they run sync or async (see ``core``).
``TenantInfo`` bodies are ``{"adminRoles": [...], "allowedClusters": [...]}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

from magnetar.admin_client.core import Expect, Resource, call, seg

if TYPE_CHECKING:  # the bodies (pydantic) are imported where one is built, not by this module
    from magnetar.admin_client.models import TenantInfo

BASE = "/admin/v2/tenants"

TenantBody: TypeAlias = "TenantInfo | Mapping[str, Any]"


class Tenants(Resource):
    def list(self) -> Any:
        """Sorted tenant names."""
        return self._run(call("GET", BASE))

    def get(self, tenant: str) -> Any:
        """TenantInfo JSON."""
        return self._run(call("GET", f"{BASE}/{seg(tenant)}"))

    def create(self, tenant: str, info: TenantBody) -> Any:
        return self._run(call("PUT", f"{BASE}/{seg(tenant)}", body=info, expect=Expect.NONE))

    def update(self, tenant: str, info: TenantBody) -> Any:
        return self._run(call("POST", f"{BASE}/{seg(tenant)}", body=info, expect=Expect.NONE))

    def delete(self, tenant: str, *, force: bool = False) -> Any:
        params = {"force": True} if force else None
        return self._run(call("DELETE", f"{BASE}/{seg(tenant)}", params=params, expect=Expect.NONE))
