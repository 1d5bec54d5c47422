"""Where the time of one names-mode request goes, stage by stage, in process.

Usage: `python bench/stages.py [--size 1000] [--rules founding|pod-dependent] [--pods replica|new] [--count 300]`

Builds the real server (`rulesched.extender.server.build`, the benchmark's seeded nodes, metrics and rule
set, as files) and times, for filter and for prioritize, the stages a request goes through after its
body has arrived: decoding the body (`wire.decode`: orjson and the top-level keys), validating it (the
rest of `wire.ExtenderArgs.parse`: the pod, the names are strings, their count, no name twice), finding
the candidates' node contexts (`NodeContexts.for_names`), evaluating the rules (`engine.evaluate`: memo
lookups for a replica, evaluations for a new pod), making and encoding the answer (the names that passed
and the reasons of the others; the scores), and observing the decision (the
decision log line, JSON on stderr, and the Prometheus counters). What is left of a request's latency, the
HTTP server and the framework, is what `bench/http_floor.py` measures. Medians in microseconds over
`--count` pods (bounded: at most 60 s).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.harness import request_body, write_inputs  # noqa: E402
from bench.workload import make_workload  # noqa: E402
from rulesched.decide.fast import evaluate, prepared  # noqa: E402
from rulesched.decide.verbs import Call, Verb  # noqa: E402
from rulesched.extender import wire  # noqa: E402
from rulesched.extender.logformat import configure_logging  # noqa: E402
from rulesched.extender.server import build  # noqa: E402
from rulesched.settings import Settings  # noqa: E402

STAGES = ("decode", "validate", "candidates", "evaluate", "encode", "observe")


def timed(samples: dict[str, list[float]], stage: str, call: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    result = call()
    samples[stage].append((time.perf_counter() - started) * 1e6)
    return result


def one_verb(extender: Any, body: bytes, verb: str, samples: dict[str, list[float]]) -> list[str]:
    """Run `verb`'s stages for one request body; the names that passed (filter) or were scored."""
    limit = extender.settings.max_candidates
    timed(samples, "decode", lambda: wire.decode(body))
    args = timed(samples, "validate", lambda: wire.ExtenderArgs.parse(body, limit))
    samples["validate"][-1] = max(0.0, samples["validate"][-1] - samples["decode"][-1])  # parse decodes too
    contexts, _ = timed(samples, "candidates", lambda: extender.contexts.for_names(args.node_names))
    book = extender.book()
    namespace = extender.namespace(args.pod)
    filters = verb == "filter"
    call = Call(args.pod, contexts, Verb.named(verb), namespace=namespace, distinct=True, names=args.node_names)
    decision = timed(samples, "evaluate", lambda: evaluate(prepared(book), call))
    names = len(args.node_names or ())
    if filters:
        outcome: list[Any] = []  # the answer's parts, made in the timed stage as the server makes them

        def encode() -> bytes:
            outcome[:] = decision.outcome()
            return orjson.dumps(wire.filter_result(None, *outcome))

        timed(samples, "encode", encode)
        passed: list[str] = outcome[0]
        observe = extender.observer.decision
        timed(samples, "observe", lambda: observe("filter", args.pod, decision, names, 0.001, passed=len(passed)))
        return passed
    found = decision.names
    timed(samples, "encode", lambda: wire.host_priorities(found, decision.verdicts))
    observe = extender.observer.decision
    timed(samples, "observe", lambda: observe("prioritize", args.pod, decision, names, 0.001, passed=len(found)))
    return list(found)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Where a names-mode request's time goes, stage by stage.")
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--rules", choices=("founding", "pod-dependent"), default="founding")
    parser.add_argument("--pods", choices=("replica", "new"), default="replica")
    parser.add_argument("--count", type=int, default=300)
    args = parser.parse_args(argv)
    sys.stderr = open(os.devnull, "w")  # noqa: SIM115  (the decision lines, written as serve writes them)
    workload = make_workload(args.size)
    pods = workload.pods(args.count + 20, replicas=args.pods == "replica")
    samples: dict[str, list[float]] = {f"{v}/{s}": [] for v in ("filter", "prioritize") for s in STAGES}
    with tempfile.TemporaryDirectory(prefix="rulesched-stages-") as directory:
        files = Path(directory)
        write_inputs(workload, files)
        settings = Settings(
            rules_dir=files / f"rules-{args.rules}",
            nodes_file=files / "nodes.json",
            metrics_file=files / "metrics.json",
            cluster="off",
        )
        configure_logging(settings.log_level, settings.log_format)  # the decision log as `serve` writes it
        extender = build(settings).app.state.extender
        deadline = time.monotonic() + 60
        for index, pod in enumerate(pods):
            if time.monotonic() > deadline:
                break
            verb_samples: dict[str, dict[str, list[float]]] = {
                v: {s: [] for s in STAGES} for v in ("filter", "prioritize")
            }
            passed = one_verb(extender, request_body(pod, workload.nodes, "names"), "filter", verb_samples["filter"])
            chosen = [n for n in workload.nodes if n["metadata"]["name"] in set(passed)]
            one_verb(extender, request_body(pod, chosen, "names"), "prioritize", verb_samples["prioritize"])
            if index >= 20:  # warm-up: the first pods fill the caches
                for verb, found in verb_samples.items():
                    for stage, values in found.items():
                        samples[f"{verb}/{stage}"].extend(values)
    print(f"| stage ({args.size} names, {args.rules}, {args.pods} pods) | p50 µs |")
    print("|---|---:|")
    for name, values in samples.items():
        print(f"| {name} | {statistics.median(values):.0f} |")
    total = sum(statistics.median(v) for v in samples.values())
    print(f"| in process, filter + prioritize | {total:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
