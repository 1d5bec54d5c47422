"""The rule authors' subcommands of `rulesched`: `explain`, `test`, `eval` and `config scheduler`.

`add_tool_commands` declares their flags on the `rulesched` parser; `run_tool_command` runs the
chosen one and returns its exit status. Each command's work lives in its own module.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rulesched.rules.cel import ENGINE_NAMES
from rulesched.rules.errors import RulesLoadFailed
from rulesched.tools.evaluate import EvalInputs, render, run_eval
from rulesched.tools.explain import ExplainError, explain_local, explain_remote, extender_args
from rulesched.tools.explain_table import render_table
from rulesched.tools.inputs import InputError, read_nodes, read_pod
from rulesched.tools.ruletest_load import DEFAULT_PATH, load_tests
from rulesched.tools.ruletest_report import print_results, write_junit
from rulesched.tools.ruletest_run import Runner
from rulesched.tools.scheduler_config import ConfigError, SchedulerOptions, render_configuration

EXPLAIN_HELP = """\
Local mode evaluates the rules on files, exactly as the server does:
  rulesched explain --rules rules --pod pod.json --nodes nodes.yaml --metrics metrics.yaml
Server mode asks a running `rulesched serve --enable-explain`:
  rulesched explain --server http://127.0.0.1:8888 --pod pod.json --node-names node-a,node-b
"""


def _explain_parser(commands: Any) -> None:
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
    explain.add_argument("--cel-engine", choices=ENGINE_NAMES, default="cpp", help="CEL engine (local mode)")
    explain.add_argument("--server", metavar="URL", help="ask the extender at URL (POST URL/explain)")
    explain.add_argument("--node-names", metavar="A,B,C", help="server mode: the nodes, by name (names mode)")
    explain.add_argument("--output", "-o", choices=("table", "json"), default="table")


def _test_parser(commands: Any) -> None:
    test = commands.add_parser(
        "test",
        help="run RuleTest files: expected decisions for pods on a cluster snapshot",
        description="Exit status: 0 every case passed, 1 some case failed, 2 some test could not run.",
    )
    test.add_argument(
        "paths",
        nargs="*",
        type=Path,
        help=f"RuleTest files or directories (searched recursively); default {DEFAULT_PATH}",
    )
    test.add_argument("--cel-engine", choices=ENGINE_NAMES, default="cpp", help="unless a file sets celEngine")
    test.add_argument("--junit", type=Path, metavar="FILE", help="also write JUnit XML to FILE")
    test.add_argument("--verbose", "-v", action="store_true", help="list passing cases too")


def _eval_parser(commands: Any) -> None:
    evaluate = commands.add_parser(
        "eval",
        help="evaluate one CEL expression in the rules' environment",
        description="Exit status: 0 with a value, 1 with an error (compile, runtime or cost), 2 for unusable input.",
    )
    evaluate.add_argument("expression", help="the CEL expression")
    evaluate.add_argument("--pod", help="the Pod, JSON or YAML; - reads standard input (default: {})")
    evaluate.add_argument("--node", type=Path, help="the Node, JSON or YAML (default: {})")
    evaluate.add_argument("--metrics", type=Path, help="a NodeMetricsList with the node's sample")
    evaluate.add_argument("--cel-engine", choices=ENGINE_NAMES, default="cpp", help="CEL engine (default cpp)")
    evaluate.add_argument("--output", "-o", choices=("text", "json"), default="text")


def _config_parser(commands: Any) -> None:
    config = commands.add_parser("config", help="generate configuration for the components around rulesched")
    kinds = config.add_subparsers(dest="config_kind", required=True, metavar="KIND")
    scheduler = kinds.add_parser("scheduler", help="a KubeSchedulerConfiguration calling rulesched")
    add = scheduler.add_argument
    add("--url", default="http://127.0.0.1:8888", help="the extender's URL prefix (default %(default)s)")
    add("--weight", type=int, default=1, help="prioritize weight, > 0 (default %(default)s)")
    add("--node-cache", action=argparse.BooleanOptionalAction, default=True, help="names mode (default on)")
    add("--bind", action="store_true", help="let rulesched bind (serve it with --enable-bind)")
    add("--preempt", action="store_true", help="ask rulesched which preemption victims are acceptable")
    add("--timeout", default="5s", help="httpTimeout, a Go duration (default %(default)s)")
    add("--request-deadline", type=float, default=2.0, help="the server's --request-deadline (default %(default)s)")
    add("--ignorable", action="store_true", help="on extender errors schedule without it instead of failing")
    add("--scheduler-name", help="run as a second scheduler: its profile name and leader election lease")
    add("--namespace", default="rulesched-system", help="the lease's namespace (default %(default)s)")
    add("--kubeconfig", help="clientConnection.kubeconfig (default: in-cluster)")
    add("--tls-ca-file", help="verify the extender's certificate with this CA (sets enableHTTPS)")
    add("--tls-cert-file", help="client certificate kube-scheduler presents")
    add("--tls-key-file", help="its private key")
    add("--tls-server-name", help="the name to verify in the extender's certificate")
    add("--managed-resource", action="append", default=[], metavar="NAME", help="only send pods requesting NAME")


def add_tool_commands(commands: Any) -> None:
    """Register the tool subcommands on the `rulesched` parser."""
    _explain_parser(commands)
    _test_parser(commands)
    _eval_parser(commands)
    _config_parser(commands)


def run_tool_command(args: argparse.Namespace) -> int:
    """Run the tool subcommand `args` chose; its exit status."""
    if args.command == "explain":
        return _explain(args)
    if args.command == "test":
        return _test(args)
    if args.command == "config":
        return _config(args)
    if args.command == "eval":
        return _eval(args)
    raise SystemExit(f"rulesched: unknown command {args.command!r}")


def _fail(message: str, status: int = 1) -> int:
    print(f"rulesched: {message}", file=sys.stderr)
    return status


def _explain_usage(args: argparse.Namespace) -> str | None:
    if args.server:
        if args.rules or args.metrics:
            return "explain --server takes the rules and metrics of the server: drop --rules and --metrics"
        if bool(args.node_names) == bool(args.nodes):
            return "explain --server needs --node-names (names mode) or --nodes (full mode), not both"
        return None
    if args.node_names:
        return "--node-names needs --server; locally give a NodeList with --nodes"
    if not args.rules or not args.nodes:
        return "explain needs --rules and --nodes (or --server URL)"
    return None


def _explain(args: argparse.Namespace) -> int:
    usage = _explain_usage(args)
    if usage:
        return _fail(usage, 2)
    try:
        pod = read_pod(args.pod)
        nodes = read_nodes(args.nodes) if args.nodes else None
        if args.server:
            names = [n.strip() for n in (args.node_names or "").split(",") if n.strip()]
            report = explain_remote(args.server, extender_args(pod, names, nodes))
        else:
            report = explain_local(args.rules, args.cel_engine, pod, nodes or [], args.metrics)
    except (InputError, ExplainError) as error:
        return _fail(str(error))
    except RulesLoadFailed as failure:
        return _fail(str(failure))
    text = json.dumps(report, indent=2) + "\n" if args.output == "json" else render_table(report)
    sys.stdout.write(text)
    return 0


def _eval(args: argparse.Namespace) -> int:
    try:
        answer = run_eval(args.expression, args.cel_engine, EvalInputs(args.pod, args.node, args.metrics))
    except InputError as error:
        return _fail(str(error), 2)
    sys.stdout.write(render(answer, args.output))
    return 0 if "value" in answer else 1


def _test(args: argparse.Namespace) -> int:
    suites, problems = load_tests(args.paths)
    runner = Runner(args.cel_engine)
    results = [runner.run(suite) for suite in suites]
    status = print_results(results, problems, sys.stdout, sys.stderr, verbose=args.verbose)
    if args.junit:
        write_junit(args.junit, results, problems)
    return status


def _config(args: argparse.Namespace) -> int:
    options = SchedulerOptions(
        url=args.url,
        weight=args.weight,
        node_cache=args.node_cache,
        bind=args.bind,
        preempt=args.preempt,
        timeout=args.timeout,
        scheduler_name=args.scheduler_name,
        namespace=args.namespace,
        kubeconfig=args.kubeconfig,
        tls_ca_file=args.tls_ca_file,
        tls_cert_file=args.tls_cert_file,
        tls_key_file=args.tls_key_file,
        tls_server_name=args.tls_server_name,
        ignorable=args.ignorable,
        managed_resources=tuple(args.managed_resource),
        request_deadline=args.request_deadline,
    )
    try:
        sys.stdout.write(render_configuration(options))
    except ConfigError as error:
        return _fail(str(error), 2)
    return 0
