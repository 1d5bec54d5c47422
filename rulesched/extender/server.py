"""Running the extender: load the rules, start the cluster sources, serve with uvicorn (TLS optional)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import ssl
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import uvicorn
from starlette.applications import Starlette
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from rulesched.cluster import Cluster, build_cluster
from rulesched.cluster.sources import SourceError
from rulesched.extender.app import create_app
from rulesched.extender.logformat import configure_logging
from rulesched.extender.metrics import Metrics
from rulesched.extender.observe import Observer
from rulesched.extender.refresh import Refresher
from rulesched.rules.cel import Limits, make_engine
from rulesched.rules.reloader import Reloader
from rulesched.rules.store import RuleStore
from rulesched.settings import Settings

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
    limits = Limits(cost=settings.cel_cost_limit, steps=settings.cel_budget_steps, size=settings.cel_budget_size)
    engine = make_engine(settings.cel_engine, limits, activation_evaluations=settings.cel_activation_evaluations)
    store = RuleStore([settings.rules_dir], engine)
    metrics = Metrics()
    metrics.watch_store(store)
    if not settings.rules_dir.is_dir():
        raise StartupError(f"rules directory {settings.rules_dir} does not exist")
    if store.reload() == "rejected":
        assert store.last_rejected is not None
        errors = "\n".join(str(e) for e in store.last_rejected.errors)
        raise StartupError(f"the rules in {settings.rules_dir} do not load:\n{errors}")
    try:
        cluster = build_cluster(settings)
    except SourceError as error:
        raise StartupError(str(error)) from error
    if settings.enable_bind and cluster.binder is None:
        raise StartupError("--enable-bind needs a cluster, and none was found (give --kubeconfig or --cluster on)")
    app = create_app(settings, store, cluster, Observer(metrics))
    reloader = Reloader(store, settings.rules_dir, debounce=settings.reload_debounce, interval=settings.reload_interval)
    refresher = Refresher(app.state.extender, metrics) if settings.refresh_ahead else None

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        cluster.start()
        watching = asyncio.create_task(reloader.run(), name="rules-reloader")
        refreshing = asyncio.create_task(refresher.run(), name="refresh-ahead") if refresher else None
        try:
            yield
        finally:
            reloader.stop()
            await asyncio.wait_for(watching, 5)
            if refresher is not None and refreshing is not None:
                refresher.stop()
                await asyncio.wait_for(refreshing, 5)
            cluster.stop()

    app.router.lifespan_context = lifespan
    return Parts(settings, store, cluster, app)


def settle_garbage_collector() -> None:
    """Move everything built at start-up (rules, node files) out of the collector's sight.

    A full collection scans every tracked object; with thousands of cached nodes that is tens of
    milliseconds, paid by whichever request triggers it. Frozen objects are never scanned again.
    Done by `serve` only: a process that embeds the app (the tests) keeps its collector as it is.
    """
    gc.collect()
    gc.freeze()


def certificate_names(peer: Mapping[str, Any]) -> set[str]:
    """A client certificate's subject common names and DNS/URI subject alternative names."""
    names = {value for rdn in peer.get("subject", ()) for key, value in rdn if key == "commonName"}
    names |= {value for kind, value in peer.get("subjectAltName", ()) if kind in ("DNS", "URI")}
    return names


def _checking_names(allowed: frozenset[str]) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol that closes, before reading a byte, a TLS connection whose client certificate
    names none of `allowed` (the CA alone vouches only that the certificate is from the cluster)."""

    class CheckedNames(HttpToolsProtocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            peer = transport.get_extra_info("peercert") or {}
            if not certificate_names(peer) & allowed:
                log.warning("refused a client certificate named %s", sorted(certificate_names(peer)) or "nothing")
                transport.abort()

    return CheckedNames


def uvicorn_config(parts: Parts) -> uvicorn.Config:
    """uvicorn's settings: TLS as asked (checked by Settings), bounded connections, no access log."""
    settings = parts.settings
    tls: dict[str, object] = {}
    if settings.tls_cert_file and settings.tls_key_file:
        tls = {"ssl_certfile": str(settings.tls_cert_file), "ssl_keyfile": str(settings.tls_key_file)}
        if settings.tls_client_ca_file:
            tls |= {"ssl_ca_certs": str(settings.tls_client_ca_file), "ssl_cert_reqs": ssl.CERT_REQUIRED}
        if settings.tls_client_names:
            tls["http"] = _checking_names(frozenset(settings.tls_client_names))
    return uvicorn.Config(
        parts.app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        access_log=False,
        server_header=False,
        timeout_keep_alive=75,
        limit_concurrency=settings.max_connections,
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
        settings.rules_dir,
        settings.host,
        settings.port,
        parts.cluster.description,
    )
    settle_garbage_collector()
    uvicorn.Server(config).run()
    return 0
