"""Resource groups: ``/admin/v2/resourcegroups`` (Pulsar's ``admin.resourcegroups()``).

Theory of operation: each method builds one :class:`~magnetar.admin_client.core.Call`
and hands it to the executor (sync or async, see ``core``).  Create and
update are both ``PUT`` (the broker creates or updates); the body is the
shared :class:`~magnetar.common.rest_models.ResourceGroup` (or a mapping in
Pulsar's shape), whose unset fields are left out, so an update changes only
the rates it names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from magnetar.admin_client.core import Expect, Resource, call, seg

if TYPE_CHECKING:  # the REST bodies (pydantic) load only where one is built
    from magnetar.common.rest_models import ResourceGroup

BASE = "/admin/v2/resourcegroups"


class ResourceGroups(Resource):
    def list(self) -> Any:
        """Names of all resource groups."""
        return self._run(call("GET", BASE))

    def get(self, name: str) -> Any:
        """The ResourceGroup JSON of one group."""
        return self._run(call("GET", f"{BASE}/{seg(name)}"))

    def create(self, name: str, group: ResourceGroup | Mapping[str, Any]) -> Any:
        return self._run(call("PUT", f"{BASE}/{seg(name)}", body=group, expect=Expect.NONE))

    def update(self, name: str, group: ResourceGroup | Mapping[str, Any]) -> Any:
        """Change the rates ``group`` sets; the others keep their values."""
        return self._run(call("PUT", f"{BASE}/{seg(name)}", body=group, expect=Expect.NONE))

    def delete(self, name: str) -> Any:
        return self._run(call("DELETE", f"{BASE}/{seg(name)}", expect=Expect.NONE))
