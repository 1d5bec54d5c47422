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
A pod of a running cluster, its nodes, the pods on them, its namespace and the node metrics read from the API
(--kubeconfig, else in-cluster, $KUBECONFIG, ~/.kube/config; also as `kubectl rulesched explain`):
  rulesched explain web-team/web-1 --rules rules
  rulesched explain web-team/web-1 --server http://127.0.0.1:8888
"""


def add(commands: Any) -> None:
    explain = commands.add_parser(
        "explain",
        help="show why a pod would land where it lands: every rule on every node",
        epilog=EXPLAIN_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    explain.add_argument(
        "target", nargs="?", metavar="NAMESPACE/NAME", help="a pod of the cluster: read it and its nodes from the API"
    )
    explain.add_argument("--pod", help="the Pod, JSON or YAML; - reads standard input")
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
    explain.add_argument("--kubeconfig", type=Path, help="with NAMESPACE/NAME: the credentials (default: as serve)")
    explain.add_argument(
        "--send-nodes", action="store_true", help="with NAMESPACE/NAME --server: send the nodes read (full mode)"
    )
    explain.add_argument(
        "--output", "-o", choices=("text", "table", "json"), default="text", help="text (a table; also `table`) or json"
    )
    explain.set_defaults(run=run)


def usage_error(args: argparse.Namespace) -> str | None:
    """What is wrong with the combination of flags, if anything."""
    if args.target:
        return _live_usage_error(args)
    if args.kubeconfig or args.send_nodes:
        return "--kubeconfig and --send-nodes go with NAMESPACE/NAME (a pod of the cluster)"
    if not args.pod:
        return "explain needs a pod: NAMESPACE/NAME (from the cluster) or --pod FILE"
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


def _live_usage_error(args: argparse.Namespace) -> str | None:
    files = ("pod", "nodes", "node_names", "metrics", "pods", "namespaces")
    read = ["--" + name.replace("_", "-") for name in files if getattr(args, name)]
    if read:
        return f"NAMESPACE/NAME reads the pod and the cluster from the API: drop {', '.join(read)}"
    if args.server:
        return "explain NAMESPACE/NAME --server takes the server's rules: drop --rules" if args.rules else None
    if args.shadow or args.send_nodes:
        return "--shadow and --send-nodes need --server"
    return None if args.rules else "explain NAMESPACE/NAME needs --rules (or --server URL)"


def run(args: argparse.Namespace) -> int:
    from rulesched.cluster.snapshot import SnapshotError
    from rulesched.rules.errors import RulesLoadFailed
    from rulesched.tools.explain import ExplainError
    from rulesched.tools.explain_live import live_lines
    from rulesched.tools.explain_table import render_table
    from rulesched.tools.inputs import InputError

    usage = usage_error(args)
    if usage:
        return fail(usage, 2)
    try:
        report = _live_report(args) if args.target else _report(args)
    except (InputError, ExplainError, RulesLoadFailed, SnapshotError, ValueError) as error:
        return fail(str(error))
    if args.output == "json":
        text = json.dumps(report, indent=2) + "\n"
    else:
        text = render_table(report)
        text = "\n".join([*live_lines(report["live"]), "", text]) if "live" in report else text
    sys.stdout.write(text)
    return 0


def _report(args: argparse.Namespace) -> dict[str, Any]:
    from rulesched.tools.explain import explain_local, explain_remote, extender_args
    from rulesched.tools.inputs import SourceFiles, read_nodes, read_pod

    pod = read_pod(args.pod)
    nodes = read_nodes(args.nodes) if args.nodes else None
    if args.server:
        names = [n.strip() for n in (args.node_names or "").split(",") if n.strip()]
        return explain_remote(args.server, extender_args(pod, names, nodes), book="shadow" if args.shadow else "live")
    files = SourceFiles(args.metrics, args.pods, args.namespaces)
    return explain_local(args.rules, args.cel_engine, pod, nodes or [], files)


def _live_report(args: argparse.Namespace) -> dict[str, Any]:
    from rulesched.tools.explain_live import explain_live, explain_live_remote, snapshot_of

    snapshot = snapshot_of(args.target, args.kubeconfig)
    if args.server:
        book = "shadow" if args.shadow else "live"
        return explain_live_remote(args.server, snapshot, send_nodes=args.send_nodes, book=book)
    return explain_live(args.rules, args.cel_engine, snapshot)
