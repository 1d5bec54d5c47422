"""`rulesched replay`: decide a recording's calls again with new rules and report the impact.

Exit status: 0 the report was made and no `--fail-on` threshold was breached; 1 a threshold was breached;
2 nothing could be replayed (a recording refused, rules that do not load, a bad flag). With
`--to-ruletest POD` it writes a RuleTest of that pod's recorded decision instead (docs/rules/ruletest.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rulesched.cli.common import fail
from rulesched.rules.cel import ENGINE_NAMES

REPLAY_HELP = """\
examples:
  rulesched replay /var/lib/rulesched/recording --rules rules-draft
  rulesched replay recording --rules new --baseline old --output json --fail-on 'unschedulable>0'
  rulesched replay recording --rules rules --output markdown > comment.md   # a pull-request comment
  rulesched replay recording --rules rules --to-ruletest default/web-1 --out rules/tests/incident-42
"""


def add(commands: Any) -> None:
    replay = commands.add_parser(
        "replay",
        help="decide a recording's calls again with new rules: what would change",
        description="Exit status: 0 replayed, 1 a --fail-on threshold was breached, 2 could not replay.",
        epilog=REPLAY_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    replay.add_argument("recording", type=Path, help="a recording directory (serve --record) or one segment file")
    replay.add_argument("--rules", type=Path, action="append", required=True, help="the NEW rules (repeatable)")
    replay.add_argument(
        "--baseline", type=Path, action="append", help="the OLD rules to compare with (default: the recorded decisions)"
    )
    replay.add_argument("--output", "-o", choices=("text", "json", "junit", "markdown"), default="text")
    replay.add_argument(
        "--fail-on", default="", metavar="METRIC>N,…", help="exit 1 when a count passes its bound: unschedulable>0"
    )
    replay.add_argument("--cel-engine", choices=ENGINE_NAMES, default="cpp")
    replay.add_argument("--to-ruletest", metavar="NAMESPACE/NAME", help="write a RuleTest of this pod's decision")
    replay.add_argument("--out", type=Path, metavar="DIR", help="with --to-ruletest: the directory to write it in")
    replay.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rulesched.rules.errors import RulesLoadFailed
    from rulesched.tools.recording_read import RecordingError
    from rulesched.tools.replay.report import ThresholdError
    from rulesched.tools.replay.ruletest import RuleTestError

    if bool(args.to_ruletest) != bool(args.out):
        return fail("--to-ruletest POD and --out DIR go together", 2)
    try:
        return _ruletest(args) if args.to_ruletest else _replay(args)
    except (RecordingError, RulesLoadFailed, ThresholdError, RuleTestError) as error:
        return fail(str(error), 2)


def _replay(args: argparse.Namespace) -> int:
    from rulesched.rules.cel import make_engine
    from rulesched.rules.loader import load_rule_book
    from rulesched.tools.recording_read import Recording, read_calls
    from rulesched.tools.replay.impact import replay
    from rulesched.tools.replay.report import breached, parse_thresholds, render_junit, render_text, report

    thresholds = parse_thresholds(args.fail_on)
    engine = make_engine(args.cel_engine)
    new = load_rule_book(args.rules, engine)
    baseline = load_rule_book(args.baseline, engine) if args.baseline else None
    recording = Recording(args.recording)
    impact = replay(read_calls(recording), new, baseline)
    rules = {
        "new": ", ".join(map(str, args.rules)),
        "baseline": ", ".join(map(str, args.baseline)) if args.baseline else "the recorded decisions",
    }
    found = report(recording, impact, rules, thresholds)
    if args.output == "json":
        sys.stdout.write(json.dumps(found, indent=2) + "\n")
    elif args.output == "markdown":
        from rulesched.tools.replay.markdown import render_markdown

        sys.stdout.write(render_markdown(found))
    else:
        sys.stdout.write(render_junit(found) if args.output == "junit" else render_text(found))
    return 1 if breached(found) else 0


def _ruletest(args: argparse.Namespace) -> int:
    from rulesched.tools.recording_read import Recording
    from rulesched.tools.replay.ruletest import write_ruletest

    written = write_ruletest(Recording(args.recording), args.to_ruletest, args.rules, args.out)
    print(f"wrote {written}; run it with: rulesched test {written}")
    return 0
