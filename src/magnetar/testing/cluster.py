"""A whole cluster as real processes, for tests and benchmarks.

Theory of operation: :class:`ClusterProcesses` is ZooKeeper (Debian's
package, :mod:`magnetar.app.zookeeper_server`, unless a URL is given) + M
``magnetar bookie`` + N ``magnetar broker`` (+ ``magnetar autorecovery``, +
``magnetar proxy``) as subprocesses on loopback, laid out by
:func:`~magnetar.app.cluster_launch.plan_cluster` -- the same config files
and command lines ``magnetar cluster up`` uses, so a test runs what a user
runs.  ``start()`` brings them up in order (ZooKeeper, metadata
initialisation, bookies, brokers, auto-recovery, proxy; each kind started
together, then waited for), each bounded by a timeout.  Faults are by
process name (``broker-1``, ``bookie-0``, ``proxy``): :meth:`kill` is
``kill -9``, :meth:`pause`/:meth:`resume` are SIGSTOP/SIGCONT (a broker that
stops answering without closing its sockets, as in a long GC pause),
:meth:`restart` starts it again with the same config (same ports, same
bookie id; the proxy, which starts last, binds port 0 and its config is then pinned to the ports
it got).  ``stop()`` terminates everything (SIGTERM, then SIGKILL; a role's processes
together, proxy, brokers, auto-recovery, then bookies) and is
safe to call twice; the data dir stays for post-mortems unless the kit made
it.

``configuration_store_url`` names a configuration store shared with other
clusters (geo-replication: the clusters of one instance), as ``magnetar
cluster up --configuration-metadata-store`` does.  Each cluster uses its own ZooKeeper chroot (``/magnetar-<hex>``), so several
clusters can share one ZooKeeper server (the per-run ``zookeeper_server``
fixture).  :func:`admin_call` / :func:`admin_ok` are the tests' admin REST
requests against a cluster's brokers (status and decoded body; no raise).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

from magnetar.app.cluster_launch import (
    LaunchError,
    ProcessSpec,
    cluster_service_urls,
    log_size,
    log_tail,
    plan_cluster,
    spawn,
    wait_ready,
)


def stop_child(proc: subprocess.Popen, timeout_s: float = 20.0) -> int | None:
    """SIGCONT (a paused child cannot act on SIGTERM), SIGTERM, then SIGKILL; the exit status."""
    return stop_children([proc], timeout_s)[0]


def stop_children(procs: list[subprocess.Popen], timeout_s: float = 20.0) -> list[int | None]:
    """:func:`stop_child` for several at once: every one is signalled first, then each is
    waited for within the one shared deadline (three brokers closing take as long as one)."""
    running = [p for p in procs if p.poll() is None]
    for p in running:
        p.send_signal(signal.SIGCONT)
        p.terminate()
    deadline = time.monotonic() + timeout_s
    for p in running:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(30)
    return [p.returncode for p in procs]


def admin_call(method: str, url: str, body: object = None, timeout_s: float = 60.0) -> tuple[int, object]:
    """One admin REST request with a JSON body (if any): the status and the decoded JSON answer
    (the text when it is not a JSON document); a non-2xx answer is returned, not raised."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            raw = r.read()
            return r.status, (json.loads(raw) if raw and raw[:1] in b"[{" else raw.decode())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def admin_ok(status_body: tuple[int, object]) -> object:
    """The body of an :func:`admin_call` answered 200 or 204 (AssertionError with the body otherwise)."""
    status, body = status_body
    assert status in (200, 204), body
    return body


class ClusterProcesses:
    def __init__(
        self,
        data_dir: str | Path | None = None,
        *,
        brokers: int = 1,
        bookies: int = 2,
        zookeeper_url: str | None = None,
        proxy: bool = False,
        autorecovery: bool = False,
        cluster_name: str = "magnetar-cluster",
        configuration_store_url: str | None = None,
        broker_properties: Mapping[str, str] | None = None,
        bookie_properties: Mapping[str, str] | None = None,
        proxy_properties: Mapping[str, str] | None = None,
        ready_timeout_s: float = 120.0,
        held: tuple[str, ...] = (),
    ) -> None:
        """``held``: process names planned (ports, config) but not started by ``start()``;
        :meth:`start_held` starts one later (a broker joining a running cluster)."""
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="magnetar-cluster-")).resolve()
        self.n_brokers, self.n_bookies = brokers, bookies
        self.with_proxy, self.with_autorecovery = proxy, autorecovery
        self.cluster_name = cluster_name
        self.broker_properties = dict(broker_properties or {})
        self.bookie_properties = dict(bookie_properties or {})
        self.proxy_properties = dict(proxy_properties or {})
        self.ready_timeout_s = ready_timeout_s
        self._zk_url = zookeeper_url
        self.configuration_store_url = configuration_store_url  # None: the cluster's own store
        self.zookeeper = None  # ZooKeeperServer when we started one
        self.metadata_url = ""
        self.specs: dict[str, ProcessSpec] = {}
        self.procs: dict[str, subprocess.Popen] = {}
        self.ready: dict[str, tuple[str, ...]] = {}
        self.held = tuple(held)

    # ------------------------------------------------------------------ start
    def start(self) -> ClusterProcesses:
        try:
            self._start_zookeeper()
            specs = plan_cluster(
                self.data_dir,
                metadata_url=self.metadata_url,
                cluster_name=self.cluster_name,
                brokers=self.n_brokers,
                bookies=self.n_bookies,
                configuration_store_url=self.configuration_store_url,
                autorecovery=self.with_autorecovery,
                proxy=self.with_proxy,
                broker_properties=self.broker_properties,
                bookie_properties=self.bookie_properties,
                proxy_properties=self.proxy_properties,
            )
            self.specs = {s.name: s for s in specs}
            if "proxy" in self.specs and not {"servicePort", "webServicePort"} & set(self.proxy_properties):
                self._set_ports("proxy", {"servicePort": 0, "webServicePort": 0})  # see _pin_proxy_ports
            self._initialize_metadata()
            for role in ("bookie", "broker", "autorecovery", "proxy"):
                self._start_group([s.name for s in specs if s.role == role and s.name not in self.held])
        except BaseException:
            self.stop()
            raise
        return self

    def _start_zookeeper(self) -> None:
        if self._zk_url is None:
            from magnetar.app.zookeeper_server import ZooKeeperServer

            self.zookeeper = ZooKeeperServer(str(self.data_dir / "zookeeper"))
            self.zookeeper.start()
            base = self.zookeeper.url
        else:
            base = self._zk_url
        self.metadata_url = f"{base.rstrip('/')}/magnetar-{uuid.uuid4().hex[:8]}"

    def _initialize_metadata(self) -> None:
        web, binary = cluster_service_urls(list(self.specs.values()))
        cmd = [sys.executable, "-m", "magnetar.cli.main", "initialize-cluster-metadata"]
        cmd += ["--cluster", self.cluster_name, "--metadata-store", self.metadata_url]
        if self.configuration_store_url:
            cmd += ["--configuration-metadata-store", self.configuration_store_url]
        cmd += ["--web-service-url", web, "--broker-service-url", binary]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise LaunchError(f"initialize-cluster-metadata failed: {done.stderr.strip()[-2000:]}")

    def _start_group(self, names: list[str]) -> None:
        marks = {}
        for name in names:
            marks[name] = log_size(self.specs[name].log_path)
            self.procs[name] = spawn(self.specs[name])
        for name in names:
            m = wait_ready(
                self.specs[name], self.procs[name], since=marks[name], timeout_s=self.ready_timeout_s
            )
            self.ready[name] = m.groups()
            if name == "proxy" and self.specs[name].ports.get("broker") == 0:
                self._pin_proxy_ports()

    def _set_ports(self, name: str, ports: Mapping[str, int]) -> None:
        """Rewrites ``name``'s config file with these port keys (the rest unchanged)."""
        from magnetar.app.cluster_launch import write_properties
        from magnetar.app.config import parse_properties

        spec = self.specs[name]
        props: dict[str, object] = dict(parse_properties(spec.config_path.read_text()))
        props.update(ports)
        write_properties(spec.config_path, props, f"{name} of cluster {self.cluster_name}")
        if name == "proxy":
            spec.ports = {"broker": int(ports["servicePort"]), "web": int(ports["webServicePort"])}

    def _pin_proxy_ports(self) -> None:
        """The proxy bound port 0 (a port picked early and bound after every broker started could
        be taken meanwhile: "address already in use"); its ready line has the ports it got, which
        its config now names, so :meth:`restart` keeps its URLs."""
        service_url, web_url = self.ready["proxy"]
        ports = {
            "servicePort": int(service_url.rsplit(":", 1)[1]),
            "webServicePort": int(web_url.rsplit(":", 1)[1]),
        }
        self._set_ports("proxy", ports)

    def start_held(self, name: str) -> None:
        """Starts a process planned with ``held`` (e.g. a fourth broker joining)."""
        self._start_group([name])

    # ------------------------------------------------------------------ urls
    def names(self, role: str) -> list[str]:
        return [n for n, s in self.specs.items() if s.role == role]

    def service_url_of(self, role: str = "broker") -> str:
        """``pulsar://h:p1,h:p2`` over every broker (a multi-host service URL), or the proxy's."""
        ports = [self.specs[n].ports["broker"] for n in self.names(role)]
        return "pulsar://" + ",".join(f"127.0.0.1:{p}" for p in ports)

    @property
    def service_url(self) -> str:
        return self.service_url_of("broker")

    def broker_url(self, i: int) -> str:
        return self.specs[f"broker-{i}"].urls()["serviceUrl"]

    def web_url(self, i: int = 0) -> str:
        return self.specs[f"broker-{i}"].urls()["webServiceUrl"]

    @property
    def proxy_url(self) -> str:
        return self.specs["proxy"].urls()["serviceUrl"]

    @property
    def proxy_web_url(self) -> str:
        return self.specs["proxy"].urls()["webServiceUrl"]

    def pid(self, name: str) -> int:
        return self.procs[name].pid

    def running(self, name: str) -> bool:
        p = self.procs.get(name)
        return p is not None and p.poll() is None

    def log(self, name: str, lines: int = 40) -> str:
        return log_tail(self.specs[name].log_path, lines)

    # ------------------------------------------------------------------ faults
    def kill(self, name: str) -> None:
        """``kill -9``."""
        p = self.procs[name]
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
        p.wait(30)

    def pause(self, name: str) -> None:
        self.procs[name].send_signal(signal.SIGSTOP)

    def resume(self, name: str) -> None:
        self.procs[name].send_signal(signal.SIGCONT)

    def terminate(self, name: str, timeout_s: float = 30.0) -> int | None:
        """SIGTERM (SIGKILL after ``timeout_s``); the exit status."""
        return stop_child(self.procs[name], timeout_s)

    def restart(self, name: str, *, kill: bool = False, timeout_s: float | None = None) -> None:
        """Stop (SIGTERM, or ``kill -9`` with ``kill``) and start again with the same config;
        retried while the old ports linger."""
        if self.running(name):
            self.kill(name) if kill else self.terminate(name)
        spec = self.specs[name]
        deadline = time.monotonic() + (timeout_s or self.ready_timeout_s)
        while True:
            mark = log_size(spec.log_path)
            self.procs[name] = spawn(spec)
            try:
                left = max(5.0, deadline - time.monotonic())
                self.ready[name] = wait_ready(spec, self.procs[name], since=mark, timeout_s=left).groups()
                return
            except LaunchError:
                if self.procs[name].poll() is None:
                    self.kill(name)
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    # ------------------------------------------------------------------ stop
    def stop(self) -> None:
        order = ("proxy", "broker", "autorecovery", "bookie")
        for role in order:  # each role's processes together (brokers still close before bookies)
            stop_children([p for n, p in self.procs.items() if self.specs[n].role == role], 20.0)
        if self.zookeeper is not None:
            self.zookeeper.stop()

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> ClusterProcesses:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def serving_cluster(data_dir: str | Path, **kwargs: object) -> Iterator[ClusterProcesses]:
    """The body of a pytest fixture: skips without ZooKeeper (fails under ``CI=true``), starts a
    :class:`ClusterProcesses` with ``kwargs``, yields it, and stops it after the tests."""
    from magnetar.testing.zookeeper import require_zookeeper

    require_zookeeper()
    with ClusterProcesses(data_dir, **kwargs) as cluster:  # type: ignore[arg-type]
        yield cluster


class ProxyProcess:
    """One ``magnetar proxy --config <file>`` subprocess (e.g. in front of a standalone)."""

    def __init__(self, workdir: str | Path, properties: Mapping[str, str]) -> None:
        from magnetar.app.cluster_launch import write_properties

        workdir = Path(workdir)
        conf = workdir / "proxy.conf"
        props = {"servicePort": "0", "webServicePort": "0", "bindAddress": "127.0.0.1", **properties}
        write_properties(conf, props, "test proxy")
        cmd = [sys.executable, "-m", "magnetar.cli.main", "proxy", "--config", str(conf)]
        self.spec = ProcessSpec("proxy", "proxy", cmd, conf, workdir / "proxy.log")
        self.proc: subprocess.Popen | None = None
        self.service_url = self.web_url = ""

    def start(self, timeout_s: float = 60.0) -> ProxyProcess:
        mark = log_size(self.spec.log_path)
        self.proc = spawn(self.spec)
        self.service_url, self.web_url = wait_ready(
            self.spec, self.proc, since=mark, timeout_s=timeout_s
        ).groups()
        return self

    def log(self, lines: int = 40) -> str:
        return log_tail(self.spec.log_path, lines)

    def terminate(self, timeout_s: float = 20.0) -> int | None:
        if self.proc is None:
            return None
        return stop_child(self.proc, timeout_s)
