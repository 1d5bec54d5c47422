"""The Starlette application: the verbs, error handling, health, readiness, /rules and /metrics."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from rulesched.cluster import Cluster
from rulesched.cluster.pods.index import PodIndex
from rulesched.controllers.shadow import http as shadow_http
from rulesched.extender import routes
from rulesched.extender.after import AfterAnswer
from rulesched.extender.body import BodyTimeoutError, BodyTooLargeError
from rulesched.extender.observe import Observer
from rulesched.extender.responses import error_response, json_response
from rulesched.extender.state import Extender
from rulesched.extender.wire import TooManyError, WireError
from rulesched.rules.store import RuleStore
from rulesched.settings import Settings

log = logging.getLogger(__name__)

Verb = Callable[[Extender, Request], Awaitable[Response]]


def _guarded(extender: Extender, name: str, verb: Verb) -> Callable[[Request], Awaitable[Response]]:
    """`verb` with bad input answered as 400/413, anything unexpected as a logged 500, and counted."""

    async def endpoint(request: Request) -> Response:
        started = time.perf_counter()
        response = await _answer(extender, verb, request)
        count = functools.partial(
            extender.observer.metrics.request, name, response.status_code, time.perf_counter() - started
        )
        if isinstance(response.background, AfterAnswer):  # counted once the answer is sent, with the rest
            response.background.steps.append(count)
        else:
            count()
        return response

    return endpoint


async def _answer(extender: Extender, verb: Verb, request: Request) -> Response:
    try:
        return await verb(extender, request)
    except TooManyError as error:
        return error_response(413, str(error))
    except WireError as error:
        return error_response(400, str(error))
    except BodyTooLargeError:
        limit = extender.settings.max_body_bytes
        return _closing(error_response(413, f"request body larger than {limit} bytes (--max-body-bytes)"))
    except ClientDisconnect:  # nobody reads the answer: counted as the bad request it is, nothing logged
        return error_response(400, "the client went away before its request body arrived")
    except BodyTimeoutError:
        seconds = extender.settings.body_timeout
        return _closing(error_response(408, f"request body did not arrive within {seconds} s (--body-timeout)"))
    except Exception:
        log.exception("internal error answering %s", request.url.path)
        return error_response(500, "internal error in rulesched; see its log")


def _closing(response: Response) -> Response:
    """`response`, and the connection closed after it: the rest of its body will not be read."""
    response.headers["connection"] = "close"
    return response


def _or_nan(value: float | None) -> float:
    return float("nan") if value is None else value


def rules_status(store: RuleStore) -> dict[str, Any]:
    """What /rules shows: the active rule book and the last rejected reload."""
    book, rejected = store.book, store.last_rejected
    active = None
    if book is not None:
        active = {
            "generation": book.generation,
            "hash": book.hash,
            "loadedAt": book.loaded_at.isoformat(),
            "engine": book.engine.name,
            "files": list(book.files),
            "ruleSets": [
                {
                    "name": rs.name,
                    "file": rs.file,
                    "matchConditions": [c.name for c in rs.conditions],
                    "filters": [{"name": f.name, "mode": "Enforce" if f.enforce else "Audit"} for f in rs.filters],
                    "scores": [{"name": s.name, "mode": "Enforce" if s.enforce else "Audit"} for s in rs.scores],
                }
                for rs in book.rule_sets
            ],
        }
    last_rejected = None
    if rejected is not None:
        last_rejected = {"at": rejected.at.isoformat(), "errors": [e.as_dict() for e in rejected.errors]}
    success = store.last_success.isoformat() if store.last_success else None
    return {"active": active, "lastSuccessfulLoad": success, "lastRejected": last_rejected}


def _size_of(source: Any) -> Callable[[], float]:
    return lambda: float(source.size())


def _failing_of(source: Any) -> Callable[[], float]:
    status = getattr(source, "status", None)
    return (lambda: float(status().failing)) if status is not None else (lambda: 0.0)


def sources_status(cluster: Cluster) -> dict[str, Any]:
    """What /rules shows of the pod and namespace sources: ready, size, and the live caches' state."""
    found: dict[str, Any] = {}
    for name, source in (("pods", cluster.pods), ("namespaces", cluster.namespaces)):
        if source is None:
            continue
        entry: dict[str, Any] = {"ready": source.ready(), "objects": source.size()}
        status = getattr(source, "status", None)
        if status is not None:
            state = status()
            entry |= {
                "resourceVersion": state.resource_version,
                "relists": state.relists,
                "failing": state.failing,
                "lastError": state.last_error,
            }
        index = source if isinstance(source, PodIndex) else getattr(source, "index", None)
        if isinstance(index, PodIndex):
            entry |= {"pendingPlacements": index.pending(), "overflowed": index.overflowed}
        found[name] = entry
    found["customMetrics"] = custom_status(cluster)
    return found


def custom_status(cluster: Cluster) -> dict[str, Any]:
    """Where `metrics.custom` comes from, and each Prometheus query's state, last success and last error."""
    if cluster.prometheus is not None:
        queries = [status.as_dict() for status in cluster.prometheus.status()]
        return {"from": "prometheus", "values": cluster.custom.size() if cluster.custom else 0, "queries": queries}
    if cluster.custom is not None:
        return {"from": "file", "values": cluster.custom.size(), "queries": []}
    return {"from": "none", "values": 0, "queries": []}


def create_app(settings: Settings, store: RuleStore, cluster: Cluster, observer: Observer | None = None) -> Starlette:
    """The extender app over a rule store and (not yet started) cluster sources.

    The observer's metrics should already watch the store (`Metrics.watch_store`) so that the first
    load is counted too.
    """
    extender = Extender(settings, store, cluster, observer or Observer())
    metrics = extender.observer.metrics
    nodes, samples = cluster.nodes, cluster.metrics
    metrics.watch_sources(
        (lambda: float(nodes.size())) if nodes is not None else None,
        (lambda: _or_nan(samples.newest_sample_age())) if samples is not None else None,
    )

    for name, source in (("pods", cluster.pods), ("namespaces", cluster.namespaces)):
        if source is not None:
            metrics.watch_source(name, _size_of(source), _failing_of(source))
    if cluster.prometheus is not None:
        metrics.watch_queries(cluster.prometheus.status)
    pods = cluster.pods
    if isinstance(pods, PodIndex) or hasattr(pods, "index"):
        index: PodIndex = pods if isinstance(pods, PodIndex) else pods.index  # type: ignore[union-attr]
        metrics.watch_source("pending-placements", lambda: float(index.pending()), lambda: 0.0)
    if cluster.estimates is not None:
        estimates = cluster.estimates
        metrics.watch_usage(lambda: float(estimates.store.size()), estimates.poll_seconds)

    async def healthz(request: Request) -> Response:
        return json_response({"status": "ok"})

    async def readyz(request: Request) -> Response:
        checks: dict[str, Any] = {"rules": store.book is not None}
        if cluster.nodes is not None:
            checks["nodeCache"] = cluster.nodes.ready()
        if cluster.pods is not None:
            checks["podCache"] = cluster.pods.ready()
        if cluster.namespaces is not None:
            checks["namespaceCache"] = cluster.namespaces.ready()
        ready = all(checks.values())
        return json_response({"ready": ready, "checks": checks}, 200 if ready else 503)

    async def rules(request: Request) -> Response:
        requeue = {"requeue": extender.requeue.status()} if extender.requeue is not None else {}
        return json_response({**rules_status(store), "sources": sources_status(cluster), **requeue})

    async def prometheus(request: Request) -> Response:
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    verbs: dict[str, Verb] = {
        "filter": routes.filter_verb,
        "prioritize": routes.prioritize_verb,
        "preempt": routes.preempt_verb,
        "bind": routes.bind_verb,
        "explain": routes.explain_verb,
    }
    app_routes = [Route(f"/{name}", _guarded(extender, name, verb), methods=["POST"]) for name, verb in verbs.items()]
    app_routes += [
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        Route("/rules", rules),
        Route("/metrics", prometheus),
        shadow_http.route(lambda: extender.shadow),
    ]
    endpoints = {f"/{name}": _guarded(extender, name, verbs[name]) for name in ("filter", "prioritize")}
    app = ExtenderApp(routes=app_routes, verbs=endpoints)
    app.state.extender = extender
    return app


Endpoint = Callable[[Request], Awaitable[Response]]


class ExtenderApp(Starlette):
    """Starlette, with POST /filter and /prioritize handed straight to their endpoints.

    kube-scheduler waits for these two on every pod; Starlette's router and its two exception middlewares
    add about 40 µs to each (`bench/http_floor.py`: Starlette against a bare ASGI function), and the
    endpoints need neither: `_guarded` answers every error itself. Every other request goes through
    Starlette as usual (a GET /filter is its 405).
    """

    def __init__(self, *, routes: list[Route], verbs: dict[str, Endpoint]) -> None:
        super().__init__(routes=routes)
        self.verbs = verbs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            endpoint = self.verbs.get(scope["path"])
            if endpoint is not None:
                scope["app"] = self
                response = await endpoint(Request(scope, receive, send))
                await response(scope, receive, send)
                return
        await super().__call__(scope, receive, send)
