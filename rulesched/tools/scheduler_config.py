"""`rulesched config scheduler`: a KubeSchedulerConfiguration (`kubescheduler.config.k8s.io/v1`) using rulesched.

kube-scheduler decodes its configuration strictly and case-sensitively (PROTOCOL.md §3), so every key
here is spelled as upstream's `Extender` and `ExtenderTLSConfig` serialize it, and nothing else is
emitted. Invalid combinations are refused before any YAML is printed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import yaml

API_VERSION = "kubescheduler.config.k8s.io/v1"

EXTENDER_FIELDS = frozenset(
    {
        "urlPrefix",
        "filterVerb",
        "preemptVerb",
        "prioritizeVerb",
        "weight",
        "bindVerb",
        "enableHTTPS",
        "tlsConfig",
        "httpTimeout",
        "nodeCacheCapable",
        "managedResources",
        "ignorable",
    }
)
"""Every field of upstream's `Extender`, spelled as kube-scheduler decodes it."""
TLS_FIELDS = frozenset({"insecure", "serverName", "certFile", "keyFile", "caFile", "certData", "keyData", "caData"})
"""Every field of upstream's `ExtenderTLSConfig`."""

_GO_DURATION = re.compile(r"^(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+$")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class ConfigError(ValueError):
    """A flag value or combination kube-scheduler would refuse, or that would not do what was asked."""


@dataclass(frozen=True)
class SchedulerOptions:
    """What `rulesched config scheduler` is told; each field is one flag."""

    url: str = "http://127.0.0.1:8888"
    weight: int = 1
    node_cache: bool = True
    bind: bool = False
    preempt: bool = False
    timeout: str = "5s"
    scheduler_name: str | None = None
    namespace: str = "rulesched-system"
    kubeconfig: str | None = None
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_server_name: str | None = None
    ignorable: bool = False
    managed_resources: Sequence[str] = field(default_factory=tuple)
    request_deadline: float = 2.0
    """The server's --request-deadline: httpTimeout must leave it time to answer after it."""


ANSWER_MARGIN = 1.25
"""httpTimeout is at least this many times the server's request deadline: time to send the answer."""


def duration_seconds(text: str) -> float:
    """The length of a Go duration string (`5s`, `1m30s`, `500ms`); raises ConfigError if invalid."""
    if not _GO_DURATION.match(text):
        raise ConfigError(f"--timeout {text!r} is not a Go duration such as 5s, 500ms or 1m30s")
    parts = re.findall(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)", text)
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)


def _validate(options: SchedulerOptions) -> None:
    url = urlsplit(options.url)
    if url.scheme not in ("http", "https") or not url.netloc:
        raise ConfigError(f"--url {options.url!r} must be http(s)://host:port[/path]")
    if options.weight <= 0:
        raise ConfigError("--weight must be > 0 (kube-scheduler requires it when prioritizeVerb is set)")
    timeout = duration_seconds(options.timeout)
    if timeout <= 0:
        raise ConfigError("--timeout must be longer than 0")
    if timeout < options.request_deadline * ANSWER_MARGIN:
        raise ConfigError(
            f"--timeout {options.timeout} leaves rulesched no time to answer after its request deadline"
            f" ({options.request_deadline:g}s): give at least {options.request_deadline * ANSWER_MARGIN:g}s,"
            " or serve (and run this) with a shorter --request-deadline"
        )
    if options.scheduler_name == "kube-scheduler" or options.scheduler_name == "default-scheduler":
        raise ConfigError(f"--scheduler-name {options.scheduler_name} is taken by the main scheduler")
    if bool(options.tls_cert_file) != bool(options.tls_key_file):
        raise ConfigError("--tls-cert-file and --tls-key-file go together")
    uses_tls = options.tls_ca_file or options.tls_cert_file or options.tls_server_name
    if uses_tls and url.scheme != "https":
        raise ConfigError("TLS options need an https:// --url")


def _tls_config(options: SchedulerOptions) -> dict[str, Any]:
    tls = {
        "caFile": options.tls_ca_file,
        "certFile": options.tls_cert_file,
        "keyFile": options.tls_key_file,
        "serverName": options.tls_server_name,
    }
    return {key: value for key, value in tls.items() if value}


def extender(options: SchedulerOptions) -> dict[str, Any]:
    """The `extenders` entry for rulesched."""
    entry: dict[str, Any] = {"urlPrefix": options.url, "filterVerb": "filter", "prioritizeVerb": "prioritize"}
    if options.preempt:
        entry["preemptVerb"] = "preempt"
    if options.bind:
        entry["bindVerb"] = "bind"
    entry["weight"] = options.weight
    entry["nodeCacheCapable"] = options.node_cache
    tls = _tls_config(options)
    # enableHTTPS without a CA makes kube-scheduler skip certificate checks; it is set only with a CA.
    # An https:// URL without --tls-ca-file is checked against the system's trusted roots.
    entry["enableHTTPS"] = bool(options.tls_ca_file)
    if tls:
        entry["tlsConfig"] = tls
    entry["httpTimeout"] = options.timeout
    entry["ignorable"] = options.ignorable
    if options.managed_resources:
        entry["managedResources"] = [{"name": n, "ignoredByScheduler": False} for n in options.managed_resources]
    return entry


def scheduler_configuration(options: SchedulerOptions) -> dict[str, Any]:
    """The whole KubeSchedulerConfiguration; raises ConfigError for invalid options."""
    _validate(options)
    config: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "KubeSchedulerConfiguration"}
    if options.kubeconfig:
        config["clientConnection"] = {"kubeconfig": options.kubeconfig}
    if options.scheduler_name:
        # A second scheduler: its own profile, and a lease apart from kube-scheduler's.
        config["leaderElection"] = {
            "leaderElect": True,
            "resourceName": options.scheduler_name,
            "resourceNamespace": options.namespace,
        }
        config["profiles"] = [{"schedulerName": options.scheduler_name}]
    config["extenders"] = [extender(options)]
    return config


def render_configuration(options: SchedulerOptions) -> str:
    """The configuration as YAML, keys in the order above."""
    config = scheduler_configuration(options)
    return yaml.safe_dump(config, sort_keys=False, default_flow_style=False, allow_unicode=True)
