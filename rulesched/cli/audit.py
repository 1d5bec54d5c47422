"""`rulesched audit`: which running pods the rules put in violation on their nodes, from files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rulesched.cli.common import fail
from rulesched.rules.cel import ENGINE_NAMES

AUDIT_HELP = """\
Audits the pods of a PodList on the nodes of a NodeList against the rules, as the server's GET /audit:
  rulesched audit --rules rules --nodes nodes.yaml --pods pods.yaml --metrics metrics.yaml
or the latest state of each node a recording (rulesched serve --record DIR) saw:
  rulesched audit --rules rules --recording recording/
Exit status: 0 when nothing --fail-on names is found, 1 when it is, 2 for unusable input or rules.
"""


def add(commands: Any) -> None:
    audit = commands.add_parser(
        "audit",
        help="list the running pods the rules reject on their own nodes (violations)",
        epilog=AUDIT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    audit.add_argument("--rules", type=Path, action="append", required=True, help="rules directory or file")
    audit.add_argument("--nodes", type=Path, help="a NodeList file, JSON or YAML")
    audit.add_argument("--pods", type=Path, help="a PodList file: the running pods")
    audit.add_argument(
        "--recording", type=Path, help="instead of the files: a recording (serve --record), its latest state"
    )
    audit.add_argument("--metrics", type=Path, help="a NodeMetricsList file")
    audit.add_argument("--namespaces", type=Path, help="a NamespaceList file (namespaceObject)")
    audit.add_argument("--cel-engine", choices=ENGINE_NAMES, default="cpp", help="CEL engine (default cpp)")
    audit.add_argument("--output", "-o", choices=("text", "json", "junit"), default="text")
    audit.add_argument(
        "--fail-on",
        choices=("never", "enforce", "any"),
        default="enforce",
        help="exit 1 on violations of Enforce filters (default), of any filter (also mode: Audit), or never",
    )
    audit.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rulesched.rules.errors import RulesLoadFailed
    from rulesched.tools.audit import AuditInputs, failed, render, run_audit
    from rulesched.tools.inputs import InputError
    from rulesched.tools.recording_read import RecordingError

    files = (args.nodes, args.pods, args.metrics, args.namespaces)
    if args.recording is not None and any(files):
        return fail("audit --recording reads the nodes, pods, metrics and namespaces it recorded: drop the files", 2)
    if args.recording is None and not (args.nodes and args.pods):
        return fail("audit needs --nodes and --pods (or --recording)", 2)
    inputs = args.recording or AuditInputs(*files)
    try:
        result = run_audit(args.rules, args.cel_engine, inputs)
    except (InputError, RecordingError, RulesLoadFailed) as error:
        return fail(str(error), 2)
    sys.stdout.write(render(result, args.output))
    return 1 if failed(result, args.fail_on) else 0
