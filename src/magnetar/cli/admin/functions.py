"""``magnetar admin functions|sources|sinks``: pulsar-admin's commands for Functions and Pulsar IO.

Theory of operation: each leaf builds Pulsar's config document from
pulsar-admin's flags (``--tenant --namespace --name --py --classname --inputs
--output ...`` or ``--fqfn``; a ``--function-config-file`` JSON is the base the
flags override) and calls ``/admin/v3/{functions,sources,sinks}/...``: create
and update send ``multipart/form-data`` with the config part and the code file
(``data``) or a ``builtin://`` URL (``--archive builtin://jdbc-postgres``).
Requests go through the admin client's HTTP connection (its URL and TLS
settings) with its credentials (``--auth-plugin``/``--auth-params``); an error status raises :class:`AdminError`, printed as pulsar-admin
prints it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from magnetar.admin_client import AdminError
from magnetar.cli.admin.common import CliUsageError, Ctx, command

CODE_BYTES_MAX = 16 * 1024 * 1024
CONFIG_KEYS = {"functions": "functionConfig", "sources": "sourceConfig", "sinks": "sinkConfig"}


def _auth_headers(ctx: Ctx) -> dict[str, str]:
    """The credentials of ``--auth-plugin``/``--auth-params`` (or the client conf), as every admin call."""
    auth = ctx.admin.config.auth
    return dict(auth.http_headers()) if auth is not None else {}


def _request(ctx: Ctx, method: str, path: str, **kwargs: Any) -> Any:
    http = ctx.admin._http  # the admin client's connection: same URL, TLS and timeouts
    r = http.request(method, path, headers=_auth_headers(ctx), **kwargs)
    if r.status_code >= 400:
        try:
            reason = r.json().get("reason") or r.text
        except ValueError:
            reason = r.text
        raise AdminError(r.status_code, reason, method=method, url=path)
    if r.status_code == 204 or not r.content:
        return None
    try:
        return r.json()
    except ValueError:
        return r.text


def _names(a: argparse.Namespace) -> tuple[str, str, str | None]:
    if getattr(a, "fqfn", None):
        parts = a.fqfn.split("/")
        if len(parts) != 3:
            raise CliUsageError("--fqfn must be tenant/namespace/name")
        return parts[0], parts[1], parts[2]
    return a.tenant or "public", a.namespace or "default", getattr(a, "name", None)


def _path(family: str, a: argparse.Namespace, *tail: str) -> str:
    tenant, ns, name = _names(a)
    if name is None:
        raise CliUsageError("--name (or --fqfn) is required")
    return "/".join([f"/admin/v3/{family}/{tenant}/{ns}/{name}", *tail]).rstrip("/")


def _ident(p: argparse.ArgumentParser, with_name: bool = True) -> None:
    p.add_argument("--tenant", help="tenant (default public)")
    p.add_argument("--namespace", help="namespace (default default)")
    if with_name:
        p.add_argument("--name", help="name of the function/connector")
        p.add_argument("--fqfn", help="tenant/namespace/name")


def _definition_flags(p: argparse.ArgumentParser, family: str) -> None:
    _ident(p)
    p.add_argument("--classname", help="module.Class (or function) of the user code")
    if family == "functions":
        p.add_argument("--py", help="the Python file of the function")
        p.add_argument("--function-config-file", dest="config_file", help="FunctionConfig JSON file")
        p.add_argument("--output", dest="output_topic", help="output topic")
        p.add_argument("--log-topic", help="topic for the function's log records")
        p.add_argument("--user-config", help="user config JSON")
        p.add_argument("--secrets", help="secrets JSON: name -> value, env:NAME or file:/path")
    else:
        p.add_argument("-a", "--archive", help="builtin://NAME or a Python connector file")
        conf = "source" if family == "sources" else "sink"
        p.add_argument(f"--{conf}-config-file", dest="config_file", help=f"{conf} config JSON file")
        p.add_argument(f"--{conf}-config", dest="connector_config", help=f"{conf} configs JSON")
        if family == "sources":
            p.add_argument("--destination-topic-name", help="topic the source writes to")
    if family != "sources":
        p.add_argument("-i", "--inputs", help="input topics, comma separated")
        p.add_argument("--topics-pattern", help="regex of input topics")
        p.add_argument("--subs-name", help="subscription name")
        p.add_argument("--subs-position", choices=["Latest", "Earliest"], help="initial position")
        p.add_argument("--dead-letter-topic", help="dead-letter topic")
        p.add_argument("--max-message-retries", type=int, help="redeliveries before the dead-letter topic")
        p.add_argument("--timeout-ms", type=int, help="processing timeout per message")
        p.add_argument("--retain-ordering", action="store_true", default=None, help="process in order")
        p.add_argument(
            "--retain-key-ordering", action="store_true", default=None,
            help="process each key's messages in order (Key_Shared)",
        )  # fmt: skip
        p.add_argument("--auto-ack", type=lambda v: v.lower() == "true", help="true/false")
    p.add_argument(
        "--processing-guarantees",
        choices=["ATMOST_ONCE", "ATLEAST_ONCE", "EFFECTIVELY_ONCE"],
        help="delivery guarantee of the output (default ATLEAST_ONCE)",
    )
    p.add_argument("--parallelism", type=int, help="number of instances")
    p.add_argument("--cpu", type=float, help="cores per instance (process runtime: throttled to it)")
    p.add_argument("--ram", type=int, help="bytes of memory per instance (process runtime: enforced)")
    p.add_argument(
        "--disk", type=int, help="bytes of disk in its working directory (process runtime: enforced)"
    )
    p.add_argument("--custom-runtime-options", help='{"runtime": "thread"|"process"}')


def _load_json(text: str | None, what: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        raise CliUsageError(f"{what} is not valid JSON")


def _document(family: str, a: argparse.Namespace) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    if getattr(a, "config_file", None):
        try:
            doc = json.loads(Path(a.config_file).read_text())
        except (OSError, ValueError) as e:
            raise CliUsageError(f"cannot read {a.config_file}: {e}")
    tenant, ns, name = _names(a)
    flags = {
        "tenant": tenant, "namespace": ns, "name": name, "className": a.classname,
        "output": getattr(a, "output_topic", None) or getattr(a, "destination_topic_name", None),
        "logTopic": getattr(a, "log_topic", None),
        "userConfig": _load_json(getattr(a, "user_config", None), "--user-config"),
        "secrets": _load_json(getattr(a, "secrets", None), "--secrets"),
        "configs": _load_json(getattr(a, "connector_config", None), "connector config"),
        "inputs": [t for t in (getattr(a, "inputs", None) or "").split(",") if t] or None,
        "topicsPattern": getattr(a, "topics_pattern", None),
        "subName": getattr(a, "subs_name", None),
        "subscriptionPosition": getattr(a, "subs_position", None),
        "deadLetterTopic": getattr(a, "dead_letter_topic", None),
        "maxMessageRetries": getattr(a, "max_message_retries", None),
        "timeoutMs": getattr(a, "timeout_ms", None),
        "retainOrdering": getattr(a, "retain_ordering", None),
        "retainKeyOrdering": getattr(a, "retain_key_ordering", None),
        "resources": {k: v for k in ("cpu", "ram", "disk") if (v := getattr(a, k, None)) is not None} or None,
        "autoAck": getattr(a, "auto_ack", None),
        "processingGuarantees": a.processing_guarantees,
        "parallelism": a.parallelism,
        "customRuntimeOptions": a.custom_runtime_options,
        "py": Path(a.py).name if getattr(a, "py", None) else None,
        "archive": a.archive if getattr(a, "archive", None) and a.archive.startswith("builtin://") else None,
    }  # fmt: skip
    if family == "sources" and flags["configs"] is None:
        flags["configs"] = None
    doc.update({k: v for k, v in flags.items() if v is not None})
    if family != "functions" and "configs" in doc:
        doc.setdefault("userConfig", doc["configs"])
    return doc


def _files(family: str, a: argparse.Namespace, doc: dict[str, Any]) -> dict[str, Any]:
    code_file = getattr(a, "py", None) or (
        getattr(a, "archive", None)
        if not str(getattr(a, "archive", "") or "").startswith("builtin://")
        else None
    )
    files: dict[str, Any] = {CONFIG_KEYS[family]: (None, json.dumps(doc), "application/json")}
    if code_file:
        path = Path(code_file)
        try:
            if path.stat().st_size > CODE_BYTES_MAX:
                raise CliUsageError(f"{path} is larger than {CODE_BYTES_MAX} bytes")
            files["data"] = (path.name, path.read_bytes(), "application/octet-stream")
        except OSError as e:
            raise CliUsageError(f"cannot read {path}: {e.strerror or e}")
    elif doc.get("archive"):
        files["url"] = (None, doc["archive"])
    return files


def _create(family: str, method: str) -> Any:
    def run(c: Ctx, a: argparse.Namespace) -> None:
        doc = _document(family, a)
        _request(c, method, _path(family, a), files=_files(family, a, doc))
        c.print(f"{'Created' if method == 'POST' else 'Updated'} successfully")

    return run


def _simple(family: str, method: str, tail: str = "", instance_tail: bool = False, done: str = "") -> Any:
    def run(c: Ctx, a: argparse.Namespace) -> None:
        parts = [tail] if tail else []
        if instance_tail and getattr(a, "instance_id", None) is not None:
            parts = [str(a.instance_id), *parts]
        c.emit(_request(c, method, _path(family, a, *parts)))
        if done:
            c.print(done)

    return run


def _list(family: str) -> Any:
    def run(c: Ctx, a: argparse.Namespace) -> None:
        tenant, ns, _ = _names(a)
        for name in _request(c, "GET", f"/admin/v3/{family}/{tenant}/{ns}") or []:
            c.print(name)

    return run


def register_family(family: str) -> Any:
    def register(sub: argparse._SubParsersAction) -> None:
        what = family[:-1]
        _definition_flags(command(sub, "create", f"create a {what}", _create(family, "POST")), family)
        _definition_flags(command(sub, "update", f"update a {what}", _create(family, "PUT")), family)
        _ident(
            command(sub, "delete", f"delete a {what}", _simple(family, "DELETE", done="Deleted successfully"))
        )
        _ident(command(sub, "get", f"print a {what}'s config", _simple(family, "GET")))
        _ident(command(sub, "list", f"list the {family} of a namespace", _list(family)), with_name=False)
        for verb, tail in (("status", "status"), ("stats", "stats")):
            p = command(
                sub, verb, f"{verb} of a {what} (or one instance)", _simple(family, "GET", tail, True)
            )
            _ident(p)
            p.add_argument("--instance-id", type=int, help="one instance")
        for verb in ("start", "stop", "restart"):
            p = command(sub, verb, f"{verb} a {what} (or one instance)", _simple(family, "POST", verb, True))
            _ident(p)
            p.add_argument("--instance-id", type=int, help="one instance")
        if family == "functions":
            _function_extras(sub)
        else:
            kind = family

            def avail(c: Ctx, a: argparse.Namespace) -> None:
                c.emit(_request(c, "GET", f"/admin/v3/{kind}/builtin{kind}"))

            command(sub, f"available-{family}", f"built-in {family}", avail)

    return register


def _function_extras(sub: argparse._SubParsersAction) -> None:
    def trigger(c: Ctx, a: argparse.Namespace) -> None:
        files: dict[str, Any] = {"data": (None, a.trigger_value or "")}
        if a.topic:
            files["topic"] = (None, a.topic)
        c.print(str(_request(c, "POST", _path("functions", a, "trigger"), files=files) or ""))

    p = command(sub, "trigger", "send a value to a function's input and print its output", trigger)
    _ident(p)
    p.add_argument("--trigger-value", help="the value to send")
    p.add_argument("--topic", help="which input topic")

    def querystate(c: Ctx, a: argparse.Namespace) -> None:
        c.emit(_request(c, "GET", _path("functions", a, "state", a.key)))

    p = command(sub, "querystate", "read a function's counter or state value", querystate)
    _ident(p)
    p.add_argument("-k", "--key", required=True, help="state key")

    def putstate(c: Ctx, a: argparse.Namespace) -> None:
        state = _load_json(a.state, "--state")
        if not isinstance(state, dict) or "key" not in state:
            raise CliUsageError('--state must be {"key": ..., "stringValue"|"numberValue": ...}')
        _request(c, "POST", _path("functions", a, "state", state["key"]), data={"state": a.state})
        c.print(f"successfully updated function state key {state['key']}")

    p = command(sub, "putstate", "write a function's state value", putstate)
    _ident(p)
    p.add_argument("-s", "--state", required=True, help='{"key": ..., "stringValue": ...}')

    def download(c: Ctx, a: argparse.Namespace) -> None:
        r = c.admin._http.get(_path("functions", a, "download"), headers=_auth_headers(c))
        if r.status_code >= 400:
            raise AdminError(r.status_code, r.text)
        Path(a.destination_file).write_bytes(r.content)
        c.print(f"Downloaded successfully to {a.destination_file}")

    p = command(sub, "download", "download a function's code", download)
    _ident(p)
    p.add_argument("--destination-file", required=True, help="where to write it")
