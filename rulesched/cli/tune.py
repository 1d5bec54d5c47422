"""`rulesched tune`: the score weights and the extender's weight that balance (or pack) a cluster, found by
placing a recording's (or the given files') pods again through kube-scheduler's model with other weights.

Exit status: 0 the report was made (new weights proposed or not); 2 nothing could be tuned (a recording
refused, rules that do not load, a bad flag or file). docs/guides/tuning-weights.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rulesched.cli.common import fail
from rulesched.rules.cel import ENGINE_NAMES

if TYPE_CHECKING:
    from rulesched.tools.tune.model import Scene

TUNE_HELP = """\
examples:
  rulesched tune --rules rules --recording /var/lib/rulesched/recording
  rulesched tune --rules rules --nodes nodes.yaml --pods pods.yaml --metrics metrics.yaml --objective pack
  rulesched tune --rules rules --recording rec --scheduler-config scheduler.yaml --output markdown > comment.md
  rulesched tune --rules rules --recording rec --write rules-tuned   # the rule files with the new weights
"""


def add(commands: Any) -> None:
    tune = commands.add_parser(
        "tune",
        help="find the score weights and the extender's weight that balance the cluster",
        description="Exit status: 0 tuned (new weights proposed or not), 2 could not tune.",
        epilog=TUNE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tune.add_argument("--rules", type=Path, action="append", required=True, help="the rules to tune (repeatable)")
    tune.add_argument("--recording", type=Path, help="a recording directory (serve --record) or one segment file")
    tune.add_argument("--nodes", type=Path, help="without --recording: a NodeList")
    tune.add_argument("--pods", type=Path, help="without --recording: a PodList; its unbound pods are placed")
    tune.add_argument("--metrics", type=Path, help="without --recording: a NodeMetricsList (each node's use)")
    tune.add_argument("--pod-metrics", type=Path, help="without --recording: a PodMetricsList (workloads' use)")
    tune.add_argument("--objective", choices=("balance", "pack"), default="balance")
    tune.add_argument("--scheduler-config", type=Path, help="the KubeSchedulerConfiguration (plugin weights)")
    tune.add_argument("--output", "-o", choices=("text", "json", "markdown"), default="text")
    tune.add_argument("--write", type=Path, metavar="DIR", help="write the rule files with the new weights here")
    tune.add_argument("--trials", type=int, default=40, help="weight sets tried (at most 1000)")
    tune.add_argument("--seeds", type=int, default=3, help="placements of each weight set (its noise)")
    tune.add_argument("--seed", type=int, default=1)
    tune.add_argument("--max-seconds", type=float, default=120.0, help="the search's time bound")
    tune.add_argument("--threshold", type=float, default=0.8, help="pack: the CPU share no node may pass")
    tune.add_argument("--no-holdout", action="store_true", help="tune on every arrival (no held-out half)")
    tune.add_argument("--interval", type=float, default=15.0, help="seconds between metrics polls (the server's)")
    tune.add_argument("--recent-seconds", type=float, default=30.0, help="the server's --recent-seconds")
    tune.add_argument("--gap", type=float, default=1.0, help="without --recording: seconds between arrivals")
    tune.add_argument("--cel-engine", choices=ENGINE_NAMES, default="cpp")
    tune.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rulesched.rules.errors import RulesLoadFailed
    from rulesched.tools.inputs import InputError
    from rulesched.tools.recording_read import RecordingError
    from rulesched.tools.tune.config import ConfigError
    from rulesched.tools.tune.scene import SceneError
    from rulesched.tools.tune.write import WriteError

    problem = _check(args)
    if problem:
        return fail(problem, 2)
    try:
        return _tune(args)
    except (RecordingError, RulesLoadFailed, InputError, SceneError, ConfigError, WriteError, OSError) as error:
        return fail(str(error), 2)


def _check(args: argparse.Namespace) -> str | None:
    files = (args.nodes, args.pods, args.metrics, args.pod_metrics)
    if args.recording is not None and any(f is not None for f in files):
        return "--recording, or --nodes/--pods/--metrics: not both"
    if args.recording is None and (args.nodes is None or args.pods is None):
        return "give --recording DIR, or --nodes FILE and --pods FILE (with --metrics FILE)"
    if not 1 <= args.trials <= 1000 or not 1 <= args.seeds <= 20 or args.max_seconds <= 0:
        return "--trials 1..1000, --seeds 1..20 and --max-seconds > 0"
    if args.interval <= 0 or args.recent_seconds <= 0 or args.gap < 0 or not 0 < args.threshold <= 1:
        return "--interval and --recent-seconds > 0, --gap >= 0, --threshold in (0, 1]"
    return None


def _tune(args: argparse.Namespace) -> int:
    from rulesched.rules.cel import make_engine
    from rulesched.rules.loader import load_rule_book
    from rulesched.tools.tune.config import read_profile
    from rulesched.tools.tune.search import Search, current_weights, report, tune

    book = load_rule_book(args.rules, make_engine(args.cel_engine))
    profile = read_profile(args.scheduler_config)
    scene, source = _scene(args)
    search = Search(
        args.objective, args.trials, args.seeds, args.max_seconds, args.seed, args.threshold, not args.no_holdout
    )
    result = tune(scene, book, profile.plugins, current_weights(book, profile.extender), search)
    found = report(result, search, scene, source)
    if args.write is not None:
        found["written"] = _write(args, found)
    _print(found, args.output)
    return 0


def _scene(args: argparse.Namespace) -> tuple[Scene, dict[str, str]]:
    from rulesched.tools.recording_read import Recording, read_calls
    from rulesched.tools.tune.scene import from_calls, from_files

    if args.recording is not None:
        scene = from_calls(read_calls(Recording(args.recording)), args.interval, args.recent_seconds)
        return scene, {"recording": str(args.recording), "rules": ", ".join(map(str, args.rules))}
    paths = {"nodes": args.nodes, "pods": args.pods, "metrics": args.metrics, "pod-metrics": args.pod_metrics}
    scene = from_files(paths, args.gap, args.interval, args.recent_seconds)
    return scene, {k: str(v) for k, v in paths.items() if v is not None} | {"rules": ", ".join(map(str, args.rules))}


def _write(args: argparse.Namespace, found: dict[str, Any]) -> list[str]:
    from rulesched.tools.tune.write import write_rules

    weights = found["chosen"]["weights"]["rules"]
    return [str(p) for p in write_rules(args.rules, weights, args.write)]


def _print(found: dict[str, Any], output: str) -> None:
    from rulesched.tools.tune.report import render_markdown, render_text

    if output == "json":
        sys.stdout.write(json.dumps(found, indent=2) + "\n")
        return
    sys.stdout.write(render_markdown(found) if output == "markdown" else render_text(found))
    if found.get("written"):
        extender = found["chosen"]["weights"]["extender"]
        sys.stdout.write(f"\nwrote {len(found['written'])} rule files; set extenders[].weight: {extender:g}\n")
