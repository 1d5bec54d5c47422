"""What handing an answered call to the shadow rules costs, in this process or to a second one.

Usage: `python bench/shadow_handoff.py [--sizes 500,1000] [--repeat 30] [--json FILE]`

The shadow decision must see the state the live one saw (the same node snapshots, metrics, pods). The
extender keeps it in the same process and hands a call on by reference (`Shadow.submit`: the live outcome,
a byte a candidate, and references to the call's node contexts): it compares between calls on the event
loop. A second process (the other core) would have to be sent that state with each call, or keep its own
copy of the cluster state, kept in step with every watch event, metrics sample and placement, and be sent
only the call's names. This measures, on the benchmark's nodes (`bench/workload.py`), the bytes a call and
the milliseconds to pickle and unpickle them (the median of `--repeat`) for both kinds of second process,
and the milliseconds `Shadow.submit` takes to hand a call on, next to the live evaluation's own (of a call
the caches answer, as a replica's).
Bounded in count; in-process, no server.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import pickle
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import reported, sizes_of, write_inputs
from bench.workload import make_workload
from rulesched.cluster.contexts import NodeContexts
from rulesched.cluster.sources import FileMetricsSource, FileNodeSource
from rulesched.controllers.shadow import Shadow
from rulesched.controllers.shadow.metrics import ShadowMetrics
from rulesched.decide.fast import evaluate, prepared
from rulesched.decide.verbs import Call, Verb
from rulesched.handoff.answered import Answered
from rulesched.handoff.idle import Idle
from rulesched.rules.cel import make_engine
from rulesched.rules.loader import load_rule_book
from rulesched.rules.store import RuleStore

JSON = dict[str, Any]


def median_ms(work: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return round(statistics.median(times) * 1000, 3)


def measure(size: int, repeat: int, directory: Path) -> JSON:
    workload = make_workload(size)
    files = directory / str(size)
    files.mkdir()
    write_inputs(workload, files)
    nodes, pod = workload.nodes[:size], workload.pod(1)
    names = [n["metadata"]["name"] for n in nodes]
    stateless = pickle.dumps((pod, nodes), protocol=pickle.HIGHEST_PROTOCOL)
    stateful = pickle.dumps((pod, names), protocol=pickle.HIGHEST_PROTOCOL)
    rules = files / "rules-pod-dependent"  # the founding rules and a pod-dependent one (bench/workload.py)
    book = load_rule_book([rules], make_engine("cpp"))
    store = RuleStore([rules], make_engine("cpp"))
    store.reload()
    contexts = NodeContexts(FileNodeSource(files / "nodes.json"), FileMetricsSource(files / "metrics.json"))
    found, _ = contexts.for_names(names)
    now = datetime.datetime.now(datetime.UTC)
    call = Call(pod, found, Verb.FILTER, now, None, None, True, names)
    evaluate(prepared(book), call)  # the caches made, as for a call after the first
    live_ms = median_ms(lambda: evaluate(prepared(book), call), repeat)
    decision = evaluate(prepared(book), call)
    decision.outcome()  # what answering the call counted
    answered = Answered("filter", False, pod, found, {}, None, now, book, decision)
    idle = Idle()
    shadow = Shadow(store, idle, ShadowMetrics(), capacity=repeat + 1, deadline=5.0, inline_work=2000.0)

    async def handed_on() -> float:
        idle.busy()  # a request is being read: nothing is compared while this measures
        return median_ms(lambda: shadow.submit(answered), repeat)

    try:
        submit_ms = asyncio.run(handed_on())
    finally:
        shadow.stop()
    return {
        "size": size,
        "liveDecisionMs": live_ms,
        "inProcess": {"submitMs": submit_ms},
        "statelessProcess": {
            "bytes": len(stateless),
            "pickleMs": median_ms(lambda: pickle.dumps((pod, nodes), protocol=pickle.HIGHEST_PROTOCOL), repeat),
            "unpickleMs": median_ms(lambda: pickle.loads(stateless), repeat),  # our own bytes
        },
        "statefulProcess": {
            "bytes": len(stateful),
            "pickleMs": median_ms(lambda: pickle.dumps((pod, names), protocol=pickle.HIGHEST_PROTOCOL), repeat),
        },
    }


def table(results: Sequence[JSON]) -> str:
    lines = [
        "| nodes | live evaluation ms (cached) | handed on in process (Shadow.submit) ms "
        "| to a stateless process: KB, pickle ms, unpickle ms | to a process with its own state: KB, pickle ms |",
        "|---:|---:|---:|---|---|",
    ]
    for r in results:
        bare, own = r["statelessProcess"], r["statefulProcess"]
        lines.append(
            f"| {r['size']} | {r['liveDecisionMs']} | {r['inProcess']['submitMs']} "
            f"| {bare['bytes'] // 1024}, {bare['pickleMs']}, {bare['unpickleMs']} | {own['bytes'] // 1024}, "
            f"{own['pickleMs']} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500,1000", help="comma-separated candidate counts")
    parser.add_argument("--repeat", type=int, default=30, help="measurements of each (at most 1000)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    sizes = sizes_of(args.sizes)
    with tempfile.TemporaryDirectory(prefix="rulesched-handoff-") as directory:
        results = [measure(size, max(1, min(args.repeat, 1000)), Path(directory)) for size in sizes]
    return reported(table(results), results, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
