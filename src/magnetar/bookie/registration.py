"""Cookies and registration: who this bookie is, and telling the cluster it is up.

Theory of operation (BookKeeper's Cookie + RegistrationManager):

* A **cookie** binds a bookie id to its directories.  It holds the bookie id,
  the journal and ledger directories and a random *instance id*, and is
  stored twice: in the metadata store at ``COOKIES_PATH/{bookie_id}`` and as
  a file ``current/cookie`` in every journal/ledger directory.  On start
  (:meth:`Registration.check_cookie`):

  - nothing anywhere: a brand-new bookie; the files are written first, then
    the metadata cookie (create-if-absent, so two bookies racing for one id
    cannot both win);
  - metadata cookie and every directory cookie agree (same instance id, same
    bookie id, same directory list): start;
  - anything else refuses to start with :class:`CookieMismatchError` naming
    the directory and what it holds: a directory with another bookie's
    cookie (someone else's disks), a registered bookie whose directory lost
    its cookie (wiped or wrong disk), a directory cookie with no metadata
    cookie (the metadata was lost or this is the wrong cluster), or a
    directory list that differs from the one registered.

* **Registration**: an ephemeral node ``AVAILABLE_PATH/{bookie_id}`` while
  writable, ``READONLY_PATH/{bookie_id}`` while read-only (the other one is
  removed).  The value is JSON with the bookie's address and state.  A node
  left by our previous incarnation's session (after a crash, before its
  session expired) is waited out, within a timeout.  After a session loss the
  store reconnects with a new session and :meth:`on_session_event` registers
  again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from dataclasses import asdict, dataclass

from magnetar.bookie.api import AVAILABLE_PATH, COOKIES_PATH, READONLY_PATH, BookieError
from magnetar.bookie.disk import Disk
from magnetar.metadata.api import AlreadyExists, BadVersion, MetadataStore, NotFound, SessionEvent
from magnetar.runtime import BlockingExecutor, Clock, Rng, TaskSupervisor

log = logging.getLogger(__name__)

COOKIE_FILE = "cookie"
_STALE_NODE_WAIT_S = 60.0


class CookieMismatchError(BookieError):
    """The bookie's identity and its directories disagree; it must not start."""


@dataclass(frozen=True, slots=True)
class Cookie:
    bookie_id: str
    journal_dir: str
    ledger_dirs: tuple[str, ...]
    instance_id: str
    layout_version: int = 1

    def encode(self) -> bytes:
        d = asdict(self)
        d["ledger_dirs"] = list(self.ledger_dirs)
        return json.dumps(d, sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes) -> Cookie:
        d = json.loads(data)
        return cls(
            bookie_id=d["bookie_id"],
            journal_dir=d["journal_dir"],
            ledger_dirs=tuple(d["ledger_dirs"]),
            instance_id=d["instance_id"],
            layout_version=int(d.get("layout_version", 1)),
        )


class Registration:
    def __init__(
        self,
        store: MetadataStore,
        bookie_id: str,
        journal_dir: str,
        ledger_dirs: tuple[str, ...],
        *,
        disk: Disk,
        executor: BlockingExecutor,
        clock: Clock,
        rng: Rng,
        supervisor: TaskSupervisor,
    ) -> None:
        self._store = store
        self.bookie_id = bookie_id
        self._journal_dir = os.path.abspath(journal_dir)
        self._ledger_dirs = tuple(os.path.abspath(d) for d in ledger_dirs)
        self._disk = disk
        self._executor = executor
        self._clock = clock
        self._rng = rng
        self._supervisor = supervisor
        self._registered_path: str | None = None
        self._read_only = False
        self._active = False
        self._lock = asyncio.Lock()
        self._space: tuple[int, int] | None = None  # (totalSpace, freeSpace) of the fullest directory

    @property
    def cookie_path(self) -> str:
        return f"{COOKIES_PATH}/{self.bookie_id}"

    def _dirs(self) -> list[str]:
        return [self._journal_dir, *self._ledger_dirs]

    # --- cookies ------------------------------------------------------------------------------

    def _read_local(self, directory: str) -> Cookie | None:
        path = f"{directory}/current/{COOKIE_FILE}"
        if not self._disk.exists(path):
            return None
        try:
            return Cookie.decode(self._disk.read_all(path))
        except (ValueError, KeyError) as exc:
            raise CookieMismatchError(f"cookie file {path} is unreadable: {exc}") from None

    def _write_local(self, cookie: Cookie) -> None:
        for d in self._dirs():
            self._disk.makedirs(f"{d}/current")
            self._disk.write_atomic(f"{d}/current/{COOKIE_FILE}", cookie.encode())

    async def check_cookie(self) -> Cookie:
        """Verify (or create) the cookie; raises CookieMismatchError when the bookie must not start."""
        local = {d: await self._executor.run(self._read_local, d) for d in self._dirs()}
        got = await self._store.get(self.cookie_path)
        if got is None:
            for d, c in local.items():
                if c is not None and c.bookie_id != self.bookie_id:
                    raise CookieMismatchError(
                        f"directory {d} belongs to bookie {c.bookie_id} (instance {c.instance_id}), "
                        f"not to {self.bookie_id}: refusing to start on someone else's directories"
                    )
                if c is not None:
                    raise CookieMismatchError(
                        f"directory {d} has a cookie for {self.bookie_id} (instance {c.instance_id}) but the "
                        f"metadata store has none at {self.cookie_path}: wrong cluster or lost metadata"
                    )
            cookie = Cookie(self.bookie_id, self._journal_dir, self._ledger_dirs, self._rng.hex(32))
            await self._executor.run(self._write_local, cookie)
            try:
                await self._store.put(self.cookie_path, cookie.encode(), -1)
            except (AlreadyExists, BadVersion):
                raise CookieMismatchError(
                    f"another bookie registered the cookie {self.cookie_path} while this one started"
                ) from None
            log.info("bookie %s: new cookie, instance %s", self.bookie_id, cookie.instance_id)
            return cookie
        registered = Cookie.decode(got.value)
        if registered.bookie_id != self.bookie_id:
            raise CookieMismatchError(f"cookie at {self.cookie_path} names bookie {registered.bookie_id}")
        for d, c in local.items():
            if c is None:
                raise CookieMismatchError(
                    f"bookie {self.bookie_id} is registered (instance {registered.instance_id}) but directory "
                    f"{d} has no cookie: it was wiped or is not this bookie's directory"
                )
            if c.instance_id != registered.instance_id or c.bookie_id != self.bookie_id:
                raise CookieMismatchError(
                    f"directory {d} holds the cookie of bookie {c.bookie_id} instance {c.instance_id}, "
                    f"but {self.bookie_id} is registered with instance {registered.instance_id}"
                )
        if (registered.journal_dir, registered.ledger_dirs) != (self._journal_dir, self._ledger_dirs):
            raise CookieMismatchError(
                f"bookie {self.bookie_id} was registered with journal {registered.journal_dir} and ledgers "
                f"{list(registered.ledger_dirs)}, now started with {self._journal_dir} and {list(self._ledger_dirs)}"
            )
        return registered

    # --- registration -------------------------------------------------------------------------

    def _node_value(self) -> bytes:
        value: dict = {"bookieId": self.bookie_id, "readOnly": self._read_only}
        if self._space is not None:
            value["totalSpace"], value["freeSpace"] = self._space
        return json.dumps(value).encode()

    async def publish_space(self, total_bytes: int, free_bytes: int) -> None:
        """Put the disk space of the fullest directory into the registration node (operators read it
        through ``/admin/v2/bookies/all``).  Rewritten only when free space moved by 1% of the disk or
        more, so a disk check every few seconds does not become a metadata write every few seconds."""
        old = self._space
        self._space = (total_bytes, free_bytes)
        if old is not None and old[0] == total_bytes and abs(old[1] - free_bytes) < total_bytes // 100:
            self._space = old
            return
        async with self._lock:
            if self._active and self._registered_path is not None:
                await self._put_ephemeral(self._registered_path)

    async def register(self, read_only: bool = False) -> str:
        async with self._lock:
            self._active = True
            self._read_only = read_only
            path = f"{READONLY_PATH if read_only else AVAILABLE_PATH}/{self.bookie_id}"
            other = f"{AVAILABLE_PATH if read_only else READONLY_PATH}/{self.bookie_id}"
            await self._put_ephemeral(path)
            await self._delete_ours(other)
            self._registered_path = path
            log.info("bookie %s registered at %s", self.bookie_id, path)
            return path

    async def _put_ephemeral(self, path: str) -> None:
        deadline = self._clock.monotonic() + _STALE_NODE_WAIT_S
        while True:
            stat = await self._store.exists(path)
            if stat is not None and stat.ephemeral_owner == self._store.session_id:
                await self._store.put(path, self._node_value(), stat.version, ephemeral=True)
                return
            if stat is None:
                try:
                    await self._store.put(path, self._node_value(), -1, ephemeral=True)
                    return
                except (AlreadyExists, BadVersion):
                    pass
            if self._clock.monotonic() > deadline:
                raise BookieError(
                    f"{path} is held by another session; is bookie {self.bookie_id} running twice?"
                )
            await self._clock.sleep(0.5)  # a previous incarnation's node, waiting for its session to expire

    async def _delete_ours(self, path: str) -> None:
        stat = await self._store.exists(path)
        if stat is not None and stat.ephemeral_owner == self._store.session_id:
            try:
                await self._store.delete(path)
            except NotFound:
                pass

    async def unregister(self) -> None:
        async with self._lock:
            self._active = False
            for base in (AVAILABLE_PATH, READONLY_PATH):
                try:
                    await self._delete_ours(f"{base}/{self.bookie_id}")
                except Exception as exc:  # shutting down: the session end removes them anyway
                    log.warning("bookie %s: unregister %s failed: %r", self.bookie_id, base, exc)
            self._registered_path = None

    def on_session_event(self, event: SessionEvent) -> None:
        if event in (SessionEvent.CONNECTED, SessionEvent.RECONNECTED) and self._active:
            if not self._supervisor.closed:
                self._supervisor.spawn(self._reregister(), name="reregister")

    async def _reregister(self) -> None:
        try:
            await self.register(self._read_only)
        except Exception:
            log.exception("bookie %s: re-registration failed", self.bookie_id)

    @property
    def registered_path(self) -> str | None:
        return self._registered_path
