"""Which cluster rulesched uses: credentials resolution, --cluster auto|on|off, files versus the live API."""

from __future__ import annotations

import json
import logging
import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import trustme

from rulesched.cluster import Cluster, build_cluster
from rulesched.cluster.kube.access import ClusterConfigError, KubeEnvironment, find_config
from rulesched.cluster.metrics.metrics_server import MetricsServerSource
from rulesched.cluster.nodes.nodecache import NodeCache
from rulesched.cluster.sources import FileMetricsSource, FileNodeSource
from rulesched.settings import Settings
from rulesched.writes.bind import ApiBinder
from tests.kubeapi import TOKEN, KubeAPI, wait_for, write_kubeconfig
from tests.paths import APISERVER_FIXTURES, EXAMPLES, RULES
from tests.server import running

NODES_FILE = APISERVER_FIXTURES / "a1-nodes-list.json"
METRICS_FILE = APISERVER_FIXTURES / "m1-metrics-nodes-list.json"


@pytest.fixture
def nowhere(tmp_path: Path) -> KubeEnvironment:
    """No credentials at all: an empty environment, an empty home, no service account."""
    (tmp_path / "home").mkdir()
    return KubeEnvironment(environ={}, home=tmp_path / "home", service_account_dir=tmp_path / "no-sa")


@pytest.fixture
def kubeconfig(api: KubeAPI, tmp_path: Path) -> Path:
    return api.kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def built() -> Iterator[list[Cluster]]:
    """Clusters built by a test, stopped (threads and connections) afterwards."""
    clusters: list[Cluster] = []
    yield clusters
    for cluster in clusters:
        cluster.stop()


def build(clusters: list[Cluster], config: Settings, env: KubeEnvironment) -> Cluster:
    cluster = build_cluster(config, env, bind=ApiBinder)
    clusters.append(cluster)
    return cluster


def test_explicit_kubeconfig_gives_the_live_sources(
    api: KubeAPI, kubeconfig: Path, nowhere: KubeEnvironment, built: list[Cluster]
) -> None:
    cluster = build(built, Settings(kubeconfig=kubeconfig, metrics_interval=0.05), nowhere)
    assert isinstance(cluster.nodes, NodeCache)
    assert isinstance(cluster.metrics, MetricsServerSource)
    assert cluster.binder is None
    assert cluster.description == (
        f"Kubernetes API {api.url} via kubeconfig {kubeconfig} (--kubeconfig), nodes from the API (list+watch), "
        "metrics from metrics-server every 0.05s, pods from the API (list+watch), "
        "namespaces from the API (list+watch), custom metrics from the MetricSources' Prometheus queries, "
        "pod usage from metrics-server every 0.05s"
    )
    cluster.start()
    assert cluster.nodes.wait_ready(5)
    assert cluster.nodes.get("node-a") is not None
    wait_for(lambda: cluster.metrics is not None and cluster.metrics.usage("node-a") is not None)


def test_cluster_off_never_uses_the_api(kubeconfig: Path, nowhere: KubeEnvironment, built: list[Cluster]) -> None:
    cluster = build(built, Settings(cluster="off", kubeconfig=kubeconfig), nowhere)
    assert (cluster.nodes, cluster.metrics, cluster.binder, cluster.access) == (None, None, None, None)
    assert cluster.prometheus is None
    assert cluster.description == (
        "no cluster, no node source (full mode only), no metrics, MetricSource queries not polled "
        "(--prometheus on polls them)"
    )
    # --enable-bind with --cluster off is refused by Settings itself (tests/test_settings_checks.py).


def test_cluster_on_without_credentials_is_a_clear_error(nowhere: KubeEnvironment) -> None:
    with pytest.raises(ClusterConfigError, match=r"--cluster on: no Kubernetes credentials found .* --kubeconfig"):
        build_cluster(Settings(cluster="on"), nowhere)


def test_cluster_auto_without_credentials_runs_without_a_cluster(nowhere: KubeEnvironment) -> None:
    cluster = build_cluster(Settings(cluster="auto"), nowhere)
    assert cluster.access is None
    assert cluster.prometheus is not None  # Prometheus is not the Kubernetes API: its queries are polled
    assert cluster.description == (
        "no cluster, no node source (full mode only), no metrics, custom metrics from the MetricSources' "
        "Prometheus queries"
    )


def test_cluster_auto_with_a_nodes_file_uses_the_files_only(
    kubeconfig: Path, nowhere: KubeEnvironment, built: list[Cluster]
) -> None:
    env = KubeEnvironment(environ={"KUBECONFIG": str(kubeconfig)}, home=nowhere.home)
    cluster = build(built, Settings(nodes_file=NODES_FILE, metrics_file=METRICS_FILE), env)
    assert cluster.access is None
    assert isinstance(cluster.nodes, FileNodeSource)
    assert isinstance(cluster.metrics, FileMetricsSource)
    assert cluster.prometheus is None  # a metrics file: an offline run, its custom values (none here) stand in
    assert cluster.description == (
        f"no cluster, nodes from {NODES_FILE}, metrics from {METRICS_FILE}, MetricSource queries not polled "
        "(--prometheus on polls them)"
    )


@pytest.mark.parametrize(("deschedule", "kept"), [("off", None), ("dry-run", 5)])
def test_the_descheduler_has_placement_views_of_the_pods_file(
    nowhere: KubeEnvironment, built: list[Cluster], deschedule: str, kept: int | None
) -> None:
    pods = EXAMPLES / "cluster" / "pods.yaml"
    config = Settings(cluster="off", nodes_file=NODES_FILE, pods_file=pods, deschedule=deschedule)
    cluster = build(built, config, nowhere)
    assert (len(cluster.placements) if cluster.placements is not None else None) == kept


def test_cluster_on_with_a_nodes_file_takes_metrics_and_binding_from_the_api(
    api: KubeAPI, kubeconfig: Path, nowhere: KubeEnvironment, built: list[Cluster]
) -> None:
    config = Settings(cluster="on", kubeconfig=kubeconfig, nodes_file=NODES_FILE, enable_bind=True)
    cluster = build(built, config, nowhere)
    assert isinstance(cluster.nodes, FileNodeSource)
    assert isinstance(cluster.metrics, MetricsServerSource)
    assert isinstance(cluster.binder, ApiBinder)
    api.add_pod("default", "web-1", "uid-web-1")
    assert cluster.binder.bind("default", "web-1", "uid-web-1", "node-a") == ""
    assert api.pod("default", "web-1").node == "node-a"


def test_the_binder_is_made_by_the_writer_the_server_gives(
    api: KubeAPI, kubeconfig: Path, nowhere: KubeEnvironment, built: list[Cluster]
) -> None:
    """The cluster package only reads: the binder comes from the function given (`writes.bind.ApiBinder`)."""
    config = Settings(cluster="on", kubeconfig=kubeconfig, nodes_file=NODES_FILE, enable_bind=True)
    made: list[object] = []

    def bind(client: object) -> ApiBinder:
        made.append(client)
        return ApiBinder(client)

    cluster = build_cluster(config, nowhere, bind=bind)
    built.append(cluster)
    assert isinstance(cluster.binder, ApiBinder)
    assert cluster.access is not None
    assert made == [cluster.access.api]
    assert "binding through the API" in cluster.description
    unbound = build_cluster(config, nowhere)
    built.append(unbound)
    assert unbound.binder is None
    assert "binding" not in unbound.description


def test_metrics_file_wins_over_metrics_server(
    kubeconfig: Path, nowhere: KubeEnvironment, built: list[Cluster]
) -> None:
    cluster = build(built, Settings(kubeconfig=kubeconfig, metrics_file=METRICS_FILE), nowhere)
    assert isinstance(cluster.nodes, NodeCache)
    assert isinstance(cluster.metrics, FileMetricsSource)
    assert f"nodes from the API (list+watch), metrics from {METRICS_FILE}, pods from the API" in cluster.description


def test_kubeconfig_variable_is_used_and_may_list_several_files(kubeconfig: Path, nowhere: KubeEnvironment) -> None:
    env = KubeEnvironment(environ={"KUBECONFIG": f"/nonexistent/config:{kubeconfig}"}, home=nowhere.home)
    choice = find_config(None, env)
    assert choice is not None
    assert (choice.kind, choice.paths, choice.origin) == ("kubeconfig", (kubeconfig,), "$KUBECONFIG")


def test_home_kube_config_is_the_last_resort(api: KubeAPI, nowhere: KubeEnvironment, built: list[Cluster]) -> None:
    (nowhere.home / ".kube").mkdir()
    api.kubeconfig(nowhere.home / ".kube" / "config")
    cluster = build(built, Settings(cluster="on"), nowhere)
    assert cluster.access is not None
    assert cluster.access.choice.origin == "~/.kube/config"
    assert isinstance(cluster.nodes, NodeCache)
    cluster.start()
    assert cluster.nodes.wait_ready(5)


def test_missing_explicit_kubeconfig_is_an_error_even_in_auto(tmp_path: Path, nowhere: KubeEnvironment) -> None:
    with pytest.raises(ClusterConfigError, match=r"--kubeconfig .*missing: no such file"):
        build_cluster(Settings(kubeconfig=tmp_path / "missing"), nowhere)


def test_broken_default_kubeconfig_is_skipped_in_auto_and_fatal_in_on(
    nowhere: KubeEnvironment, caplog: pytest.LogCaptureFixture
) -> None:
    (nowhere.home / ".kube").mkdir()
    (nowhere.home / ".kube" / "config").write_text("apiVersion: v1\nkind: Config\ncurrent-context: nowhere\n")
    cluster = build_cluster(Settings(cluster="auto"), nowhere)
    assert cluster.access is None
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "running without a cluster" in warning.getMessage()
    with pytest.raises(ClusterConfigError, match=r"cannot use kubeconfig .*config \(~/.kube/config\)"):
        build_cluster(Settings(cluster="on"), nowhere)


@pytest.fixture
def tls_api() -> Iterator[tuple[KubeAPI, trustme.CA]]:
    ca = trustme.CA()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    server = KubeAPI(tls=context)
    yield server, ca
    server.close()


def service_account(directory: Path, ca: trustme.CA, api: KubeAPI) -> KubeEnvironment:
    directory.mkdir()
    (directory / "token").write_text(TOKEN)
    ca.cert_pem.write_to_path(str(directory / "ca.crt"))
    environ = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(api.port)}
    return KubeEnvironment(environ=environ, home=directory / "home", service_account_dir=directory)


def test_in_cluster_service_account_is_used_over_tls(
    tls_api: tuple[KubeAPI, trustme.CA], tmp_path: Path, built: list[Cluster]
) -> None:
    api, ca = tls_api
    env = service_account(tmp_path / "sa", ca, api)
    cluster = build(built, Settings(cluster="auto"), env)
    assert cluster.description.startswith(f"Kubernetes API {api.url} via the in-cluster service account, ")
    assert isinstance(cluster.nodes, NodeCache)
    cluster.start()
    assert cluster.nodes.wait_ready(5)
    assert cluster.nodes.size() == 5


def test_explicit_kubeconfig_wins_over_the_service_account(
    tls_api: tuple[KubeAPI, trustme.CA], api: KubeAPI, tmp_path: Path, built: list[Cluster]
) -> None:
    tls, ca = tls_api
    env = service_account(tmp_path / "sa", ca, tls)
    explicit = write_kubeconfig(tmp_path / "explicit", api.url)
    cluster = build(built, Settings(kubeconfig=explicit), env)
    assert cluster.access is not None
    assert cluster.access.host == api.url


def test_extender_in_names_mode_reads_the_live_cluster(api: KubeAPI, kubeconfig: Path, tmp_path: Path) -> None:
    """The whole path: rulesched serve with --kubeconfig, kube-scheduler's calls answered from the API's state."""
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "xy-least-cpu.yaml").write_text((RULES / "xy-least-cpu.yaml").read_text())
    pod = json.loads((EXAMPLES / "pod.json").read_text())
    api.add_pod("default", "web-1", pod["metadata"]["uid"])
    config = Settings(rules_dir=rules, kubeconfig=kubeconfig, cluster="on", enable_bind=True, metrics_interval=0.05)
    with running(config) as server, httpx.Client(base_url=server.url) as client:
        wait_for(lambda: client.get("/readyz").status_code == 200, what="/readyz")
        answer = client.post("/filter", json={"Pod": pod, "NodeNames": ["node-a", "node-c", "node-f"]}).json()
        assert answer["NodeNames"] == ["node-a"]
        assert set(answer["FailedAndUnresolvableNodes"]) == {"node-c", "node-f"}
        api.add_node("node-f", {"filter.xy.com": "yes"})
        wait_for(lambda: client.post("/filter", json={"Pod": pod, "NodeNames": ["node-f"]}).json()["NodeNames"])
        least_busy_first = [{"Host": "node-a", "Score": 10}, {"Host": "node-b", "Score": 0}]  # 250m versus 1500m
        prioritize = {"Pod": pod, "NodeNames": ["node-a", "node-b"]}
        wait_for(lambda: client.post("/prioritize", json=prioritize).json() == least_busy_first, what="the scores")
        binding = {"PodName": "web-1", "PodNamespace": "default", "PodUID": pod["metadata"]["uid"], "Node": "node-a"}
        assert client.post("/bind", json=binding).json() == {"Error": ""}
    assert api.pod("default", "web-1").node == "node-a"
