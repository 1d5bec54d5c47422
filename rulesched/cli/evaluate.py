"""`rulesched eval`: one CEL expression, compiled and evaluated in the rules' environment."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rulesched.cli.common import fail
from rulesched.rules.cel import ENGINE_NAMES


def add(commands: Any) -> None:
    evaluate = commands.add_parser(
        "eval",
        help="evaluate one CEL expression in the rules' environment (variables, functions, limits)",
        description="Exit status: 0 with a value, 1 with an error (compile, runtime or cost), 2 for unusable input.",
    )
    evaluate.add_argument("expression", help="the CEL expression")
    evaluate.add_argument("--pod", help="the Pod, JSON or YAML; - reads standard input (default: {})")
    evaluate.add_argument("--node", type=Path, help="the Node, JSON or YAML (default: {})")
    evaluate.add_argument("--metrics", type=Path, help="a NodeMetricsList holding the node's sample")
    evaluate.add_argument("--cel-engine", choices=ENGINE_NAMES, default="cpp", help="CEL engine (default cpp)")
    evaluate.add_argument("--output", "-o", choices=("text", "json"), default="text")
    evaluate.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rulesched.tools.evaluate import EvalInputs, render, run_eval
    from rulesched.tools.inputs import InputError

    try:
        answer = run_eval(args.expression, args.cel_engine, EvalInputs(args.pod, args.node, args.metrics))
    except InputError as error:
        return fail(str(error), 2)
    sys.stdout.write(render(answer, args.output))
    return 0 if "value" in answer else 1
