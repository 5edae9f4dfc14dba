"""Laying out and launching a cluster's processes: config files, command lines, readiness, stop.

Theory of operation: a Magnetar cluster is separate processes started from
Pulsar-style config files, exactly as an operator would run them one by one
(``magnetar bookie --config``, ``magnetar broker --config``, ``magnetar
autorecovery --config``, ``magnetar proxy --config``).  :func:`plan_cluster`
picks free loopback ports, writes one config file per process under the data
dir (``bookie-0/bookkeeper.conf``, ``broker-0/broker.conf``,
``autorecovery/bookkeeper.conf``, ``proxy/proxy.conf``) and returns a
:class:`ProcessSpec` per process: the command line, the log file and the
regular expression of the line it prints once it serves.  Ports are fixed in
the files (not 0) so a restarted process comes back with the same identity:
a bookie's id is ``address:port`` and its cookie binds its directories to it.

:func:`spawn` starts a spec with stdout and stderr appended to its log (with
``detach`` in a session of its own, so it outlives ``magnetar cluster up``);
:func:`wait_ready` polls the log for the ready line (bounded; a child that
exits first is an error carrying the log's tail); :func:`stop_pid` is SIGTERM,
then SIGKILL after a grace period.  Who keeps the handles is the caller's
business: the CLI writes pids to a state file, the test kit
(:mod:`magnetar.testing.cluster`) keeps the ``Popen`` objects.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

READY_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 20.0
LOOPBACK = "127.0.0.1"

READY_LINES = {
    "bookie": re.compile(r"^magnetar bookie ready: (\S+)"),
    "broker": re.compile(r"^magnetar ready: (pulsar://\S+) (http://\S+)"),
    "autorecovery": re.compile(r"^magnetar autorecovery ready: (\S+)"),
    "proxy": re.compile(r"^magnetar proxy ready: (pulsar://\S+) (http://\S+)"),
}


class LaunchError(RuntimeError):
    """A process did not start (exited early, or no ready line in time); the message has its log tail."""


@dataclass
class ProcessSpec:
    name: str  # bookie-0, broker-1, autorecovery, proxy
    role: str  # bookie | broker | autorecovery | proxy
    cmd: list[str]
    config_path: Path
    log_path: Path
    ports: dict[str, int] = field(default_factory=dict)

    @property
    def ready_re(self) -> re.Pattern[str]:
        return READY_LINES[self.role]

    def urls(self) -> dict[str, str]:
        if "broker" in self.ports:
            return {
                "serviceUrl": f"pulsar://{LOOPBACK}:{self.ports['broker']}",
                "webServiceUrl": f"http://{LOOPBACK}:{self.ports['web']}",
            }
        if "bookie" in self.ports:
            return {"bookieId": f"{LOOPBACK}:{self.ports['bookie']}"}
        return {}


def free_ports(n: int) -> list[int]:
    """n distinct free loopback ports (held open together so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((LOOPBACK, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def write_properties(path: Path, props: Mapping[str, object], header: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"# {header}", "# written by magnetar; Pulsar key names"]
    lines += [f"{k}={v}" for k, v in props.items()]
    path.write_text("\n".join(lines) + "\n")


def _previous_ports(conf: Path, keys: tuple[str, ...]) -> list[int] | None:
    """The ports an earlier ``plan_cluster`` wrote into ``conf`` (a cluster brought up again on
    the same data dir keeps its identities: a bookie's id is address:port), or None."""
    from magnetar.bookie.config import parse_properties

    try:
        props = parse_properties(conf.read_text())
    except OSError:
        return None
    values = [props.get(k, "") for k in keys]
    return [int(v) for v in values] if all(v.isdigit() and int(v) > 0 for v in values) else None


def _magnetar(*args: str) -> list[str]:
    return [sys.executable, "-m", "magnetar.cli.main", *args]


def plan_cluster(
    data_dir: Path,
    *,
    metadata_url: str,
    cluster_name: str,
    brokers: int,
    bookies: int,
    configuration_store_url: str | None = None,
    autorecovery: bool = True,
    proxy: bool = False,
    broker_properties: Mapping[str, str] | None = None,
    bookie_properties: Mapping[str, str] | None = None,
    proxy_properties: Mapping[str, str] | None = None,
) -> list[ProcessSpec]:
    """Config files under ``data_dir`` and the specs, in start order (bookies first).

    ``configuration_store_url``: the instance's configuration store (clusters, tenants,
    namespace policies shared by every cluster of a geo-replicated instance); None = the
    cluster's own metadata store, as a single cluster has it."""
    config_url = configuration_store_url or metadata_url
    if brokers < 1 or bookies < 1:
        raise ValueError("a cluster needs at least one broker and one bookie")
    data_dir = data_dir.resolve()
    ports = iter(free_ports(bookies + 2 * brokers + (2 if proxy else 0)))
    specs: list[ProcessSpec] = []
    for i in range(bookies):
        d = data_dir / f"bookie-{i}"
        conf = d / "bookkeeper.conf"
        port = (_previous_ports(conf, ("bookiePort",)) or [next(ports)])[0]
        props = {
            "bookiePort": port,
            "advertisedAddress": LOOPBACK,
            "journalDirectory": d / "journal",
            "ledgerDirectories": d / "ledgers",
            "zkTimeout": 10000,
            **(bookie_properties or {}),
        }
        write_properties(conf, props, f"bookie {i} of cluster {cluster_name}")
        cmd = _magnetar("bookie", "--config", str(conf), "--metadata-url", metadata_url)
        specs.append(ProcessSpec(f"bookie-{i}", "bookie", cmd, conf, d / "bookie.log", {"bookie": port}))
    quorum = min(2, bookies)
    for i in range(brokers):
        d = data_dir / f"broker-{i}"
        conf = d / "broker.conf"
        bport, wport = _previous_ports(conf, ("brokerServicePort", "webServicePort")) or (
            next(ports),
            next(ports),
        )
        props = {
            "clusterName": cluster_name,
            "metadataStoreUrl": metadata_url,
            "configurationMetadataStoreUrl": config_url,
            "brokerServicePort": bport,
            "webServicePort": wport,
            "bindAddress": LOOPBACK,
            "advertisedAddress": LOOPBACK,
            "managedLedgerDefaultEnsembleSize": quorum,
            "managedLedgerDefaultWriteQuorum": quorum,
            "managedLedgerDefaultAckQuorum": quorum,
            **(broker_properties or {}),
        }
        write_properties(conf, props, f"broker {i} of cluster {cluster_name}")
        cmd = _magnetar("broker", "--config", str(conf), "--data-dir", str(d / "data"))
        specs.append(
            ProcessSpec(f"broker-{i}", "broker", cmd, conf, d / "broker.log", {"broker": bport, "web": wport})
        )
    if autorecovery:
        d = data_dir / "autorecovery"
        conf = d / "bookkeeper.conf"
        write_properties(conf, {"zkTimeout": 10000, **(bookie_properties or {})}, "auto-recovery")
        cmd = _magnetar("autorecovery", "--config", str(conf), "--metadata-url", metadata_url)
        cmd += ["--id", f"{cluster_name}-autorecovery"]
        specs.append(ProcessSpec("autorecovery", "autorecovery", cmd, conf, d / "autorecovery.log"))
    if proxy:
        d = data_dir / "proxy"
        conf = d / "proxy.conf"
        pport, wport = _previous_ports(conf, ("servicePort", "webServicePort")) or (next(ports), next(ports))
        brokers_ = [sp for sp in specs if sp.role == "broker"]
        props = {
            "clusterName": cluster_name,
            "metadataStoreUrl": metadata_url,
            "configurationMetadataStoreUrl": config_url,
            # registered brokers (/loadbalance/brokers) come first; this list is the fallback
            "brokerServiceURL": "pulsar://" + ",".join(f"{LOOPBACK}:{sp.ports['broker']}" for sp in brokers_),
            "brokerWebServiceURL": "http://" + ",".join(f"{LOOPBACK}:{sp.ports['web']}" for sp in brokers_),
            "servicePort": pport,
            "webServicePort": wport,
            "bindAddress": LOOPBACK,
            "advertisedAddress": LOOPBACK,
            **(proxy_properties or {}),
        }
        write_properties(conf, props, f"proxy of cluster {cluster_name}")
        specs.append(
            ProcessSpec(
                "proxy",
                "proxy",
                _magnetar("proxy", "--config", str(conf)),
                conf,
                d / "proxy.log",
                {"broker": pport, "web": wport},
            )
        )
    return specs


def cluster_service_urls(specs: list[ProcessSpec]) -> tuple[str, str]:
    """(webServiceUrl, brokerServiceUrl) of the cluster as other clusters must know it: every
    broker, multi-host (``pulsar://h:p1,h:p2``), so a remote cluster's replicators and admin
    calls still reach it while one broker is down."""
    brokers = [s for s in specs if s.role == "broker"]
    web = "http://" + ",".join(f"{LOOPBACK}:{s.ports['web']}" for s in brokers)
    binary = "pulsar://" + ",".join(f"{LOOPBACK}:{s.ports['broker']}" for s in brokers)
    return web, binary


def spawn(
    spec: ProcessSpec, *, detach: bool = False, env: Mapping[str, str] | None = None
) -> subprocess.Popen:
    """Start ``spec`` with its output appended to its log; returns the handle."""
    spec.log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(spec.log_path, "ab") as log:
        log.write(f"\n--- start {time.strftime('%Y-%m-%d %H:%M:%S')}: {' '.join(spec.cmd)}\n".encode())
        log.flush()
        return subprocess.Popen(
            spec.cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=detach,
            env=dict(env) if env is not None else None,
        )


def _log_from(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def log_tail(path: Path, lines: int = 30) -> str:
    return "\n".join(_log_from(path, 0).splitlines()[-lines:])


def log_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def wait_ready(
    spec: ProcessSpec,
    proc: subprocess.Popen | int,
    *,
    since: int = 0,
    timeout_s: float = READY_TIMEOUT_S,
) -> re.Match[str]:
    """The ready line's match, read from the log after byte ``since``; LaunchError otherwise."""
    deadline = time.monotonic() + timeout_s
    while True:
        for line in _log_from(spec.log_path, since).splitlines():
            m = spec.ready_re.match(line)
            if m:
                return m
        exited = proc.poll() if isinstance(proc, subprocess.Popen) else (None if pid_alive(proc) else -1)
        if exited is not None:
            raise LaunchError(
                f"{spec.name} exited with status {exited} before it was ready; "
                f"log {spec.log_path}:\n{log_tail(spec.log_path)}"
            )
        if time.monotonic() > deadline:
            raise LaunchError(
                f"{spec.name} printed no ready line within {timeout_s:.0f} s; "
                f"log {spec.log_path}:\n{log_tail(spec.log_path)}"
            )
        time.sleep(0.1)


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie of ours counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def pid_cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def stop_pid(pid: int, timeout_s: float = STOP_TIMEOUT_S) -> str:
    """SIGTERM, wait, then SIGKILL; returns how it ended: gone / terminated / killed."""
    if not pid_alive(pid):
        return "gone"
    try:
        os.kill(pid, signal.SIGCONT)  # a paused process cannot act on SIGTERM
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return "gone"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        _reap(pid)
        if not pid_alive(pid):
            return "terminated"
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return "terminated"
    for _ in range(50):
        _reap(pid)
        if not pid_alive(pid):
            break
        time.sleep(0.1)
    return "killed"


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
