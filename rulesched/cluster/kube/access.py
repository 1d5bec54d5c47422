"""Access to the Kubernetes API: which credentials to use, and one configured `ApiClient` built from them.

The order is the one `--kubeconfig` documents: an explicit kubeconfig file first, then the in-cluster
service account (running in a pod), then `$KUBECONFIG`, then `~/.kube/config`. `--cluster off` never
looks; `on` must find something (a `ClusterConfigError` otherwise); `auto` uses a cluster only when
credentials are found and no `--nodes` file is given. The configuration is always loaded into an explicit
`Configuration`, never the client's process-wide default, and the client never retries by itself (the
callers own their retry and time budgets). This module and its siblings are the only importers of
the `kubernetes` package.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kubernetes import client as kclient
from kubernetes import config as kconfig
from kubernetes.config.incluster_config import InClusterConfigLoader

from rulesched.cluster.sources import SourceError
from rulesched.settings import Settings

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ClusterConfigError(SourceError):
    """No usable Kubernetes API configuration although one is required; the message says what to do."""


@dataclass(frozen=True)
class KubeEnvironment:
    """Where credentials are looked for: the process environment, the home directory, the service account."""

    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    home: Path = field(default_factory=Path.home)
    service_account_dir: Path = SERVICE_ACCOUNT_DIR


@dataclass(frozen=True)
class KubeConfigChoice:
    """The credentials found: `in-cluster`, or kubeconfig `paths` (several when $KUBECONFIG lists several)."""

    kind: Literal["in-cluster", "kubeconfig"]
    paths: tuple[Path, ...] = ()
    origin: str = ""

    def describe(self) -> str:
        if self.kind == "in-cluster":
            return "the in-cluster service account"
        return f"kubeconfig {':'.join(map(str, self.paths))} ({self.origin})"


@dataclass
class KubeAccess:
    """A configured API client and where its credentials came from; `close()` releases its connections."""

    api: Any
    host: str
    choice: KubeConfigChoice

    def describe(self) -> str:
        return f"Kubernetes API {self.host} via {self.choice.describe()}"

    def close(self) -> None:
        self.api.close()


def _in_cluster(env: KubeEnvironment) -> bool:
    has_service = bool(env.environ.get("KUBERNETES_SERVICE_HOST") and env.environ.get("KUBERNETES_SERVICE_PORT"))
    return has_service and (env.service_account_dir / "token").is_file()


def _env_kubeconfig(env: KubeEnvironment) -> tuple[Path, ...]:
    # $KUBECONFIG is a list (":"-separated); the client merges the files that exist.
    listed = [Path(p).expanduser() for p in env.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    return tuple(p for p in listed if p.is_file())


def find_config(kubeconfig: Path | None, env: KubeEnvironment) -> KubeConfigChoice | None:
    """The credentials to use, in the documented order; None when there are none."""
    if kubeconfig is not None:
        if not kubeconfig.expanduser().is_file():
            raise ClusterConfigError(f"--kubeconfig {kubeconfig}: no such file")
        return KubeConfigChoice("kubeconfig", (kubeconfig.expanduser(),), "--kubeconfig")
    if _in_cluster(env):
        return KubeConfigChoice("in-cluster")
    from_env = _env_kubeconfig(env)
    if from_env:
        return KubeConfigChoice("kubeconfig", from_env, "$KUBECONFIG")
    default = env.home / ".kube" / "config"
    if default.is_file():
        return KubeConfigChoice("kubeconfig", (default,), "~/.kube/config")
    return None


def _configuration(choice: KubeConfigChoice, env: KubeEnvironment) -> Any:
    configuration = kclient.Configuration()
    if choice.kind == "in-cluster":
        sa = env.service_account_dir
        # The loader re-reads the token file as it rotates (bound service account tokens expire).
        loader: Any = InClusterConfigLoader
        loader(str(sa / "token"), str(sa / "ca.crt"), environ=env.environ).load_and_set(configuration)
    else:
        files = os.pathsep.join(map(str, choice.paths))
        load: Any = kconfig.load_kube_config
        load(config_file=files, client_configuration=configuration, persist_config=False)
    # Each caller owns its time budget and retries: urllib3's default would retry a timed-out GET three
    # times (a 2 s node fetch taking 8 s). Pooled connections closed by the server are still detected.
    configuration.retries = False
    return configuration


def connect(choice: KubeConfigChoice, env: KubeEnvironment) -> KubeAccess:
    """An API client for `choice`; ClusterConfigError when the credentials cannot be loaded."""
    try:
        configuration = _configuration(choice, env)
    except Exception as error:  # the loaders raise whatever a malformed file provokes (YAML, KeyError, ...)
        raise ClusterConfigError(f"cannot use {choice.describe()}: {error}") from error
    return KubeAccess(api=kclient.ApiClient(configuration), host=str(configuration.host), choice=choice)


def cluster_access(settings: Settings, env: KubeEnvironment | None = None) -> KubeAccess | None:
    """The API access `settings.cluster` asks for, or None (no cluster); logs which credentials are used."""
    if settings.cluster == "off":
        return None
    env = env if env is not None else KubeEnvironment()
    choice = find_config(settings.kubeconfig, env)
    if settings.cluster == "auto" and settings.nodes_file is not None:
        return None
    if choice is None:
        if settings.cluster == "on":
            raise ClusterConfigError(
                "--cluster on: no Kubernetes credentials found (no in-cluster service account, no $KUBECONFIG, "
                "no ~/.kube/config); pass --kubeconfig or use --cluster off"
            )
        return None
    try:
        access = connect(choice, env)
    except ClusterConfigError as error:
        if settings.cluster == "on" or choice.origin == "--kubeconfig":
            raise
        log.warning("--cluster auto: %s; running without a cluster", error)
        return None
    log.info("using %s", access.describe())
    return access


def status_message(error: Any) -> str:
    """The reason an ApiException carries: the Status `message` when the body is one, else status and text."""
    body = getattr(error, "body", None)
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str) and body.strip():
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and isinstance(parsed.get("message"), str) and parsed["message"]:
            return str(parsed["message"])
        return f"{error.status} {error.reason}: {body.strip()}"
    return f"{getattr(error, 'status', '?')} {getattr(error, 'reason', '') or 'error'}"


def read_json(response: Any) -> Any:
    """The JSON body of a raw (`_preload_content=False`) response, read whole; the connection goes back to the pool."""
    try:
        return json.loads(response.data)
    finally:
        response.release_conn()


def finish(response: Any) -> None:
    """Read the rest of a raw response we do not need, so its connection can be reused."""
    try:
        _ = response.data
    finally:
        response.release_conn()


def discard(response: Any) -> None:
    """Drop a response that may be half read (a watch): its connection is closed, never reused."""
    try:
        response.close()
        response.release_conn()
    except Exception:  # already closed by a shutdown from another thread
        log.debug("closing a response failed", exc_info=True)


def interrupt(response: Any) -> None:
    """From another thread: wake the thread blocked reading `response` (its read sees end of stream)."""
    try:
        shutdown = getattr(response, "shutdown", None)
        if callable(shutdown):  # urllib3 >= 2.3: shuts the socket down for reading, waking a blocked recv()
            shutdown()
        else:
            response.close()
    except Exception:  # the response already finished or was released
        log.debug("interrupting a response failed", exc_info=True)
