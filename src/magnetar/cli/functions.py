"""``magnetar functions localrun``: run a function here, in this process, against any broker.

Theory of operation: as ``pulsar-admin functions localrun`` (``bin/pulsar-admin
functions localrun``), the function is not registered with a worker: the flags
(``--py --classname --inputs --output --processing-guarantees --parallelism
--user-config ...``, the same as ``admin functions create``) make a
FunctionConfig, and ``--parallelism`` instances of
:class:`~magnetar.functions.instance.FunctionInstance` run on this process's
event loop until SIGINT/SIGTERM.  Counters and state are kept in memory, or,
with ``--state-storage-service-url http://worker:8080``, by that worker's
state API under the same function name.  ``--web-service-url`` is needed for
EFFECTIVELY_ONCE (it turns deduplication on for the output topic).
``--client-auth-plugin`` / ``--client-auth-params`` (pulsar-admin's names) are the
credentials for the broker and those URLs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("functions", help="Pulsar Functions outside a worker (localrun)")
    fsub = p.add_subparsers(dest="functions_command", metavar="COMMAND", required=True)
    lr = fsub.add_parser("localrun", help="run a function in this process until interrupted")
    lr.add_argument("--broker-service-url", default="pulsar://localhost:6650", help="broker to use")
    lr.add_argument("--web-service-url", help="admin URL (needed for EFFECTIVELY_ONCE)")
    lr.add_argument("--state-storage-service-url", help="a worker's URL whose state API keeps the state")
    lr.add_argument("--tenant", default="public")
    lr.add_argument("--namespace", default="default")
    lr.add_argument("--name", help="function name (default: the class name)")
    lr.add_argument("--py", required=True, help="the Python file of the function")
    lr.add_argument("--classname", required=True, help="module.Class or module.function")
    lr.add_argument("-i", "--inputs", help="input topics, comma separated")
    lr.add_argument("--topics-pattern", help="regex of input topics")
    lr.add_argument("--output", dest="output_topic", help="output topic")
    lr.add_argument("--log-topic", help="log topic")
    lr.add_argument("--processing-guarantees", default="ATLEAST_ONCE")
    lr.add_argument("--parallelism", type=int, default=1)
    lr.add_argument("--user-config", help="user config JSON")
    lr.add_argument("--subs-position", choices=["Latest", "Earliest"], default="Latest")
    lr.add_argument("--client-auth-plugin", default="", help="auth plugin of the broker/worker client")
    lr.add_argument("--client-auth-params", default="", help="its params, e.g. token:<jwt> or file:///path")
    lr.set_defaults(func=localrun)


def localrun(args: argparse.Namespace) -> int:
    from magnetar.functions.config import FunctionConfigError, parse_function_config

    doc = {
        "tenant": args.tenant,
        "namespace": args.namespace,
        "name": args.name or args.classname.rsplit(".", 1)[-1],
        "className": args.classname,
        "inputs": [t for t in (args.inputs or "").split(",") if t],
        "topicsPattern": args.topics_pattern,
        "output": args.output_topic,
        "logTopic": args.log_topic,
        "processingGuarantees": args.processing_guarantees,
        "parallelism": args.parallelism,
        "userConfig": args.user_config or {},
        "subscriptionPosition": args.subs_position,
    }
    try:
        config = parse_function_config({k: v for k, v in doc.items() if v is not None})
    except FunctionConfigError as exc:
        print(f"magnetar functions localrun: {exc}", file=sys.stderr)
        return 2
    from magnetar.common.errors import InvalidArgument
    from magnetar.functions.auth import ClientAuth

    auth = ClientAuth(args.client_auth_plugin, args.client_auth_params)
    try:
        auth.check()
    except InvalidArgument as exc:
        print(f"magnetar functions localrun: {exc.message}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_run(config, args, auth))
    except Exception as exc:
        print(f"magnetar functions localrun: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


async def _run(config, args: argparse.Namespace, auth) -> None:
    from magnetar.functions.instance import FunctionInstance
    from magnetar.functions.state import HttpStateClient, LocalState

    instances = []
    for i in range(config.parallelism):
        url = args.state_storage_service_url
        state = HttpStateClient(url, config.fqfn, headers=auth.http_headers()) if url else LocalState()
        instances.append(
            FunctionInstance(
                config, i, args.py, args.broker_service_url, state, web_url=args.web_service_url, auth=auth
            )
        )
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, lambda: [inst.stop() for inst in instances])
    print(json.dumps({"localrun": config.fqfn, "instances": config.parallelism}), flush=True)
    async with asyncio.TaskGroup() as tg:
        for inst in instances:
            tg.create_task(inst.run())
