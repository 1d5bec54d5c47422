"""Running the extender: load the rules, start the cluster sources, serve with uvicorn (TLS optional)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import ssl
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn
from starlette.applications import Starlette

from rulesched.cluster import Cluster, build_cluster
from rulesched.cluster.sources import Binder, SourceError
from rulesched.controllers.audit import http as audit_http
from rulesched.controllers.audit.controller import build_auditor
from rulesched.controllers.shadow import Shadow
from rulesched.decide.verbs import Call, Verb
from rulesched.extender.app import create_app
from rulesched.extender.canary import RecentPods, ReloadCanary
from rulesched.extender.connection import connection_protocol
from rulesched.extender.logformat import configure_logging
from rulesched.extender.metrics import Metrics
from rulesched.extender.observe import Observer
from rulesched.extender.recording import Recorder, RecordLimits
from rulesched.extender.refresh import Refresher
from rulesched.extender.state import Extender
from rulesched.rules.book import RuleBook
from rulesched.rules.cel import Engine, Limits, make_engine
from rulesched.rules.context import NodeContext
from rulesched.rules.reloader import Reloader
from rulesched.rules.store import RejectedReload, ReloadOutcome, RuleStore
from rulesched.settings import Settings

if TYPE_CHECKING:
    from rulesched.controllers.requeue.controller import Requeue

log = logging.getLogger("rulesched")


class StartupError(Exception):
    """The server cannot start: the message says why and what to do."""


@dataclass
class Parts:
    """Everything a running server is made of, for tests and for `serve`."""

    settings: Settings
    store: RuleStore
    cluster: Cluster
    app: Starlette


def build(settings: Settings) -> Parts:
    """Load the rules (all must load) and build the cluster sources and the app; nothing started yet."""
    check_tls(settings)
    engine = _engine(settings)
    store = RuleStore(settings.rules_dir, engine, allow_empty=settings.allow_empty_rules)
    metrics = Metrics()
    metrics.watch_store(store)
    for path in settings.rules_dir:
        if not path.exists():
            raise StartupError(f"rules directory or file {path} does not exist")
    if store.reload() == "rejected":
        assert store.last_rejected is not None
        errors = "\n".join(str(e) for e in store.last_rejected.errors)
        raise StartupError(f"the rules in {_listed(settings.rules_dir)} do not load:\n{errors}")
    try:
        cluster = build_cluster(settings, bind=_api_binder)
    except SourceError as error:
        raise StartupError(str(error)) from error
    _follow_metric_sources(store, cluster)
    if settings.deschedule == "on" and cluster.access is None:
        raise StartupError("--deschedule on needs a cluster, and none was found (give --kubeconfig or --cluster on)")
    if settings.enable_bind and cluster.binder is None:
        raise StartupError("--enable-bind needs a cluster, and none was found (give --kubeconfig or --cluster on)")
    app = create_app(settings, store, cluster, Observer(metrics))
    extender: Extender = app.state.extender
    _canary(settings, store, extender)
    reloaders = [_reloader(settings, store, path) for path in settings.rules_dir]
    if settings.shadow_rules_dir is not None:
        shadow_store = RuleStore([settings.shadow_rules_dir], _engine(settings))
        extender.shadow = _shadow(settings, shadow_store, extender, metrics)
        reloaders.append(_reloader(settings, shadow_store, settings.shadow_rules_dir))
    if settings.record_dir is not None:
        record = RecordLimits(settings.record_segment_bytes, settings.record_max_bytes, settings.record_queue)
        extender.recorder = Recorder(settings.record_dir, record, extender.idle, metrics)
    refresher = Refresher(extender, metrics) if settings.refresh_ahead else None
    requeue = _requeue(settings, extender, metrics)
    auditor = app.state.auditor = build_auditor(settings, store, cluster)
    audit_http.install(app.router.routes, metrics.registry, auditor)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        cluster.start()
        if auditor is not None:
            auditor.start()
        if extender.recorder is not None:
            extender.recorder.start()
        watching = [asyncio.create_task(r.run(), name="rules-reloader") for r in reloaders]
        refreshing = asyncio.create_task(refresher.run(), name="refresh-ahead") if refresher else None
        requeuing = _started(requeue)
        try:
            yield
        finally:
            if requeue is not None and requeuing is not None:
                requeue.stop()
                await asyncio.wait_for(requeuing, 5)
            for reloader in reloaders:
                reloader.stop()
            await asyncio.wait_for(asyncio.gather(*watching), 5)
            if refresher is not None and refreshing is not None:
                refresher.stop()
                await asyncio.wait_for(refreshing, 5)
            if extender.shadow is not None:
                extender.shadow.stop()
            if extender.recorder is not None:
                await asyncio.to_thread(extender.recorder.stop)
            if auditor is not None:
                await asyncio.to_thread(auditor.stop)
            cluster.stop()

    app.router.lifespan_context = lifespan
    return Parts(settings, store, cluster, app)


def _requeue(settings: Settings, extender: Extender, metrics: Metrics) -> Requeue | None:
    """`--requeue`'s remembered pods and nudge thread (the cluster's API client writes the nudges)."""
    if not settings.requeue:
        return None
    access = extender.cluster.access
    if access is None:
        raise StartupError("--requeue needs a cluster, and none was found (give --kubeconfig or --cluster on)")
    # Imported only here: its nudges import the kubernetes client (half a second and about 30 MB), which a
    # server without a cluster never needs.
    from rulesched.controllers.requeue.controller import Requeue

    passing = functools.partial(_passing, extender)
    requeue = Requeue(extender.store, extender.cluster, passing, settings, metrics.registry, access.api)
    extender.requeue = requeue
    return requeue


async def _passing(
    extender: Extender, book: RuleBook, pod: Mapping[str, Any], names: Sequence[str]
) -> list[NodeContext]:
    """The candidates among `names` on which `pod` passes the filters now, for the requeue controller: the
    routes' own evaluation (`Extender.evaluate`, as /filter calls it), so that a change of the engine changes
    this one place."""
    contexts, unknown = await extender.in_evaluator(len(names), lambda: extender.contexts.for_names(names))
    if not contexts:
        return []
    deadline, namespace = extender.deadline(), extender.namespace(pod)
    call = Call(pod, contexts, Verb.FILTER, None, deadline, namespace, True, None if unknown else names)
    decision = await extender.evaluate(book, call)
    passed = set(decision.outcome()[0])
    return [context for context in contexts if context.name in passed]


def _api_binder(api: Any) -> Binder:
    """`--enable-bind`'s binder, through the API (imported only with a cluster: the kubernetes client is heavy)."""
    from rulesched.writes.bind import ApiBinder

    return ApiBinder(api)


def _started(requeue: Requeue | None) -> asyncio.Task[None] | None:
    if requeue is None:
        return None
    requeue.start()
    return asyncio.create_task(requeue.run(), name="requeue")


def _listed(paths: Sequence[Path]) -> str:
    return ", ".join(map(str, paths))


def _canary(settings: Settings, store: RuleStore, extender: Extender) -> None:
    """`--reload-canary`: keep the pods of recent filter calls, and try each new book on them before it is used."""
    if settings.reload_canary == "off":
        return
    recent = RecentPods(settings.reload_canary_pods, keep_nodes=extender.cluster.nodes is None)
    extender.recent = recent
    store.vetters.append(ReloadCanary(settings, extender.cluster, recent))


def _follow_metric_sources(store: RuleStore, cluster: Cluster) -> None:
    """Poll the book's MetricSources, and each new book's after a reload (a rejected one changes nothing)."""
    pollers = cluster.prometheus
    if pollers is None or store.book is None:
        return
    pollers.configure(store.book.metric_sources)

    def on_reload(outcome: ReloadOutcome, book: RuleBook | None, rejected: RejectedReload | None) -> None:
        if outcome == "loaded" and book is not None:
            pollers.configure(book.metric_sources)

    store.listeners.append(on_reload)


def _engine(settings: Settings) -> Engine:
    """The CEL engine as the settings ask; the shadow book has one of its own (no state shared between threads)."""
    limits = Limits(
        cost=settings.cel_cost_limit,
        steps=settings.cel_budget_steps,
        size=settings.cel_budget_size,
        unknown_fields=settings.unknown_fields,
    )
    return make_engine(settings.cel_engine, limits, activation_evaluations=settings.cel_activation_evaluations)


def _reloader(settings: Settings, store: RuleStore, path: Path) -> Reloader:
    """The reloader of a rules directory, or of one rules file: then its directory is watched (an editor, or a
    ConfigMap's `..data` swap, replaces the file: a watch on the file itself would be left on the old one)."""
    directory = path if path.is_dir() or not path.exists() else path.parent
    return Reloader(store, directory, debounce=settings.reload_debounce, interval=settings.reload_interval)


def _shadow(settings: Settings, store: RuleStore, extender: Extender, metrics: Metrics) -> Shadow:
    """The shadow book, loaded now. Rules that do not load do not stop the server (the live rules decide;
    the shadow is advice): it starts without a shadow book, says why in its log and in GET /shadow, and
    the next change to the directory that loads becomes the shadow book."""
    shadow = Shadow(
        store, extender.idle, metrics.shadow, capacity=settings.shadow_queue, deadline=settings.request_deadline,
        inline_work=settings.shadow_inline_work,
    )  # fmt: skip
    directory = settings.shadow_rules_dir
    if directory is None or not directory.is_dir():
        log.error("shadow rules directory %s does not exist; no shadow book until it does", directory)
    elif store.reload() == "rejected":
        log.error("the shadow rules in %s do not load; no shadow book until they do", directory)
    return shadow


def check_tls(settings: Settings) -> None:
    """Refuse to start, in one line, with TLS files that cannot serve (missing, not PEM, a key that is not
    the certificate's, a CA file without a certificate in it); uvicorn would fail later with a traceback."""
    cert, key, ca = settings.tls_cert_file, settings.tls_key_file, settings.tls_client_ca_file
    if cert is None or key is None:
        return  # TLS off (Settings refuses one without the other)
    for flag, path in (("--tls-cert-file", cert), ("--tls-key-file", key), ("--tls-client-ca-file", ca)):
        if path is not None and not path.is_file():
            raise StartupError(f"{flag} {path}: no such file")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert, key, password=b"")  # an encrypted key: an error here, not a prompt
    except (OSError, ssl.SSLError) as error:
        raise StartupError(
            f"--tls-cert-file {cert} with --tls-key-file {key}: not a PEM certificate and its unencrypted key ({error})"
        ) from None
    if ca is not None:
        try:
            context.load_verify_locations(cafile=ca)
        except (OSError, ssl.SSLError) as error:
            raise StartupError(f"--tls-client-ca-file {ca} holds no PEM certificate ({error})") from None


def settle_garbage_collector() -> None:
    """Move everything built at start-up (rules, node files) out of the collector's sight.

    A full collection scans every tracked object; with thousands of cached nodes that is tens of
    milliseconds, paid by whichever request triggers it. Frozen objects are never scanned again.
    Done by `serve` only: a process that embeds the app (the tests) keeps its collector as it is.
    """
    gc.collect()
    gc.freeze()


def uvicorn_config(parts: Parts) -> uvicorn.Config:
    """uvicorn's settings: TLS as asked (checked by Settings and `check_tls`), bounded connections, a deadline on
    request headers (`connection_protocol`), no access log."""
    settings = parts.settings
    idle = parts.app.state.extender.idle  # told when a request is being read or answered
    tls: dict[str, object] = {}
    if settings.tls_cert_file and settings.tls_key_file:
        tls = {"ssl_certfile": str(settings.tls_cert_file), "ssl_keyfile": str(settings.tls_key_file)}
        if settings.tls_client_ca_file:
            tls |= {"ssl_ca_certs": str(settings.tls_client_ca_file), "ssl_cert_reqs": ssl.CERT_REQUIRED}
    return uvicorn.Config(
        parts.app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        access_log=False,
        server_header=False,
        timeout_keep_alive=75,
        limit_concurrency=settings.max_connections,
        http=connection_protocol(settings.body_timeout, frozenset(settings.tls_client_names), idle),
        **tls,  # type: ignore[arg-type]
    )


def serve(settings: Settings) -> int:
    """Run until interrupted; 1 when the server cannot start (the reason is printed)."""
    configure_logging(settings.log_level, settings.log_format)
    try:
        parts = build(settings)
        config = uvicorn_config(parts)
    except StartupError as error:
        print(f"rulesched: {error}", file=sys.stderr)
        return 1
    book = parts.store.book
    assert book is not None
    log.info(
        "serving %d rule sets (generation %d, %s engine) from %s on %s:%d; %s",
        len(book.rule_sets),
        book.generation,
        settings.cel_engine,
        _listed(settings.rules_dir),
        settings.host,
        settings.port,
        parts.cluster.description,
    )
    settle_garbage_collector()
    uvicorn.Server(config).run()
    return 0
