"""`rulesched explain`: why a pod would land where it lands, every rule on every node (local or server)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rulesched.cli.common import fail
from rulesched.rules.cel import ENGINE_NAMES

EXPLAIN_HELP = """\
Local mode evaluates the rules on files, exactly as the server does:
  rulesched explain --rules rules --pod pod.json --nodes nodes.yaml --metrics metrics.yaml
Server mode asks a running `rulesched serve --enable-explain`:
  rulesched explain --server http://127.0.0.1:8888 --pod pod.json --node-names node-a,node-b
and with --shadow, what its shadow rules (`serve --shadow-rules`) would decide instead.
"""


def add(commands: Any) -> None:
    explain = commands.add_parser(
        "explain",
        help="show why a pod would land where it lands: every rule on every node",
        epilog=EXPLAIN_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    explain.add_argument("--pod", required=True, help="the Pod, JSON or YAML; - reads standard input")
    explain.add_argument("--rules", type=Path, action="append", help="rules directory or file (repeatable)")
    explain.add_argument("--nodes", type=Path, help="a NodeList file, JSON or YAML")
    explain.add_argument("--metrics", type=Path, help="a NodeMetricsList file (local mode)")
    explain.add_argument("--pods", type=Path, help="a PodList file: the pods on the nodes (local mode)")
    explain.add_argument("--namespaces", type=Path, help="a NamespaceList file (local mode)")
    explain.add_argument("--cel-engine", choices=ENGINE_NAMES, default="cpp", help="CEL engine (local mode)")
    explain.add_argument("--server", metavar="URL", help="ask the extender at URL (POST URL/explain)")
    explain.add_argument("--node-names", metavar="A,B,C", help="server mode: the nodes, by name (names mode)")
    explain.add_argument(
        "--shadow", action="store_true", help="server mode: the shadow rules' view (serve --shadow-rules)"
    )
    explain.add_argument("--output", "-o", choices=("table", "json"), default="table")
    explain.set_defaults(run=run)


def usage_error(args: argparse.Namespace) -> str | None:
    """What is wrong with the combination of flags, if anything."""
    if args.server:
        if args.rules or args.metrics or args.pods or args.namespaces:
            return (
                "explain --server takes the rules, metrics, pods and namespaces of the server: "
                "drop --rules, --metrics, --pods and --namespaces"
            )
        if bool(args.node_names) == bool(args.nodes):
            return "explain --server needs --node-names (names mode) or --nodes (full mode), not both"
        return None
    if args.node_names:
        return "--node-names needs --server; locally give a NodeList with --nodes"
    if args.shadow:
        return "--shadow needs --server: locally, give the shadow rules with --rules"
    if not args.rules or not args.nodes:
        return "explain needs --rules and --nodes (or --server URL)"
    return None


def run(args: argparse.Namespace) -> int:
    from rulesched.rules.errors import RulesLoadFailed
    from rulesched.tools.explain import ExplainError
    from rulesched.tools.explain_table import render_table
    from rulesched.tools.inputs import InputError

    usage = usage_error(args)
    if usage:
        return fail(usage, 2)
    try:
        report = _report(args)
    except (InputError, ExplainError, RulesLoadFailed) as error:
        return fail(str(error))
    text = json.dumps(report, indent=2) + "\n" if args.output == "json" else render_table(report)
    sys.stdout.write(text)
    return 0


def _report(args: argparse.Namespace) -> dict[str, Any]:
    from rulesched.tools.explain import explain_local, explain_remote, extender_args
    from rulesched.tools.inputs import read_nodes, read_pod

    pod = read_pod(args.pod)
    nodes = read_nodes(args.nodes) if args.nodes else None
    if args.server:
        names = [n.strip() for n in (args.node_names or "").split(",") if n.strip()]
        return explain_remote(args.server, extender_args(pod, names, nodes), book="shadow" if args.shadow else "live")
    files = {"pods": args.pods, "namespaces": args.namespaces}
    return explain_local(args.rules, args.cel_engine, pod, nodes or [], args.metrics, **files)
