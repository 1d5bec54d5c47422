"""The Starlette application: routes, error handling, health and readiness."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rulesched.cluster import Cluster
from rulesched.extender import routes
from rulesched.extender.observe import Observer
from rulesched.extender.routes import BodyTooLargeError, Extender, error_response, json_response
from rulesched.extender.wire import WireError
from rulesched.rules.store import RuleStore
from rulesched.settings import Settings

log = logging.getLogger(__name__)

Verb = Callable[[Extender, Request], Awaitable[Response]]


def _guarded(extender: Extender, verb: Verb) -> Callable[[Request], Awaitable[Response]]:
    """`verb` with bad input answered as 400/413, and anything unexpected as a logged 500."""

    async def endpoint(request: Request) -> Response:
        try:
            return await verb(extender, request)
        except WireError as error:
            return error_response(400, str(error))
        except BodyTooLargeError:
            limit = extender.settings.max_body_bytes
            return error_response(413, f"request body larger than {limit} bytes (--max-body-bytes)")
        except Exception:
            log.exception("internal error answering %s", request.url.path)
            return error_response(500, "internal error in rulesched; see its log")

    return endpoint


def create_app(settings: Settings, store: RuleStore, cluster: Cluster, observer: Observer | None = None) -> Starlette:
    """The extender app over an already loaded rule store and started cluster sources."""
    extender = Extender(settings, store, cluster, observer or Observer())

    async def healthz(request: Request) -> Response:
        return json_response({"status": "ok"})

    async def readyz(request: Request) -> Response:
        checks: dict[str, Any] = {"rules": store.book is not None}
        if cluster.nodes is not None:
            checks["nodeCache"] = cluster.nodes.ready()
        ready = all(checks.values())
        return json_response({"ready": ready, "checks": checks}, 200 if ready else 503)

    verbs: dict[str, Verb] = {
        "/filter": routes.filter_verb,
        "/prioritize": routes.prioritize_verb,
        "/preempt": routes.preempt_verb,
        "/bind": routes.bind_verb,
        "/explain": routes.explain_verb,
    }
    app_routes = [Route(path, _guarded(extender, verb), methods=["POST"]) for path, verb in verbs.items()]
    app_routes += [Route("/healthz", healthz), Route("/readyz", readyz)]
    app = Starlette(routes=app_routes)
    app.state.extender = extender
    return app
