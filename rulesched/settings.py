"""One validated settings object: the only reader of the environment (`RULESCHED_*`).

Command-line flags override environment variables, which override the defaults below. Every
component receives the settings (or the part it needs) as an argument. The field docstrings are the
documentation: `rulesched serve --help` shows them (the flags are generated from these fields, see
`rulesched/cli/serve.py`) and `docs/operations/configuration.md` is generated from them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Everything `rulesched serve` can be told, with the defaults a production extender wants."""

    model_config = SettingsConfigDict(
        env_prefix="RULESCHED_", extra="forbid", frozen=True, use_attribute_docstrings=True
    )

    rules_dir: Path = Path("rules")
    """Directory of rule files (a mounted ConfigMap in a cluster)."""
    host: str = "127.0.0.1"
    """Address to listen on; loopback unless the extender is reached over the network (then use TLS)."""
    port: int = Field(8888, ge=0, le=65535)
    """TCP port to listen on."""
    cel_engine: Literal["cpp", "celpy"] = "cpp"
    """CEL engine: cpp (cel-expr-python, fast) or celpy (pure Python reference)."""
    cel_cost_limit: int = Field(1_000_000, ge=1)
    """Largest estimated worst-case cost of one expression; costlier ones do not load (docs/rules/cost.md).
    The default is Kubernetes' per-expression limit (PerCallLimit)."""
    cel_budget_steps: int = Field(1_000_000, ge=1)
    """Evaluation steps one expression may take on one node (celpy engine; cel-cpp has its own iteration limit)."""
    cel_budget_size: int = Field(1_000_000, ge=1)
    """Longest string, list or map one evaluation may build, in characters or elements (celpy engine)."""
    request_deadline: float = Field(2.0, gt=0, le=60)
    """Seconds a filter, prioritize or preempt call may spend evaluating rules; past it, the rules not yet
    evaluated follow their failurePolicy (docs/rules/cost.md). Keep it under kube-scheduler's httpTimeout."""
    nodes_file: Path | None = None
    """Offline node source for names mode: a NodeList in JSON or YAML."""
    metrics_file: Path | None = None
    """Offline metrics source: a metrics.k8s.io NodeMetricsList in JSON or YAML, taken as current."""
    pods_file: Path | None = None
    """Offline pod source: a PodList in JSON or YAML (the assigned, non-terminal ones count on their nodes)."""
    namespaces_file: Path | None = None
    """Offline namespace source: a NamespaceList in JSON or YAML (`namespaceObject`)."""
    recent_seconds: float = Field(30.0, gt=0)
    """How long a placement this extender made (ranked first, or bound) counts in `recent` while the pod
    watch has not shown the pod bound; also the window of `recent` on a node whose sample time is unknown."""
    max_pods: int = Field(200_000, gt=0)
    """Most pods the pod cache keeps (trimmed views, about 1-2 KB each); more are left out and logged."""
    max_pending_placements: int = Field(10_000, gt=0)
    """Most placements waiting for the pod watch to confirm them (the oldest are dropped first)."""
    max_namespaces: int = Field(100_000, gt=0)
    """Most namespaces the namespace cache keeps."""
    cluster: Literal["auto", "on", "off"] = "auto"
    """Use a Kubernetes API: auto (when a service account or kubeconfig is found and no --nodes file), on, off."""
    kubeconfig: Path | None = None
    """Kubeconfig file; otherwise the in-cluster service account, $KUBECONFIG or ~/.kube/config."""
    metrics_interval: float = Field(15.0, gt=0)
    """Seconds between metrics-server polls."""
    metrics_max_age: float = Field(90.0, gt=0)
    """Metrics samples older than this many seconds count as absent."""
    prometheus: Literal["auto", "on", "off"] = "auto"
    """Poll the queries of the rules' MetricSources (`metrics.custom`): auto (unless --cluster is off or a
    --metrics file gives the values), on, off (docs/rules/prometheus.md)."""
    node_fetch_timeout: float = Field(2.0, gt=0)
    """Seconds a request waits for a direct GET of a node the cache does not know yet."""
    enable_bind: bool = False
    """Answer /bind by creating the Binding through the API."""
    enable_explain: bool = False
    """Serve POST /explain (the same decision as /filter and /prioritize, with every rule's outcome)."""
    max_body_bytes: int = Field(128 * 1024 * 1024, gt=0)
    """Largest request body accepted; larger ones get 413 (1000 full nodes are about 12 MB)."""
    reload_debounce: float = Field(0.5, ge=0)
    """Seconds to wait for more changes to the rules directory before reloading."""
    reload_interval: float = Field(60.0, ge=1)
    """Seconds between re-reads of the rules directory in case a change notification was lost."""
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    """Log level; decision lines are info, per-node details debug."""
    log_format: Literal["json", "text"] = "json"
    """JSON lines (for log pipelines) or plain text."""
    tls_cert_file: Path | None = None
    """Serve HTTPS with this certificate (PEM)."""
    tls_key_file: Path | None = None
    """The private key of --tls-cert-file (PEM)."""
    tls_client_ca_file: Path | None = None
    """Require client certificates signed by this CA (kube-scheduler's extender tlsConfig presents one)."""
    tls_client_names: tuple[str, ...] = ()
    """With --tls-client-ca-file: accept only client certificates whose subject common name or a DNS or URI
    subject alternative name is one of these (empty: any certificate the CA signed)."""
    max_candidates: int = Field(20_000, ge=1)
    """Most candidate nodes (or preemption victims' nodes) in one request; more get 413. Above the largest
    supported cluster (15,000 nodes)."""
    body_timeout: float = Field(10.0, gt=0)
    """Seconds a request's headers may take to arrive (from the connection or the request's first byte),
    and then its body; a client that stops sending is answered 408 and its connection closed."""
    max_connections: int = Field(512, ge=1)
    """Open connections (and requests in progress) beyond which uvicorn answers 503 (its limit_concurrency)."""
    cel_activation_evaluations: int = Field(64, ge=1)
    """cpp engine: evaluations a node's kept CEL activation serves before it is made again; bounds the memory
    cel-expr-python keeps inside it for every program evaluated against it."""
    refresh_ahead: bool = True
    """After a metrics poll or a rules reload, make the contexts and node-only results of the nodes last asked
    about again on the event loop, a few at a time between requests, then the verdicts of the last prioritize
    call, so that the next request finds them."""
    thread_candidates: int = Field(2000, ge=0)
    """Requests with more candidates than this have their node contexts built in the evaluation thread, so
    that the event loop keeps answering health checks meanwhile."""
    loop_work: float = Field(2000.0, ge=0)
    """Estimated microseconds of rule evaluation a call may do on the event loop, from the rules' estimated
    costs; a call that needs more runs in the evaluation thread (the hand-over costs about 0.1-0.4 ms).
    0: only calls the caches answer stay on the loop."""
    max_node_fetches: int = Field(32, ge=0)
    """Most direct GETs of node names the cache lacks, per request; the other unknown names are answered
    as unresolvable at once."""
    unknown_node_ttl: float = Field(5.0, ge=0)
    """Seconds a node name the API did not return (not found, or the API failing) is answered from memory
    without another GET; 0 turns the negative cache off."""
    unknown_nodes_kept: int = Field(10_000, ge=1)
    """Most node names the negative cache remembers (the oldest are forgotten first)."""

    shadow_rules_dir: Path | None = None
    """A second rules directory (in a cluster, a second ConfigMap) loaded, reloaded and kept last-good like
    --rules: every filter and prioritize call is evaluated against it too, after its answer is sent and
    never changing it; the differences go to GET /shadow, /metrics and the decision log
    (docs/guides/changing-rules-safely.md)."""
    shadow_queue: int = Field(2048, ge=1)
    """Answered calls waiting for their shadow evaluation (a back-to-back burst waits here while its
    comparisons fill the gaps between calls; about 30 KB a call at 1000 candidates); when it is full a call's
    comparison is dropped (counted as `dropped`), never queued without limit."""
    shadow_inline_work: float = Field(2000.0, ge=0)
    """Estimated microseconds of one shadow decision made on the event loop, between calls; a call whose
    shadow decision needs more has its nodes made ready for the shadow book a few at a time first (their
    memos, and the call decided over them alone), and, if it still needs more, is decided in the shadow
    thread in a pause. 0: only what the shadow book's caches answer is decided on the event loop."""
    record_dir: Path | None = None
    """Record every filter and prioritize call, with the node, metrics, pod and namespace state it saw, in
    this directory (gzip JSON Lines segments, docs/operations/recording.md), for `rulesched replay`. Off
    when unset."""
    record_segment_bytes: int = Field(64 * 1024 * 1024, ge=4096)
    """A recording segment is closed (and compressed to a fraction of it), and the next begun, once this many
    bytes were written to it."""
    record_max_bytes: int = Field(1024 * 1024 * 1024, ge=4096)
    """Most bytes the recording's segments take on disk: beyond it the oldest segments are deleted."""
    record_queue: int = Field(1024, ge=1)
    """Answered calls waiting to be written to the recording; when it is full a call is left out of the
    recording and counted (`rulesched_recording_calls_total{result="dropped"}`)."""
    requeue: bool = False
    """Requeue pods this replica rejected once a rule would let them through: after a change of the metrics,
    Prometheus values, nodes, pods or rules, the remembered pods are evaluated again and kube-scheduler is
    nudged by an annotation on the pending pod (docs/operations/requeue.md). Needs a cluster and the RBAC
    and admission policy of deploy/overlays/requeue/."""
    requeue_max_pods: int = Field(1000, ge=1)
    """Most rejected pods remembered for --requeue (the oldest are forgotten first)."""
    requeue_ttl: float = Field(300.0, gt=0)
    """Seconds a rejected pod is remembered for --requeue; by then kube-scheduler retries it by itself
    (podMaxInUnschedulablePodsDuration, 5 minutes)."""
    requeue_batch: int = Field(64, ge=1)
    """Most remembered pods evaluated again in one step after a change (one step every 50 ms); the rest
    wait for the next steps."""
    requeue_rate: float = Field(5.0, gt=0)
    """Nudges (annotation patches) per second at most, over all pods (a token bucket)."""
    requeue_burst: int = Field(10, ge=1)
    """Nudges that may be sent at once before --requeue-rate paces them."""
    audit_interval: float = Field(0.5, gt=0)
    """Seconds the audit of running pods rests between two steps (docs/guides/descheduling.md): with
    --audit-nodes-per-step, its pace. It runs when the rules, a node, its metrics or its pods change, in a
    thread of its own, never on the request path."""
    audit_nodes_per_step: int = Field(32, ge=1)
    """Nodes whose pods the audit evaluates in one step."""
    audit_max_violations: int = Field(10_000, ge=1)
    """Most violations the audit keeps (GET /audit, the metrics); beyond, the rest are left out and logged."""
    deschedule: Literal["off", "dry-run", "on"] = "off"
    """Act on the audit's violations of rule sets with `spec.descheduling` (docs/guides/descheduling.md):
    `off`; `dry-run` logs and counts what would be evicted; `on` evicts through the Eviction API, from the
    one replica holding the lease (the deschedule overlay grants what it needs)."""
    deschedule_rate: float = Field(5.0, gt=0)
    """Most evictions a minute, all rule sets together (each rule set has its own rate besides)."""
    deschedule_cooldown: float = Field(600.0, ge=0)
    """Seconds a pod this replica evicted (or tried to) is not tried again; after a refusal by a
    PodDisruptionBudget (429) it is tried again once this has passed, never in a loop."""
    deschedule_excluded_namespaces: tuple[str, ...] = ("kube-system",)
    """Namespaces whose pods are never evicted."""
    deschedule_system_critical: bool = False
    """Evict system-critical pods too (priority at least 2000000000, or a `system-` priority class); as the
    Kubernetes descheduler's `evictSystemCriticalPods`, off by default."""
    deschedule_local_storage: bool = False
    """Evict pods with local storage too (emptyDir, hostPath volumes: their data is lost)."""
    deschedule_volume_claims: bool = False
    """Evict pods with PersistentVolumeClaims (or generic ephemeral volumes) too; whether their volumes can be
    attached on another node is not checked."""
    deschedule_unchecked_placement: bool = False
    """Evict pods with inter-pod affinity or anti-affinity or topology spread constraints too: the check that
    another node would take them covers neither (docs/guides/descheduling.md)."""
    lease_namespace: str = "rulesched-system"
    """The namespace of the Lease that elects the one replica that evicts (`--deschedule on`)."""
    lease_name: str = "rulesched-descheduler"
    """The Lease's name (the overlay's RBAC names it)."""
    lease_identity: str = ""
    """This replica's name in the Lease; empty: the host name (the pod's name) and a random suffix."""
    lease_duration: float = Field(15.0, ge=1)
    """Seconds another replica waits, after it last saw the lease renewed, before it takes the lease over
    (client-go's LeaseDuration); written to the Lease rounded up to whole seconds."""
    lease_renew_deadline: float | None = Field(None, gt=0)
    """Seconds after its last renewal began that the holder stops evicting when it could not renew
    (client-go's RenewDeadline); shorter than --lease-duration. Default: two thirds of it (10 of 15)."""
    lease_retry_period: float | None = Field(None, gt=0)
    """Seconds between two looks at the lease (client-go's RetryPeriod); shorter than the renew deadline.
    Default: two fifteenths of --lease-duration (2 of 15)."""
    pod_metrics: Literal["auto", "on", "off"] = "auto"
    """Poll the pods' usage from metrics-server (`pods.metrics.k8s.io`) every --metrics-interval for the usage
    estimates (`estimate`, `recent.estimates`): auto (with a cluster and no --pods file), on, off
    (docs/guides/usage-estimates.md)."""
    pod_metrics_file: Path | None = None
    """Offline pod usage: a metrics.k8s.io PodMetricsList in JSON or YAML, for the pods of --pods."""
    usage_workloads: int = Field(10_000, ge=1)
    """Most workloads whose usage summary is kept (a few hundred bytes each); the least recently sampled or
    asked for are forgotten first, and fall back until sampled again."""
    usage_window: int = Field(6, ge=1)
    """Polls of each workload's usage the estimate is made from (6 polls of 15 s: the last minute and a half)."""
    usage_quantile: float = Field(0.9, gt=0, le=1)
    """The quantile of the pods' usage each poll keeps per workload, and of those the estimate takes."""
    usage_fallback: Literal["requests", "limits"] = "requests"
    """The estimate of a pod whose workload was never sampled: its requests, or its limits (a container
    without a limit counts its request), times --usage-fallback-factor."""
    usage_fallback_factor: float = Field(1.0, ge=0)
    """The factor of the fallback (1: the fallback is the requests, or limits, themselves)."""

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        """Contradictory settings refuse to start, one clear sentence each (`rulesched serve` exits 2)."""
        problems = [message for broken, message in _contradictions(self) if broken]
        if problems:
            raise ValueError("; ".join(problems))
        return self


def _contradictions(s: Settings) -> list[tuple[bool, str]]:
    tls = s.tls_cert_file is not None
    return [
        (s.enable_bind and s.cluster == "off", "--enable-bind needs a cluster, but --cluster is off"),
        (s.tls_key_file is not None and not tls, "--tls-key-file needs --tls-cert-file"),
        (tls and s.tls_key_file is None, "--tls-cert-file needs --tls-key-file"),
        (s.tls_client_ca_file is not None and not tls, "--tls-client-ca-file needs --tls-cert-file and --tls-key-file"),
        (bool(s.tls_client_names) and s.tls_client_ca_file is None, "--tls-client-name needs --tls-client-ca-file"),
        (s.metrics_max_age < s.metrics_interval, "--metrics-max-age is shorter than --metrics-interval: every sample "
         "would age out between two polls"),
        (s.requeue and s.cluster == "off", "--requeue needs a cluster, but --cluster is off"),
        (s.record_max_bytes < s.record_segment_bytes, "--record-max-bytes is smaller than --record-segment-bytes: "
         "not even one segment would be kept"),
        (s.deschedule == "on" and s.cluster == "off", "--deschedule on needs a cluster, but --cluster is off"),
        (lease_times(s) is None, "the lease's times must be --lease-duration > --lease-renew-deadline > "
         "--lease-retry-period"),
    ]  # fmt: skip


def lease_times(s: Settings) -> tuple[float, float, float] | None:
    """The lease's duration, renew deadline and retry period (defaults scaled as client-go's 15, 10 and 2 s);
    None when they are not in that order."""
    renew = s.lease_renew_deadline if s.lease_renew_deadline is not None else s.lease_duration * 2 / 3
    retry = s.lease_retry_period if s.lease_retry_period is not None else s.lease_duration * 2 / 15
    return (s.lease_duration, renew, retry) if s.lease_duration > renew > retry else None
