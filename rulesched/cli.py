"""The `rulesched` command: `serve`, `check`, and the rule authors' tools.

`main(argv) -> int` is a plain function, called directly by the tests; `entrypoint()` is the console
script. Flags become `Settings` fields, so a flag overrides the matching `RULESCHED_*` variable.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rulesched.rules.cel import ENGINE_NAMES


def _serve_parser(commands: Any) -> None:
    serve = commands.add_parser("serve", help="run the extender (HTTP) serving the rules")
    serve.add_argument("--rules", dest="rules_dir", type=Path, help="rules directory (default ./rules)")
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to listen on (default 8888)")
    serve.add_argument("--nodes", dest="nodes_file", type=Path, help="offline node source: a NodeList file")
    serve.add_argument("--metrics", dest="metrics_file", type=Path, help="offline metrics: a NodeMetricsList file")
    serve.add_argument("--pods", dest="pods_file", type=Path, help="offline pod source: a PodList file")
    serve.add_argument("--namespaces", dest="namespaces_file", type=Path, help="offline namespaces: a NamespaceList")
    serve.add_argument("--recent-seconds", type=float, help="how long an unconfirmed placement counts (default 30)")
    serve.add_argument("--cel-engine", choices=ENGINE_NAMES, help="CEL engine (default cpp)")
    serve.add_argument("--cluster", choices=("auto", "on", "off"), help="use a Kubernetes API (default auto)")
    serve.add_argument("--kubeconfig", type=Path, help="kubeconfig file (default: in-cluster, $KUBECONFIG, ~/.kube)")
    serve.add_argument("--metrics-interval", type=float, help="seconds between metrics-server polls (default 15)")
    serve.add_argument("--metrics-max-age", type=float, help="seconds after which a sample is stale (default 90)")
    serve.add_argument("--node-fetch-timeout", type=float, help="seconds to GET a node the cache lacks (default 2)")
    serve.add_argument("--enable-bind", action="store_true", default=None, help="answer /bind through the API")
    serve.add_argument("--enable-explain", action="store_true", default=None, help="serve POST /explain")
    serve.add_argument("--max-body-bytes", type=int, help="largest request body accepted (default 128 MiB)")
    serve.add_argument("--log-level", choices=("debug", "info", "warning", "error"), help="default info")
    serve.add_argument("--log-format", choices=("json", "text"), help="default json")
    serve.add_argument("--tls-cert-file", type=Path, help="serve HTTPS with this certificate")
    serve.add_argument("--tls-key-file", type=Path, help="the certificate's private key")
    serve.add_argument("--tls-client-ca-file", type=Path, help="require client certificates from this CA")


def _check_parser(commands: Any) -> None:
    check = commands.add_parser("check", help="load and compile rule files; print every error")
    check.add_argument("paths", nargs="*", type=Path, default=[Path("rules")], help="rule directories or files")
    check.add_argument("--cel-engine", choices=ENGINE_NAMES, default="cpp")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rulesched", description="A rule-driven Kubernetes scheduler extender.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _serve_parser(commands)
    _check_parser(commands)
    from rulesched.tools.commands import add_tool_commands

    add_tool_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the exit status is the return value."""
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "check":
        return _check(args)
    from rulesched.tools.commands import run_tool_command

    return run_tool_command(args)


def _serve(args: argparse.Namespace) -> int:
    from rulesched.extender.server import serve
    from rulesched.settings import Settings

    overrides = {k: v for k, v in vars(args).items() if k != "command" and v is not None}
    try:
        settings = Settings(**overrides)
    except ValidationError as error:
        for item in error.errors():
            print(f"rulesched: --{'-'.join(map(str, item['loc'])).replace('_', '-')}: {item['msg']}", file=sys.stderr)
        return 2
    return serve(settings)


def _check(args: argparse.Namespace) -> int:
    from rulesched.tools.check import check

    return check(args.paths, args.cel_engine, sys.stdout, sys.stderr)


def entrypoint() -> None:
    sys.exit(main())
