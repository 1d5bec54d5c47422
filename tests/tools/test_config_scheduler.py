"""`rulesched config scheduler`: a KubeSchedulerConfiguration kube-scheduler decodes strictly, for every flag."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from rulesched.cli import main
from rulesched.tools.scheduler_config import EXTENDER_FIELDS, TLS_FIELDS, ConfigError, duration_seconds
from tests.paths import SCHEDULER_FIXTURES

TOP_LEVEL_FIELDS = {"apiVersion", "kind", "clientConnection", "leaderElection", "profiles", "extenders"}
LEADER_ELECTION_FIELDS = {
    "leaderElect",
    "leaseDuration",
    "renewDeadline",
    "retryPeriod",
    "resourceLock",
    "resourceName",
    "resourceNamespace",
}
DEFAULT_EXTENDER = {
    "urlPrefix": "http://127.0.0.1:8888",
    "filterVerb": "filter",
    "prioritizeVerb": "prioritize",
    "weight": 1,
    "nodeCacheCapable": True,
    "enableHTTPS": False,
    "httpTimeout": "5s",
    "ignorable": False,
}


def generate(capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, Any]:
    assert main(["config", "scheduler", *flags]) == 0
    config: dict[str, Any] = yaml.safe_load(capsys.readouterr().out)
    assert_only_known_fields(config)
    return config


def assert_only_known_fields(config: dict[str, Any]) -> None:
    assert set(config) <= TOP_LEVEL_FIELDS
    assert set(config.get("leaderElection", {})) <= LEADER_ELECTION_FIELDS
    for profile in config.get("profiles", []):
        assert set(profile) == {"schedulerName"}
    for extender in config["extenders"]:
        assert set(extender) <= EXTENDER_FIELDS
        assert set(extender.get("tlsConfig", {})) <= TLS_FIELDS
        for resource in extender.get("managedResources", []):
            assert set(resource) == {"name", "ignoredByScheduler"}


def test_the_default_is_the_main_scheduler_calling_rulesched_in_names_mode(capsys: pytest.CaptureFixture[str]) -> None:
    assert generate(capsys) == {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "extenders": [DEFAULT_EXTENDER],
    }


def test_the_extender_entry_matches_a_configuration_a_real_scheduler_ran(capsys: pytest.CaptureFixture[str]) -> None:
    real = yaml.safe_load((SCHEDULER_FIXTURES / "bind-api" / "scheduler-config.yaml").read_text())
    ours = generate(capsys, "--url", "http://127.0.0.1:18888", "--no-node-cache", "--bind")
    assert ours["extenders"] == real["extenders"]


@pytest.mark.parametrize(
    ("flags", "changes"),
    [
        (["--url", "http://rulesched.rulesched-system.svc:8888/v1"], {"urlPrefix": "http://rulesched.rulesched-system.svc:8888/v1"}),
        (["--weight", "5"], {"weight": 5}),
        (["--no-node-cache"], {"nodeCacheCapable": False}),
        (["--node-cache"], {}),
        (["--bind"], {"bindVerb": "bind"}),
        (["--preempt"], {"preemptVerb": "preempt"}),
        (["--timeout", "1m30s"], {"httpTimeout": "1m30s"}),
        (["--timeout", "250ms", "--request-deadline", "0.1"], {"httpTimeout": "250ms"}),
        (["--ignorable"], {"ignorable": True}),
        (
            ["--managed-resource", "example.com/foo", "--managed-resource", "example.com/bar"],
            {
                "managedResources": [
                    {"name": "example.com/foo", "ignoredByScheduler": False},
                    {"name": "example.com/bar", "ignoredByScheduler": False},
                ]
            },
        ),
        (
            ["--url", "https://rulesched:8888", "--tls-ca-file", "/etc/rulesched/ca.crt"],
            {
                "urlPrefix": "https://rulesched:8888",
                "enableHTTPS": True,
                "tlsConfig": {"caFile": "/etc/rulesched/ca.crt"},
            },
        ),
        (
            [
                "--url", "https://rulesched:8888",
                "--tls-ca-file", "/ca.crt",
                "--tls-cert-file", "/client.crt",
                "--tls-key-file", "/client.key",
                "--tls-server-name", "rulesched.rulesched-system.svc",
            ],
            {
                "urlPrefix": "https://rulesched:8888",
                "enableHTTPS": True,
                "tlsConfig": {
                    "caFile": "/ca.crt",
                    "certFile": "/client.crt",
                    "keyFile": "/client.key",
                    "serverName": "rulesched.rulesched-system.svc",
                },
            },
        ),
        # Without a CA the system's roots verify the certificate: enableHTTPS would skip the check.
        (["--url", "https://rulesched.example.com"], {"urlPrefix": "https://rulesched.example.com"}),
    ],
)  # fmt: skip
def test_each_flag_changes_only_its_extender_field(
    capsys: pytest.CaptureFixture[str], flags: list[str], changes: dict[str, Any]
) -> None:
    config = generate(capsys, *flags)
    assert config["extenders"] == [{**DEFAULT_EXTENDER, **changes}]
    assert set(config) == {"apiVersion", "kind", "extenders"}


def test_fields_keep_upstreams_order(capsys: pytest.CaptureFixture[str]) -> None:
    config = generate(
        capsys, "--preempt", "--bind", "--url", "https://x:1", "--tls-ca-file", "/ca", "--managed-resource", "r"
    )
    assert list(config["extenders"][0]) == [
        "urlPrefix",
        "filterVerb",
        "prioritizeVerb",
        "preemptVerb",
        "bindVerb",
        "weight",
        "nodeCacheCapable",
        "enableHTTPS",
        "tlsConfig",
        "httpTimeout",
        "ignorable",
        "managedResources",
    ]


def test_a_second_scheduler_has_its_own_profile_and_lease(capsys: pytest.CaptureFixture[str]) -> None:
    config = generate(capsys, "--scheduler-name", "rulesched")
    assert config["profiles"] == [{"schedulerName": "rulesched"}]
    assert config["leaderElection"] == {
        "leaderElect": True,
        "resourceName": "rulesched",
        "resourceNamespace": "rulesched-system",
    }
    assert config["extenders"] == [DEFAULT_EXTENDER]


def test_the_lease_namespace_and_kubeconfig_can_be_chosen(capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["--scheduler-name", "gpu-aware", "--namespace", "kube-system", "--kubeconfig", "/etc/k/s.conf"]
    config = generate(capsys, *flags)
    assert config["leaderElection"]["resourceNamespace"] == "kube-system"
    assert config["leaderElection"]["resourceName"] == "gpu-aware"
    assert config["clientConnection"] == {"kubeconfig": "/etc/k/s.conf"}


def test_the_output_is_plain_yaml_with_the_api_version_first(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "scheduler"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:3] == [
        "apiVersion: kubescheduler.config.k8s.io/v1",
        "kind: KubeSchedulerConfiguration",
        "extenders:",
    ]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--weight", "0"], "--weight must be > 0"),
        (["--timeout", "5"], "--timeout '5' is not a Go duration"),
        (["--timeout", "5 s"], "is not a Go duration"),
        (["--timeout", "0s"], "--timeout must be longer than 0"),
        (["--timeout", "2s"], "--timeout 2s leaves rulesched no time to answer after its request deadline (2s)"),
        (["--url", "127.0.0.1:8888"], "must be http(s)://host:port[/path]"),
        (["--url", "https://x", "--tls-cert-file", "/c"], "--tls-cert-file and --tls-key-file go together"),
        (["--tls-ca-file", "/ca"], "TLS options need an https:// --url"),
        (["--scheduler-name", "default-scheduler"], "is taken by the main scheduler"),
    ],
)
def test_invalid_flags_are_refused(capsys: pytest.CaptureFixture[str], flags: list[str], message: str) -> None:
    assert main(["config", "scheduler", *flags]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert message in captured.err


@pytest.mark.parametrize(
    ("text", "seconds"), [("5s", 5.0), ("1m30s", 90.0), ("500ms", 0.5), ("1.5h", 5400.0), ("10us", 1e-5)]
)
def test_go_durations(text: str, seconds: float) -> None:
    assert duration_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "s", "5S", "-5s", "5 s", "5sec"])
def test_invalid_go_durations(text: str) -> None:
    with pytest.raises(ConfigError):
        duration_seconds(text)
